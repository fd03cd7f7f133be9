"""Cross-epoch overlap (``parallel.cross_epoch_chunks``): the schedule as data, and
the distributed pipeline against the simulator's semantics of it, tensor for tensor
(every stage but the last runs the next epoch's first K chunks at the turn, with the
weights of before its step)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from gnnpipe.engine import schedule as sch
from tests.engine._dist_util import run_workers
from tests.engine.test_pipeline import TOL, build_model, chunked_for, make_config

ON = dict(shuffle=True, snapshot_period=2, unbiased_scale=True, history_init="exact")
R1 = dict(shuffle=True, snapshot_period=1, unbiased_scale=False, history_init="exact")
EPOCHS = 4


# --------------------------------------------------------------- schedule (no processes)
def _links(programs: list[tuple[sch.Action, ...]], num_stages: int) -> None:
    """Over consecutive epochs' programs, every link s -> s+1 carries its sends in the
    order the receiver posts its receives (FIFO on every backend, NCCL included), and
    every forward of a stage comes after its input was waited for."""
    for s in range(num_stages - 1):
        sends = [(a.chunk, a.ahead) for p in programs for a in p if a.stage == s and isinstance(a, sch.SendForward)]
        posts = [(a.chunk, a.ahead) for p in programs for a in p
                 if a.stage == s + 1 and isinstance(a, sch.PostRecvForward)]
        assert [c for c, _ in sends] == [c for c, _ in posts], (s, sends, posts)
        gsends = [a.chunk for p in programs for a in p if a.stage == s + 1 and isinstance(a, sch.SendBackward)]
        gposts = [a.chunk for p in programs for a in p if a.stage == s and isinstance(a, sch.PostRecvBackward)]
        assert gsends == gposts


@pytest.mark.parametrize("stages,chunks,k", [(2, 4, 1), (2, 4, 2), (3, 6, 2), (4, 5, 5)])
def test_ahead_chunks_run_at_the_turn_and_are_skipped_next_epoch(stages, chunks, k):
    orders = [sch.epoch_order(chunks, e, 7, True) for e in range(3)]
    progs = []
    for e in range(3):
        carried = k if e > 0 else 0
        ahead = orders[e + 1][:k] if e < 2 else ()
        progs.append(sch.build_schedule(stages, chunks, orders[e], carried=carried, ahead=ahead).actions)
    _links(progs, stages)
    for e in range(3):
        for s in range(stages):
            prog = [a for a in progs[e] if a.stage == s]
            fwd = [a.chunk for a in prog if isinstance(a, sch.Forward) and not a.ahead]
            early = [a.chunk for a in prog if isinstance(a, sch.Forward) and a.ahead]
            if s < stages - 1:
                assert fwd == list(orders[e][k if e > 0 else 0:])
                assert early == (list(orders[e + 1][:k]) if e < 2 else [])
                if early:  # after the last forward, before the first backward wait
                    i_begin = next(i for i, a in enumerate(prog) if isinstance(a, sch.BeginNext))
                    i_wait = next(i for i, a in enumerate(prog) if isinstance(a, sch.WaitRecvBackward))
                    i_last_fwd = max((i for i, a in enumerate(prog) if isinstance(a, sch.Forward) and not a.ahead),
                                     default=-1)  # K = C: every chunk ran at the last turn
                    assert i_last_fwd < i_begin < i_wait
            else:
                assert fwd == list(orders[e]) and early == []
                assert not any(isinstance(a, sch.BeginNext) for a in prog)
            assert [a.chunk for a in prog if isinstance(a, sch.Backward)] == list(reversed(orders[e]))


def test_schedule_refuses_what_it_cannot_overlap():
    with pytest.raises(ValueError, match="carried"):
        sch.build_schedule(1, 4, [0, 1, 2, 3], ahead=[0])
    with pytest.raises(ValueError, match="carried"):
        sch.build_schedule(2, 4, [0, 1, 2, 3], carried=5)
    with pytest.raises(ValueError, match="ahead"):
        sch.build_schedule(2, 4, [0, 1, 2, 3], ahead=[1, 1])


def test_config_checks_cross_epoch_chunks():
    from gnnpipe.config import ParallelConfig
    from gnnpipe.errors import ConfigError

    assert ParallelConfig(mode="pipeline", workers=2, cross_epoch_chunks=8).cross_epoch_chunks == 8
    with pytest.raises(ConfigError, match="cross_epoch_chunks: expected an integer <= chunks=8"):
        ParallelConfig(mode="pipeline", workers=2, cross_epoch_chunks=9)
    with pytest.raises(ConfigError, match="cross_epoch_chunks: expected an integer >= 0"):
        ParallelConfig(mode="pipeline", workers=2, cross_epoch_chunks=-1)
    for mode, kw in (("graph", {}), ("hybrid", {"ways": 2}), ("single", {"workers": 1})):
        with pytest.raises(ConfigError, match=f"cross_epoch_chunks: expected 0 in {mode} mode"):
            ParallelConfig(mode=mode, **{"workers": 2, **kw}, cross_epoch_chunks=1)


# ---------------------------------------------------------- distributed vs simulator
def _config(case: dict[str, Any]):
    cfg = make_config(case)
    return dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel,
                                                                 cross_epoch_chunks=case["k"]))


def _continues(case: dict[str, Any], epoch: int) -> bool:
    """Epochs 1..EPOCHS; ``pause`` names an epoch after which nothing is begun ahead
    (as before a checkpoint)."""
    return epoch < EPOCHS and epoch != case.get("pause")


def run_case(rank: int, world: int, comm: Any, case: dict[str, Any]) -> dict[str, Any]:
    """Train one case for EPOCHS epochs on this rank; return what it owns and sent."""
    from tests.engine._context import arena_threshold

    with arena_threshold(case):
        return _run_case(rank, world, comm, case)


def _run_case(rank: int, world: int, comm: Any, case: dict[str, Any]) -> dict[str, Any]:
    from gnnpipe.engine.runners import RUNNERS
    from tests.engine._context import make_context

    cfg = _config(case)
    chunked = chunked_for(case)
    runner = RUNNERS["pipeline"](make_context(rank, cfg, chunked, comm, build_model(cfg, chunked.graph)))
    runner.prepare()
    epochs = []
    for epoch in range(1, EPOCHS + 1):
        st = runner.train_epoch(epoch, _continues(case, epoch))
        epochs.append({"loss": st.loss,
                       "grads": {k: p.grad.detach().clone() for k, p in runner.owned_parameters().items()},
                       "params": {k: p.detach().clone() for k, p in runner.owned_parameters().items()},
                       "logits": runner.last_logits(), "bytes": st.bytes_sent})
        if epoch == 2:
            epochs[-1]["acc"] = runner.evaluate()  # an evaluation between a turn and its epoch
    runner.end_training()
    return {"epochs": epochs}


def cases_worker(rank: int, world: int, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from gnnpipe.engine.comm import Comm

    comm = Comm(rank, world)
    return [run_case(rank, world, comm, c) for c in cases]


def simulate(case: dict[str, Any]) -> list[dict[str, Any]]:
    from gnnpipe.engine.simulator import PipelineSimulator

    cfg = _config(case)
    chunked = chunked_for(case)
    sim = PipelineSimulator(build_model(cfg, chunked.graph), chunked, cfg)
    out = []
    for epoch in range(1, EPOCHS + 1):
        carried = case["k"] if epoch > 1 and _continues(case, epoch - 1) else 0
        loss = sim.train_epoch(epoch, carried=carried)
        out.append({"loss": loss, "grads": sim.gradients(),
                    "params": {k: p.detach().clone() for k, p in sim.model.named_parameters()},
                    "logits": sim.last_logits().clone()})
        if epoch == 2:
            out[-1]["acc"] = sim.evaluate()
    return out


def _merge(results: list[dict[str, Any]], e: int, key: str) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for r in results:
        out.update(r["epochs"][e][key])
    return out


def assert_matches(results: list[dict[str, Any]], ref: list[dict[str, Any]]) -> None:
    for e in range(EPOCHS):
        for r in results:
            assert r["epochs"][e]["loss"] == pytest.approx(ref[e]["loss"], rel=1e-10, abs=1e-12)
        grads, params = _merge(results, e, "grads"), _merge(results, e, "params")
        assert set(grads) == set(ref[e]["grads"])
        for name in grads:
            torch.testing.assert_close(grads[name], ref[e]["grads"][name], **TOL, msg=f"grad {name} epoch {e + 1}")
            torch.testing.assert_close(params[name], ref[e]["params"][name], **TOL, msg=f"param {name} epoch {e + 1}")
        logits = torch.full_like(ref[e]["logits"], float("nan"))
        for r in results:
            got = r["epochs"][e]["logits"]
            if got is not None:
                logits[got[0]] = got[1]
        torch.testing.assert_close(logits, ref[e]["logits"], **TOL)
    for r in results:
        assert r["epochs"][1]["acc"] == pytest.approx(ref[1]["acc"])


CASES2 = (
    [dict(mode="pipeline", workers=2, chunks=5, model=m, k=2, dropout=0.5, dropout_masks="row", **ON)
     for m in ("gcn", "sage", "gcnii", "resgcn+")]
    + [dict(mode="pipeline", workers=2, chunks=5, model="gcnii", k=1, **R1),
       dict(mode="pipeline", workers=2, chunks=5, model="gcn", k=5, dropout=0.5, dropout_masks="row",
            input_proj=True, classifier=True, **ON),
       # Nothing begun ahead after epoch 2 (a checkpoint's epoch): epoch 3 starts afresh.
       dict(mode="pipeline", workers=2, chunks=5, model="gcnii", k=2, pause=2, **ON),
       # Saved tensors in the arena: a chunk's ahead forward must not reuse the slots
       # its backward of the epoch before still reads (engine.saved_arena: parity).
       dict(mode="pipeline", workers=2, chunks=5, model="resgcn+", k=2, dropout=0.5, dropout_masks="row",
            arena_all=True, **ON)]
)
CASES3 = [dict(mode="pipeline", workers=3, chunks=6, model="gcnii", layers=5, k=2, dropout=0.5,
               dropout_masks="row", **ON)]


@pytest.fixture(scope="module")
def results2():
    res = run_workers(cases_worker, 2, CASES2, timeout=300)
    return [[res[r][c] for r in range(2)] for c in range(len(CASES2))]


@pytest.mark.dist
@pytest.mark.parametrize("i", range(len(CASES2)), ids=lambda i: f"{i}-{CASES2[i]['model']}-K{CASES2[i]['k']}")
def test_cross_epoch_pipeline_equals_simulator(results2, i):
    assert_matches(results2[i], simulate(CASES2[i]))


@pytest.mark.dist
@pytest.mark.parametrize("i", [0, 2], ids=["gcn-no-encode", "gcnii"])
def test_cross_epoch_differs_from_the_synchronous_schedule(results2, i):
    # The ahead chunks' stale weights must show: the same case without overlap differs
    # (GCN without projection: through the stage-0 layers alone).
    sync = simulate({**CASES2[i], "k": 0})
    got = _merge(results2[i], EPOCHS - 1, "params")
    assert any(not torch.allclose(got[n], sync[-1]["params"][n], rtol=1e-6, atol=1e-9) for n in got)


@pytest.mark.dist
def test_cross_epoch_three_stages_equals_simulator():
    res = run_workers(cases_worker, 3, CASES3, timeout=300)
    assert_matches([res[r][0] for r in range(3)], simulate(CASES3[0]))
