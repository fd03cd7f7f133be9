"""Mode ``pipeline`` (DESIGN.md 5, 7) on real gloo workers: with C = 1 it equals
``single``; with C > 1 it equals the single-process simulator (the oracle): the loss,
EVERY parameter gradient and the updated parameters of each of 3 epochs, and the
last stage's logits, for GCN, GraphSAGE, GCNII and ResGCN+, with every pipeline
technique off and on; and it sends exactly the DESIGN.md 7 bytes.

The helpers here (tiny graph, configs, the worker that runs a list of cases in one
process group, the comparison with the simulator) are shared with test_hybrid.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.engine._dist_util import run_workers
from tests.engine._reference import single_run

pytestmark = pytest.mark.dist

EPOCHS = 3
MODELS = ("gcn", "sage", "gcnii", "resgcn+")
OFF = dict(shuffle=False, snapshot_period=1, unbiased_scale=False, history_init="zeros")
ON = dict(shuffle=True, snapshot_period=2, unbiased_scale=True, history_init="exact")
TOL = dict(rtol=1e-9, atol=1e-11)


# ----------------------------------------------------------------- shared helpers
def tiny_graph(n: int = 36, e: int = 150, seed: int = 5):
    from gnnpipe.data import Graph

    g = torch.Generator().manual_seed(seed)
    f, c = 5, 3
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.randint(0, n, (e,), generator=g)
    x = torch.randn(n, f, generator=g)
    y = torch.randint(0, c, (n,), generator=g)
    perm = torch.randperm(n, generator=g)
    masks = {k: torch.zeros(n, dtype=torch.bool) for k in ("train", "val", "test")}
    masks["train"][perm[: n // 2]] = True
    masks["val"][perm[n // 2: 3 * n // 4]] = True
    masks["test"][perm[3 * n // 4:]] = True
    graph = Graph.from_edge_index(torch.stack([src, dst]), x, y, train_mask=masks["train"],
                                  val_mask=masks["val"], test_mask=masks["test"], num_classes=c, name="tiny")
    return graph.remove_self_loops().validate()


def make_config(case: dict[str, Any]):
    from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig, TrainConfig

    par = {k: case[k] for k in ("shuffle", "snapshot_period", "unbiased_scale", "history_init",
                                "stage_split", "ways", "stage_dtype", "dropout_masks") if k in case}
    return RunConfig(
        model=ModelConfig(model=case["model"], layers=case.get("layers", 4), hidden=5,
                          dropout=case.get("dropout", 0.0),
                          input_proj=case.get("input_proj"), classifier=case.get("classifier")),
        train=TrainConfig(epochs=EPOCHS, lr=0.05, weight_decay=1e-3, layer_weight_decay=2e-3,
                          dtype="float64", seed=3),
        parallel=ParallelConfig(mode=case["mode"], workers=case["workers"], chunks=case["chunks"],
                                device="cpu", partition="metis", **par),
    )


def build_model(cfg, graph):
    from gnnpipe.models import build_model as bm

    torch.manual_seed(cfg.train.seed)
    return bm(cfg.model, in_features=graph.num_features, num_classes=graph.num_classes)


def chunked_for(case: dict[str, Any]):
    from gnnpipe.partition import chunk_graph

    return chunk_graph(tiny_graph(), case["chunks"], method="metis", seed=0, cache=False)


class CallRecorder:
    """Wraps a Comm and counts the methods called on it (while ``active``)."""

    def __init__(self, comm: Any) -> None:
        self._comm = comm
        self.active = False
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._comm, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kw: Any) -> Any:
            if self.active:
                self.calls[name] = self.calls.get(name, 0) + 1
            return attr(*args, **kw)
        return call


def run_case(rank: int, world: int, comm: Any, case: dict[str, Any]) -> dict[str, Any]:
    """Train one case for EPOCHS epochs on this rank; return what it owns and sent."""
    from tests.engine._context import arena_threshold

    with arena_threshold(case):
        return _run_case(rank, world, comm, case)


def _run_case(rank: int, world: int, comm: Any, case: dict[str, Any]) -> dict[str, Any]:
    """Train one case for EPOCHS epochs on this rank; return what it owns and sent."""
    from gnnpipe.engine.runners import RUNNERS
    from tests.engine._context import make_context

    cfg = make_config(case)
    chunked = chunked_for(case)
    recorder = CallRecorder(comm) if case.get("record_calls") else None
    comm = recorder or comm
    runner = RUNNERS[case["mode"]](make_context(rank, cfg, chunked, comm, build_model(cfg, chunked.graph)))
    held = _count_held_after_backward(runner)
    constant_rows = _record_constant_rows(runner)
    runner.prepare()  # the history start
    epochs = []
    for epoch in range(1, EPOCHS + 1):
        if recorder is not None:
            recorder.active = epoch > 1
        st = runner.train_epoch(epoch)
        if recorder is not None:
            recorder.active = False
        epochs.append({
            "loss": st.loss, "bytes": st.bytes_sent,
            "grads": {k: p.grad.detach().clone() for k, p in runner.owned_parameters().items()},
            "params": {k: p.detach().clone() for k, p in runner.owned_parameters().items()},
            "logits": runner.last_logits(),
            "times": (st.compute_s, st.comm_wait_s, st.bubble_s),
            "drift": st.history_drift,
        })
    acc = runner.evaluate()
    stage = getattr(runner, "stage", None)
    return {"epochs": epochs, "acc": acc, "predicted": runner.predicted_bytes(),
            "calls": recorder.calls if recorder is not None else None,
            "way_rows": None if stage is None else (stage.way, stage.rows.way_rows.clone(),
                                                    {l: tuple(b.shape) for l, b in stage.B.items()}),
            "grad_rows": None if stage is None else (stage.grads.rows.rows.clone(),
                                                     {l: tuple(g.shape) for l, g in stage.G.items()},
                                                     len({g.data_ptr() for g in stage.G.values()})),
            "arena_bytes": None if stage is None else stage.arena.reserved_bytes,
            "held_after_backward": held,
            "constant_rows": constant_rows,
            # The layers whose G_l took a slot's memory in the last epoch, and the
            # bytes of the G_l buffers of the stage's own.
            "grads_lent": None if stage is None else (sorted(stage.grads.borrowed), stage.grads.own_bytes)}


def _count_held_after_backward(runner: Any) -> list[tuple[int, int, int]] | None:
    """After each chunk's backward of the stage: (forward sends not yet waited, chunk
    states still holding a forward message, chunk states holding an h0 leaf); None
    for runners without a stage."""
    stage = getattr(runner, "stage", None)
    if stage is None:
        return None
    held: list[tuple[int, int, int]] = []
    backward = stage.backward

    def counted(st: Any, k: int, t: int) -> None:
        backward(st, k, t)
        held.append((sum(not h.done for h in getattr(st, "forward_sends", ())),
                     sum("send" in s for s in st.saved.values()),
                     sum(s.get("h0") is not None for s in st.saved.values())))

    stage.backward = counted
    return held


def _record_constant_rows(runner: Any) -> list[dict[str, Any]] | None:
    """Per chunk forward of the stage: the chunk, its step, the epoch's steps, and the
    rows its operators were told to hold constant (None: the chunk's own operators);
    None for runners without a stage."""
    stage = getattr(runner, "stage", None)
    if stage is None:
        return None
    seen: list[dict[str, Any]] = []
    forward = stage.forward
    for ops in stage.ops.values():
        def held(chunks: Any, ops: Any = ops, held: Any = ops.with_constant_chunks) -> Any:
            out = held(chunks)
            if out.constant is not None:
                seen[-1]["constant"] = out.constant.clone()
            return out
        ops.with_constant_chunks = held

    def recorded(st: Any, k: int, t: int) -> None:
        seen.append({"chunk": k, "step": t, "step_of": st.step_of.clone(), "constant": None})
        forward(st, k, t)

    stage.forward = recorded
    return seen


def cases_worker(rank: int, world: int, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from gnnpipe.engine.comm import Comm

    comm = Comm(rank, world)  # one process group for every case
    return [run_case(rank, world, comm, case) for case in cases]


def merge_ranks(results: list[dict[str, Any]], epoch: int, key: str) -> dict[str, torch.Tensor]:
    """The union over ranks of the owned tensors (each name owned once, or identical
    copies in hybrid after the all-reduce)."""
    out: dict[str, torch.Tensor] = {}
    for r in results:
        for name, t in r["epochs"][epoch][key].items():
            if name in out:
                torch.testing.assert_close(t, out[name], **TOL)
            out[name] = t
    return out


def simulate(case: dict[str, Any], ways: int | None = None):
    """The oracle's per-epoch losses, gradients, parameters and logits."""
    from gnnpipe.engine.simulator import PipelineSimulator

    cfg = make_config(case)
    chunked = chunked_for(case)
    sim = PipelineSimulator(build_model(cfg, chunked.graph), chunked, cfg, ways=ways)
    epochs = []
    for epoch in range(1, EPOCHS + 1):
        loss = sim.train_epoch(epoch)
        epochs.append({"loss": loss, "grads": sim.gradients(),
                       "params": {k: p.detach().clone() for k, p in sim.model.named_parameters()},
                       "logits": sim.last_logits().clone(),
                       "history": dict(sim.last_history), "fresh": dict(sim.last_fresh)})
    return epochs, sim.evaluate(), sim


def assert_matches(results: list[dict[str, Any]], ref_epochs: list[dict[str, Any]], ref_acc=None) -> None:
    """Full tensors: loss, every gradient, every parameter, the logits of every row."""
    names = set(ref_epochs[0]["grads"])
    for e in range(EPOCHS):
        ref = ref_epochs[e]
        for r in results:
            assert r["epochs"][e]["loss"] == pytest.approx(ref["loss"], rel=1e-10, abs=1e-12)
        grads, params = merge_ranks(results, e, "grads"), merge_ranks(results, e, "params")
        assert set(grads) == names and set(params) == names
        for name in names:
            torch.testing.assert_close(grads[name], ref["grads"][name], **TOL, msg=f"grad {name} epoch {e}")
            torch.testing.assert_close(params[name], ref["params"][name], **TOL, msg=f"param {name} epoch {e}")
        logits = torch.full_like(ref["logits"], float("nan"))
        for r in results:
            got = r["epochs"][e]["logits"]
            if got is not None:
                logits[got[0]] = got[1]
        torch.testing.assert_close(logits, ref["logits"], **TOL)
    if ref_acc is not None:
        for r in results:
            assert r["acc"] == pytest.approx(ref_acc)


def single_reference(case: dict[str, Any]):
    """``single`` on the reordered graph: whole-graph forward + Adam."""
    cfg = make_config(case)
    g = chunked_for(case).graph
    return single_run(build_model(cfg, g).to(torch.float64), g, cfg.train, EPOCHS)


def assert_bytes(results: list[dict[str, Any]]) -> None:
    """Counted bytes, summed over ranks, equal the prediction, kind by kind, every epoch."""
    predicted = results[0]["predicted"]
    for r in results:
        assert r["predicted"] == predicted
    for e in range(EPOCHS):
        total: dict[str, int] = {}
        for r in results:
            for k, v in r["epochs"][e]["bytes"].items():
                total[k] = total.get(k, 0) + v
        assert {k: v for k, v in total.items() if v} == {k: v for k, v in predicted.items() if v}


# ---------------------------------------------------------------------- the tests
PIPE2 = (
    [dict(mode="pipeline", workers=2, chunks=1, model=m, **ON) for m in MODELS]
    + [dict(mode="pipeline", workers=2, chunks=5, model=m, **OFF) for m in MODELS]
    + [dict(mode="pipeline", workers=2, chunks=5, model=m, **ON) for m in MODELS]
    + [dict(mode="pipeline", workers=2, chunks=3, model="gcnii", stage_split=(3, 1), **ON)]
    # 30 chunks of 36 vertices: METIS leaves most of them empty (no rows, no messages).
    + [dict(mode="pipeline", workers=2, chunks=30, model="gcnii", **ON)]
    # Stage messages in bfloat16 (activations, h0 and gradients rounded on the wire).
    + [dict(mode="pipeline", workers=2, chunks=5, model=m, stage_dtype="bfloat16", **ON) for m in ("gcn", "gcnii")]
    # Dropout with row masks: one mask per row and layer per epoch, keyed by (seed,
    # epoch, layer, way), so the stages draw the simulator's masks (encode, every layer,
    # the classifier).
    + [dict(mode="pipeline", workers=2, chunks=5, model=m, dropout=0.5, dropout_masks="row", **ON) for m in MODELS]
    + [dict(mode="pipeline", workers=2, chunks=5, model="gcn", dropout=0.5, dropout_masks="row",
            input_proj=True, classifier=True, **ON)]
    # The default chunk masks (each layer call draws): no simulator twin, see below.
    + [dict(mode="pipeline", workers=2, chunks=5, model="gcnii", dropout=0.5, **ON)]
    # Every saved tensor moved into the stage's arena (engine.saved_arena), with and
    # without dropout masks among them; the chunk-mask case against its twin above.
    + [dict(mode="pipeline", workers=2, chunks=5, model=m, dropout=0.5, dropout_masks="row", arena_all=True, **ON)
       for m in MODELS]
    + [dict(mode="pipeline", workers=2, chunks=5, model=m, arena_all=True, **OFF) for m in ("gcn", "resgcn+")]
    # Two chunks of 18 rows, at most 13 of them read by the other: each G_l fits in a
    # layer's largest slot, so it borrows that memory (grad_buffers: lent memory).
    + [dict(mode="pipeline", workers=2, chunks=2, model=m, arena_all=True, **ON) for m in MODELS]
    + [dict(mode="pipeline", workers=2, chunks=5, model="gcnii", dropout=0.5, arena_all=True, **ON)]
)


# test_hybrid.py's cases: run in the same process groups as the pipeline cases, so
# that the engine tests start each world size's worker processes once.
HYB2 = [
    dict(mode="hybrid", workers=2, ways=2, chunks=2, model="gcnii", **OFF),    # graph-mode layout
    dict(mode="graph", workers=2, chunks=2, model="gcnii", **OFF),
    dict(mode="hybrid", workers=2, ways=2, chunks=2, model="resgcn+", **OFF),
    dict(mode="graph", workers=2, chunks=2, model="resgcn+", **OFF),
    dict(mode="hybrid", workers=2, ways=1, chunks=5, model="sage", **ON),      # pipeline layout
    dict(mode="pipeline", workers=2, chunks=5, model="sage", **ON),
    dict(mode="hybrid", workers=2, ways=2, chunks=5, model="gcn", **ON),       # blocks of 3 and 2
    dict(mode="hybrid", workers=2, ways=2, chunks=30, model="gcnii", **ON),    # mostly empty chunks
    # Dropout: each way draws its masks over its rows and encodes its rows itself.
    dict(mode="hybrid", workers=2, ways=2, chunks=5, model="resgcn+", dropout=0.5, dropout_masks="row", **ON),
    dict(mode="hybrid", workers=2, ways=2, chunks=5, model="gcnii", dropout=0.5, dropout_masks="row", **ON),
    dict(mode="hybrid", workers=2, ways=2, chunks=5, model="resgcn+", dropout=0.5, dropout_masks="row",
         arena_all=True, **ON),
]
# Four stages, split (2, 1, 1, 1): h0 crosses three boundaries with the activations.
PIPE4 = [dict(mode="pipeline", workers=4, chunks=6, model="gcnii", layers=5, record_calls=True, **ON)]
HYB4 = [
    dict(mode="hybrid", workers=4, ways=2, chunks=5, model="gcnii", **ON),     # 2 ways x 2 stages
    dict(mode="hybrid", workers=4, ways=4, chunks=4, model="sage", **OFF),     # graph-mode layout
]
WORLD_CASES = {2: list(PIPE2) + HYB2, 4: PIPE4 + HYB4}
_RESULTS: dict[int, list[list[dict[str, Any]]]] = {}


def results_for(world: int, cases: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """[case][rank] results of ``cases``; every case of ``world`` runs in one
    ``run_workers`` call, once per session (cached in THIS module, which both test
    files reach as ``tests.engine.test_pipeline``)."""
    import tests.engine.test_pipeline as shared

    if world not in shared._RESULTS:
        all_cases = shared.WORLD_CASES[world]
        shared._RESULTS[world] = results_by_case(
            run_workers(cases_worker, world, all_cases, timeout=300), len(all_cases))
    all_cases = shared.WORLD_CASES[world]
    return [shared._RESULTS[world][all_cases.index(c)] for c in cases]


@pytest.fixture(scope="module")
def pipe2_results():
    return results_for(2, list(PIPE2))


@pytest.mark.parametrize("i", [i for i, c in enumerate(PIPE2) if c["chunks"] == 1],
                         ids=lambda i: PIPE2[i]["model"])
def test_pipeline_one_chunk_equals_single(pipe2_results, i):
    epochs, acc = single_reference(PIPE2[i])
    assert_matches(pipe2_results[i], epochs, acc)


def simulable(case: dict[str, Any]) -> bool:
    """Whether the simulator draws the case's dropout masks (none, or row masks)."""
    return not case.get("dropout") or case.get("dropout_masks") == "row"


@pytest.mark.parametrize("i", [i for i, c in enumerate(PIPE2) if c["chunks"] > 1 and simulable(c)],
                         ids=lambda i: f"{i}-{PIPE2[i]['model']}-C{PIPE2[i]['chunks']}-"
                                       f"{'on' if PIPE2[i]['shuffle'] else 'off'}")
def test_pipeline_equals_simulator(pipe2_results, i):
    epochs, acc, _ = simulate(PIPE2[i])
    assert_matches(pipe2_results[i], epochs, acc)


def test_gradient_buffers_borrow_the_slots_of_the_first_chunk_back(pipe2_results):
    """Where a layer's largest saved slot holds G_l (two chunks of 18 rows, 13 read by
    the other), every G_l of the stage borrows it and the stage keeps no buffer of its
    own; where none does (five chunks), each G_l is the stage's own. Either way the
    run equals the simulator (test_pipeline_equals_simulator runs both kinds)."""
    lent = [i for i, c in enumerate(PIPE2) if c.get("arena_all") and c["chunks"] == 2]
    assert len(lent) == len(MODELS)
    for i in lent:
        (layers0, own0), (layers1, own1) = (r["grads_lent"] for r in pipe2_results[i])
        assert (layers0, layers1) == ([2], [3, 4]) and own0 == own1 == 0  # layers 1-2 | 3-4
    for i, c in enumerate(PIPE2):
        if c["chunks"] == 5:
            assert all(r["grads_lent"][0] == [] and r["grads_lent"][1] > 0 for r in pipe2_results[i])


def test_forward_messages_and_unused_h0_rows_are_let_go_by_the_first_backward(pipe2_results):
    """A stage's forward messages are waited and dropped at its first backward (the
    gradient it received proves them received), and a model without h0 keeps no copy
    of stage 0's h0 rows per chunk: after every chunk's backward, no chunk's state
    holds either, so they add nothing to the stage's peak in its backward."""
    checked = 0
    for case, res in zip(PIPE2, pipe2_results):
        for rank, r in enumerate(res):
            held = r["held_after_backward"]
            assert held, (case, rank)
            assert all(h[0] == 0 and h[1] == 0 for h in held), (case, rank, held)
            if case["model"] != "gcnii":
                assert all(h[2] == 0 for h in held), (case, rank, held)
            elif rank == 0 and case["chunks"] > 1 and any(h[2] for h in held):
                checked += 1  # GCNII: the chunks not yet back keep their h0 leaf
    assert checked > 0


def test_saved_tensors_in_the_arena_change_nothing(pipe2_results):
    """With every saved tensor moved into the stage's arena (and the slots reused in
    epochs 2 and 3), a chunk-mask run is bit for bit the run without: the same losses,
    gradients, parameters and logits. (The other arena cases match the simulator.)"""
    arena = [i for i, c in enumerate(PIPE2) if c.get("arena_all")]
    assert len(arena) == 11
    for i in arena:
        assert all(r["arena_bytes"] > 0 for r in pipe2_results[i])
    for i, c in enumerate(PIPE2):
        if not c.get("arena_all"):
            assert all(r["arena_bytes"] == 0 for r in pipe2_results[i])  # the tiny graph's tensors: below MIN_BYTES
    twin = {k: v for k, v in PIPE2[arena[-1]].items() if k != "arena_all"}
    ref = pipe2_results[PIPE2.index(twin)]
    for got, want in zip(pipe2_results[arena[-1]], ref):
        for e in range(EPOCHS):
            assert got["epochs"][e]["loss"] == want["epochs"][e]["loss"]
            for key in ("grads", "params"):
                for name, t in want["epochs"][e][key].items():
                    assert torch.equal(got["epochs"][e][key][name], t), (key, name, e)
            if want["epochs"][e]["logits"] is not None:
                assert torch.equal(got["epochs"][e]["logits"][1], want["epochs"][e]["logits"][1])


def test_pipeline_dropout_is_applied(pipe2_results):
    # The dropout cases' agreement with the simulator must not be that of dropout 0.
    for i, case in enumerate(PIPE2):
        if case.get("dropout") and not case.get("input_proj") and not case.get("arena_all"):
            j = PIPE2.index({k: v for k, v in case.items() if k not in ("dropout", "dropout_masks")})
            a, b = merge_ranks(pipe2_results[i], 0, "grads"), merge_ranks(pipe2_results[j], 0, "grads")
            assert any(not torch.allclose(a[k], b[k]) for k in a), case["model"]


def test_pipeline_chunk_masks_draw_other_samples_than_row_masks(pipe2_results):
    # dropout_masks=chunk (the default) draws in each layer call: the same run with row
    # masks must differ from it (so the setting reaches the stages), and both train.
    chunk = next(i for i, c in enumerate(PIPE2) if c.get("dropout") and "dropout_masks" not in c)
    row = PIPE2.index({**PIPE2[chunk], "dropout_masks": "row"})
    for e in range(EPOCHS):
        a, b = merge_ranks(pipe2_results[chunk], e, "grads"), merge_ranks(pipe2_results[row], e, "grads")
        assert set(a) == set(b) and any(not torch.allclose(a[k], b[k]) for k in a)
        assert all(torch.isfinite(t).all() for t in a.values())


def test_pipeline_stale_reads_differ_from_single(pipe2_results):
    # The oracle comparison must be able to fail: with C > 1 and zero history, the
    # stale reads make the pipeline's gradients differ from single's.
    i = next(i for i, c in enumerate(PIPE2) if c["chunks"] > 1 and c["model"] == "gcn" and not c["shuffle"])
    ref, _ = single_reference(PIPE2[i])
    grads = merge_ranks(pipe2_results[i], 0, "grads")
    assert any(not torch.allclose(grads[k], ref[0]["grads"][k]) for k in grads)


def test_chunk_operators_hold_exactly_the_stale_halo_rows_constant(pipe2_results):
    """Every chunk's forward holds constant the halo rows of chunks at later steps of
    the epoch (stale reads, whose gradient is dropped) and no other row, so that its
    transposed products skip only those; the runs above equal the simulator with it."""
    cases = [i for i, c in enumerate(PIPE2) if c["chunks"] > 1]
    held_some = 0
    for i in cases:
        plans = chunked_for(PIPE2[i]).plans
        for r in pipe2_results[i]:
            assert r["constant_rows"]
            for rec in r["constant_rows"]:
                p = plans[rec["chunk"]]
                stale = rec["step_of"][p.halo_chunk.long()] > rec["step"]
                if bool(stale.any()):
                    assert torch.equal(rec["constant"], torch.cat([torch.zeros(p.num_own, dtype=torch.bool), stale]))
                    held_some += 1
                else:
                    assert rec["constant"] is None
    assert held_some


@pytest.mark.parametrize("i", range(len(PIPE2)), ids=lambda i: f"case{i}")
def test_pipeline_bytes_equal_prediction(pipe2_results, i):
    from gnnpipe.engine.pipeline import predicted_pipeline_bytes

    assert_bytes(pipe2_results[i])
    case = PIPE2[i]
    cfg = make_config(case)
    g = chunked_for(case).graph
    model = build_model(cfg, g)
    # 4 (S-1) N H each way in float64 = 8 bytes (bfloat16 messages: 2); twice that for
    # GCNII (h0 travels along).
    factor = 2 if case["model"] == "gcnii" else 1
    element = 2 if case.get("stage_dtype") == "bfloat16" else 8
    expected = element * (2 - 1) * g.num_nodes * 5 * factor
    assert pipe2_results[i][0]["predicted"]["stage_activations"] == expected
    assert predicted_pipeline_bytes(model, g.num_nodes, cfg.parallel.layer_split(4), element)["stage_gradients"] == expected


def test_pipeline_four_stages_equals_simulator_without_barriers():
    for case, res in zip(PIPE4, results_for(4, PIPE4)):
        epochs, acc, _ = simulate(case)
        assert_matches(res, epochs, acc)
        assert_bytes(res)
        # Only non-blocking point-to-point traffic in a training epoch, and one control
        # all-reduce at its end (the loss): no barrier, no collective per pipeline step.
        for stage, r in enumerate(res):
            calls = r["calls"]
            assert calls.get("all_reduce_control") == EPOCHS - 1
            assert set(calls) <= {"isend", "irecv", "wait", "all_reduce_control", "take_counters",
                                  "take_wait_time"}, calls
            # One message per non-empty chunk and direction; every handle is waited on.
            full = sum(1 for p in chunked_for(case).plans if p.num_own) * (EPOCHS - 1)
            directions = 1 if stage in (0, len(res) - 1) else 2
            assert calls["irecv"] == calls["isend"] == directions * full
            assert calls["wait"] == calls["irecv"] + calls["isend"]


def results_by_case(results: list[list[dict[str, Any]]], num_cases: int) -> list[list[dict[str, Any]]]:
    """``run_workers`` gives [rank][case]; the checks want [case][rank]."""
    return [[results[r][c] for r in range(len(results))] for c in range(num_cases)]


def test_gather_rows_sinks_the_gradient_a_leaf_would_get_and_keeps_no_rows():
    # The executor reads a layer's input gradient from the sink instead of keeping the
    # gathered rows as a leaf until backward.
    from gnnpipe.engine.stage_autograd import gather_rows, sunk_grad

    torch.manual_seed(0)
    buf = torch.randn(7, 4, dtype=torch.float64)
    ids = torch.tensor([3, 0, 6, 6, 2])
    w = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        h_local, sink = gather_rows(buf, ids)
        out = torch.tanh(h_local[:3] * 2.0) @ w
    assert not any(t.shape == (5, 4) for t in saved)  # tanh saves its output, not h_local
    g_out = torch.randn(3, 3, dtype=torch.float64)
    torch.autograd.backward(out, g_out)
    leaf = buf[ids].clone().requires_grad_(True)
    w2 = w.detach().clone().requires_grad_(True)
    (torch.tanh(leaf[:3] * 2.0) @ w2).backward(g_out)
    assert len(sink) == 1
    torch.testing.assert_close(sink[0], leaf.grad, rtol=0, atol=0)
    torch.testing.assert_close(w.grad, w2.grad, rtol=0, atol=0)
    # Read once, the gradient leaves the sink, which lives until the chunk's backward ends.
    got = sunk_grad(sink, (5, 4), buf)
    torch.testing.assert_close(got, leaf.grad, rtol=0, atol=0)
    assert sink == []
    assert torch.equal(sunk_grad(sink, (5, 4), buf), torch.zeros(5, 4, dtype=torch.float64))


@pytest.mark.parametrize("i", [i for i, c in enumerate(PIPE2) if c["chunks"] == 5 and simulable(c)],
                         ids=lambda i: f"{PIPE2[i]['model']}-{'on' if PIPE2[i]['shuffle'] else 'off'}")
def test_history_drift_is_the_distance_of_stale_reads_from_fresh_values(pipe2_results, i):
    """Each epoch's drift sums (over the ranks) are, per layer, |fresh - historical|^2
    and |fresh|^2 of the layer's input rows, where historical is what the epoch started
    from (what its stale reads saw) and fresh what it computed: the simulator's
    buffers, on every row (each chunk of the tiny graph has fewer than DRIFT_ROWS)."""
    from gnnpipe.engine.stage import DRIFT_ROWS

    case = PIPE2[i]
    sizes = [p.num_own for p in chunked_for(case).plans]
    assert max(sizes) <= DRIFT_ROWS
    sim_epochs, _, sim = simulate(case)
    layers = case.get("layers", 4)
    for e, ref in enumerate(sim_epochs):
        sums = torch.tensor([r["epochs"][e]["drift"] for r in pipe2_results[i]], dtype=torch.float64).sum(0)
        assert sums.shape == (2 * layers,)
        assert sums[0] == 0 and sums[1] == 0  # layer 1 reads encode(X) of this epoch: no history
        for l in range(2, layers + 1):
            fresh, hist = ref["fresh"][l], ref["history"][l]
            expected = torch.stack([(fresh - hist).square().sum(), fresh.square().sum()])
            torch.testing.assert_close(sums[2 * (l - 1):2 * l], expected, rtol=1e-9, atol=1e-12)
    # Training moves the weights, so the history is behind: some drift is positive.
    assert any(r["epochs"][-1]["drift"][2] > 0 for r in pipe2_results[i])


@pytest.mark.parametrize("model", ["gcn", "gcnii"])
def test_saved_layer_output_is_read_from_the_next_buffer_not_kept_twice(model):
    """A ReLU-ended layer saves its output for backward; the stage points that saved
    tensor at the rows it wrote into the next layer's buffer B_{l+1} and frees the
    output's own memory, so a stage holds each chunk's layer outputs once. The
    backward is unchanged: the same gradients as with the output kept."""
    from gnnpipe.engine.stage_autograd import saved_holder, share_saved_output, unhold
    from gnnpipe.models.layers import GCNIILayer, GCNLayer

    torch.manual_seed(0)
    layer = GCNLayer(6, 6, dropout=0.0) if model == "gcn" else GCNIILayer(6, layer_index=2)
    layer = layer.double()
    pre = torch.randn(9, 6, dtype=torch.float64)

    def run(share: bool):
        layer.zero_grad()
        h = pre.clone().requires_grad_(True)
        x = h * 1.0
        buf = torch.zeros(12, 6, dtype=torch.float64)
        holders: list = []
        with torch.autograd.graph.saved_tensors_hooks(saved_holder(holders), unhold):
            out = _apply(layer, x)
        buf[3:12] = out.detach()
        if share:
            share_saved_output(holders, out, buf[3:12])
            assert out.untyped_storage().nbytes() == 0  # the output's memory is gone
            assert any(hd[0].data_ptr() == buf[3:12].data_ptr() for hd in holders)
        g = torch.randn(9, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        torch.autograd.backward(out, g)
        return h.grad.clone(), [p.grad.clone() for p in layer.parameters()]

    kept, shared = run(False), run(True)
    torch.testing.assert_close(shared[0], kept[0], rtol=0, atol=0)
    for a, b in zip(shared[1], kept[1]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _apply(layer, x):
    """The layer on a chunk whose local rows are its own rows (an identity aggregation
    over 9 rows), with h0 for GCNII."""
    class _Identity:
        num_own = 9

        @staticmethod
        def aggregate(h, reduce):
            return h * 1.0
    return layer(x, _Identity(), x * 0.5 if layer.needs_h0 else None)


def test_bfloat16_stage_messages_are_rounded_and_cost_half_the_bytes_of_float32(pipe2_results):
    """With ``stage_dtype = bfloat16`` the stage traffic is 2 bytes a value (a quarter of
    float64's here) and training really sees rounded messages: the gradients differ from
    the same run with full-precision messages (the match with the simulator, which
    rounds at the same places, is test_pipeline_equals_simulator)."""
    for model in ("gcn", "gcnii"):
        full = PIPE2.index(dict(mode="pipeline", workers=2, chunks=5, model=model, **ON))
        half = PIPE2.index(dict(mode="pipeline", workers=2, chunks=5, model=model, stage_dtype="bfloat16", **ON))
        for kind in ("stage_activations", "stage_gradients"):
            b_full = sum(r["epochs"][0]["bytes"][kind] for r in pipe2_results[full])
            b_half = sum(r["epochs"][0]["bytes"][kind] for r in pipe2_results[half])
            assert b_full > 0 and b_half * 4 == b_full
        g_full, g_half = merge_ranks(pipe2_results[full], 0, "grads"), merge_ranks(pipe2_results[half], 0, "grads")
        assert any(not torch.equal(g_full[k], g_half[k]) for k in g_full)
        # bfloat16 keeps 8 bits of mantissa: the first epoch's gradients stay close.
        for k in g_full:
            torch.testing.assert_close(g_half[k], g_full[k], rtol=0.1, atol=1e-3)


def test_stage_dtype_is_refused_outside_pipeline_and_hybrid():
    from gnnpipe.config import ParallelConfig
    from gnnpipe.errors import ConfigError

    with pytest.raises(ConfigError, match=r"parallel.stage_dtype: expected 'same' in graph mode"):
        ParallelConfig(mode="graph", workers=2, stage_dtype="bfloat16")
    assert ParallelConfig(mode="hybrid", workers=2, stage_dtype="bfloat16").stage_dtype == "bfloat16"
