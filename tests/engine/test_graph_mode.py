"""Mode ``graph`` (DESIGN.md 4, 7) on real gloo workers: the distributed run equals
the single-process reference (full logits, loss, every parameter gradient, and the
parameters after several Adam steps; exact evaluation), and the bytes it sends, by
kind, equal the DESIGN.md 7 formula for the partition used."""

from __future__ import annotations

import pytest
import torch

from tests.engine._dist_util import run_workers
from tests.engine._reference import single_run

pytestmark = pytest.mark.dist

MODELS = ("gcn", "sage", "gcnii", "resgcn+")
EPOCHS = 3


def _graph():
    from gnnpipe.data import Graph

    g = torch.Generator().manual_seed(7)
    n, f, c = 40, 5, 3
    src = torch.randint(0, n, (160,), generator=g)
    dst = torch.randint(0, n, (160,), generator=g)
    x = torch.randn(n, f, generator=g)
    y = torch.randint(0, c, (n,), generator=g)
    perm = torch.randperm(n, generator=g)
    masks = {k: torch.zeros(n, dtype=torch.bool) for k in ("train", "val", "test")}
    masks["train"][perm[:16]] = True
    masks["val"][perm[16:28]] = True
    masks["test"][perm[28:]] = True
    graph = Graph.from_edge_index(torch.stack([src, dst]), x, y, train_mask=masks["train"],
                                  val_mask=masks["val"], test_mask=masks["test"], num_classes=c, name="tiny")
    return graph.remove_self_loops().validate()


def _config(model: str, workers: int):
    from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig, TrainConfig

    return RunConfig(
        model=ModelConfig(model=model, layers=3, hidden=6, dropout=0.0),
        train=TrainConfig(epochs=EPOCHS, lr=0.05, weight_decay=1e-3, dtype="float64", seed=3),
        parallel=ParallelConfig(mode="graph", workers=workers, device="cpu", partition="metis"),
    )


def _build_model(cfg, graph):
    from gnnpipe.models import build_model

    torch.manual_seed(cfg.train.seed)
    return build_model(cfg.model, in_features=graph.num_features, num_classes=graph.num_classes)


def _reference(cfg, chunked):
    """``single`` on the reordered graph: per epoch the logits, loss and gradients
    (before the step), then the final parameters and accuracies."""
    epochs, acc = single_run(_build_model(cfg, chunked.graph).to(torch.float64), chunked.graph, cfg.train, EPOCHS)
    return epochs, epochs[-1]["params"], acc


def _graph_worker(rank: int, world: int) -> dict:
    from gnnpipe.engine.comm import Comm
    from gnnpipe.engine.graph_mode import GraphRunner
    from tests.engine._context import make_context
    from gnnpipe.partition import chunk_graph

    graph = _graph()
    out = {}
    comm = Comm(rank, world)
    for name in MODELS:
        cfg = _config(name, world)
        chunked = chunk_graph(graph, world, method="metis", seed=0, cache=False)
        runner = GraphRunner(make_context(rank, cfg, chunked, comm, _build_model(cfg, chunked.graph)))
        epochs = []
        for epoch in range(1, EPOCHS + 1):
            st = runner.train_epoch(epoch)
            rows, logits = runner.last_logits()
            grads = {k: p.grad.clone() for k, p in runner.owned_parameters().items()}
            epochs.append({"loss": st.loss, "bytes": st.bytes_sent, "rows": rows, "logits": logits, "grads": grads})
        acc = runner.evaluate()
        eval_bytes = comm.take_counters()
        params = {k: p.detach().clone() for k, p in runner.owned_parameters().items()}
        out[name] = {"epochs": epochs, "acc": acc, "params": params, "eval_bytes": eval_bytes,
                     "predicted": runner.predicted_bytes()}
    return out


@pytest.mark.parametrize("world", [2, 4])
def test_graph_mode_equals_single_and_sends_the_formula_bytes(world: int) -> None:
    from gnnpipe.partition import chunk_graph

    results = run_workers(_graph_worker, world, timeout=150)
    graph = _graph()
    chunked = chunk_graph(graph, world, method="metis", seed=0, cache=False)
    # M counted here from the plans themselves: every halo row is one replicated row.
    m = sum(p.num_halo for p in chunked.plans)
    assert m == chunked.stats.M and m > 0
    tol = dict(rtol=1e-9, atol=1e-11)
    for name in MODELS:
        cfg = _config(name, world)
        ref_epochs, ref_params, ref_acc = _reference(cfg, chunked)
        for e, ref in enumerate(ref_epochs):
            logits = torch.empty_like(ref["logits"]).fill_(float("nan"))
            for res in results:
                ep = res[name]["epochs"][e]
                logits[ep["rows"]] = ep["logits"]
                assert ep["loss"] == pytest.approx(ref["loss"], rel=1e-10), (name, e)
                for k, g in ref["grads"].items():
                    torch.testing.assert_close(ep["grads"][k], g, **tol, msg=f"{name} epoch {e + 1} grad {k}")
            torch.testing.assert_close(logits, ref["logits"], **tol, msg=f"{name} epoch {e + 1} logits")
        for res in results:
            for k, p in ref_params.items():
                torch.testing.assert_close(res[name]["params"][k], p, **tol, msg=f"{name} param {k}")
            assert res[name]["acc"] == pytest.approx(ref_acc)  # accuracies and val_loss

        # DESIGN.md 7, float64 (8 bytes), X replicated: layers 2..L exchange H columns.
        h, layers = cfg.model.hidden, cfg.model.layers
        numel = sum(p.numel() for p in ref_params.values())
        expected = {"stage_activations": 0, "stage_gradients": 0, "evaluation": 0,
                    "halo_rows": 8 * m * h * (layers - 1), "halo_gradients": 8 * m * h * (layers - 1),
                    "weight_allreduce": 8 * 2 * (world - 1) * numel}
        for e in range(EPOCHS):
            total = {k: sum(res[name]["epochs"][e]["bytes"][k] for res in results) for k in expected}
            assert total == expected, (name, e)
        assert results[0][name]["predicted"] == expected
        # Evaluation moves the halo rows once, forward only, counted apart.
        eval_total = sum(res[name]["eval_bytes"]["evaluation"] for res in results)
        assert eval_total == 8 * m * h * (layers - 1)


def test_gnnpipe_train_graph_mode_record_matches_single(monkeypatch) -> None:
    """Through the public entry (driver, launcher, record): per-epoch losses and
    accuracies equal ``single``'s, and the counted bytes of every epoch equal the
    prediction the record carries beside them."""
    import gnnpipe
    from gnnpipe.config import ModelConfig, ParallelConfig, TrainConfig
    from gnnpipe.trainer.record import check_record

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    graph = _graph()
    model = ModelConfig(model="gcnii", layers=3, hidden=6, dropout=0.0)
    train = TrainConfig(epochs=4, lr=0.05, weight_decay=1e-3, dtype="float64", seed=3, eval_every=2)
    single = gnnpipe.train(graph, model, train, ParallelConfig(mode="single", device="cpu"))
    dist = gnnpipe.train(graph, model, train, ParallelConfig(mode="graph", workers=2, device="cpu"))
    check_record(dist)
    assert dist["mode"] == "graph" and dist["world_size"] == 2
    assert len(dist["epochs"]) == len(single["epochs"]) == 4
    for d, s in zip(dist["epochs"], single["epochs"]):
        assert d["loss"] == pytest.approx(s["loss"], rel=1e-9)
        for split in ("train_acc", "val_acc", "test_acc"):
            assert d[split] == s[split]
        assert (d["val_loss"] is None) == (s["val_loss"] is None)
        if d["val_loss"] is not None:
            assert d["val_loss"] == pytest.approx(s["val_loss"], rel=1e-9)
        training = {k: v for k, v in d["bytes"].items() if k != "evaluation"}
        assert training == {k: v for k, v in d["bytes_predicted"].items() if k != "evaluation"}
        assert d["bytes"]["halo_rows"] > 0


class _TwoPartExchanger:
    """A stand-in for graph mode's HaloExchanger: the halo rows are fixed, the halo
    gradients are dropped (this worker's own rows are read by no one else)."""

    def __init__(self, halo: torch.Tensor, num_own: int) -> None:
        self.halo, self.num_own = halo, num_own

    def local_rows(self, h_own, kind):
        return torch.cat([h_own, self.halo])

    def own_gradients(self, grad_local, kind):
        return grad_local[: self.num_own].clone()


@pytest.mark.parametrize("kind", ["gcn", "sage", "gcnii"])
def test_graph_modes_exchange_drops_in_place_as_the_layer_would(kind):
    from gnnpipe.engine.graph_mode import halo_exchange
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.models import ResGCNPlusLayer
    from gnnpipe.models.layers import INPUT_DROPPED
    from gnnpipe.partition.plan import build_chunk_plans
    from tests.engine.test_stage_autograd import DT, _layer
    from tests.models.test_layers import random_graph

    graph = random_graph(n=40, feat=6)
    plan = build_chunk_plans(graph, torch.tensor([0, 14, 40]))[1]
    ops = ChunkOps.build(plan, dtype=DT)
    d = 6
    layer = _layer(kind, d, p=0.5).to(DT).train()
    torch.manual_seed(1)
    h_own = torch.randn(plan.num_own, d, dtype=DT, requires_grad=True)
    exchanger = _TwoPartExchanger(torch.randn(plan.num_halo, d, dtype=DT), plan.num_own)
    h0 = torch.randn(plan.num_own, d, dtype=DT) if layer.needs_h0 else None
    g_out = torch.randn(plan.num_own, layer.out_dim, dtype=DT)
    got = []
    for fused in (True, False):
        h_own.grad = None
        layer.zero_grad(set_to_none=True)
        torch.manual_seed(9)
        if fused:
            h_local, keep = halo_exchange(h_own, exchanger, layer)
            assert keep is INPUT_DROPPED
        else:
            h_local, keep = exchanger.local_rows(h_own, "halo_rows"), None
        out = layer(h_local, ops, h0, keep)
        out.backward(g_out)
        got.append((out.detach(), h_own.grad.clone(), {n: q.grad.clone() for n, q in layer.named_parameters()}))
    (out_f, g_f, w_f), (out_l, g_l, w_l) = got
    torch.testing.assert_close(out_f, out_l, rtol=0, atol=0)
    torch.testing.assert_close(g_f, g_l, rtol=0, atol=0)
    for n in w_l:
        torch.testing.assert_close(w_f[n], w_l[n], rtol=0, atol=0)
    # In evaluation, or for a layer that drops something else, the layer keeps its dropout.
    layer.eval()
    assert halo_exchange(h_own, exchanger, layer)[1] is None
    assert halo_exchange(h_own, exchanger, ResGCNPlusLayer(d, d, dropout=0.5).train())[1] is None


class _PeerComm:
    """A stand-in for Comm between two workers whose other side is computed here: its
    ``exchange`` fills each receive with the rows ``peer_rows`` gives for that peer."""

    def __init__(self, peer_rows) -> None:
        self.peer_rows = peer_rows

    def exchange(self, sends, recvs, kind):
        for q, buf in recvs.items():
            buf.copy_(self.peer_rows(q, buf.shape[1]))


def test_the_exchanger_receives_every_layer_into_one_kept_buffer_per_width():
    """Layer after layer, the halo rows land in the same pages (a fresh tensor per layer
    was a new mapping faulted in while the rows arrived); the result is still
    ``cat(h_own, halo rows)``, each time a tensor of its own for autograd."""
    from gnnpipe.engine.graph_mode import HaloExchanger
    from gnnpipe.partition.plan import build_chunk_plans
    from tests.models.test_layers import random_graph

    graph = random_graph(n=40, feat=6)
    plans = build_chunk_plans(graph, torch.tensor([0, 14, 40]))
    plan = plans[0]
    # The peer's layer outputs: rows of its own chunk, in global order; the halo of
    # chunk 0 is the peer's rows it reads, sorted by global id.
    peer = {d: torch.randn(plans[1].num_own, d) for d in (6, 4)}
    halo_rows = lambda d: peer[d][plan.halo_global_nid - plans[1].row_start]  # noqa: E731
    ex = HaloExchanger(plans, 0, _PeerComm(lambda q, d: halo_rows(d)), torch.device("cpu"))
    outs = []
    for d in (6, 6, 4, 6):
        h_own = torch.randn(plan.num_own, d)
        h_local = ex.local_rows(h_own, "halo_rows")
        torch.testing.assert_close(h_local, torch.cat([h_own, halo_rows(d)]), rtol=0, atol=0)
        assert ex.holds(h_local) and not ex.holds(h_own)
        outs.append(h_local)
    ptr = [t.untyped_storage().data_ptr() for t in outs]
    assert ptr[0] == ptr[1] == ptr[3] != ptr[2]  # one buffer per width
    assert len({id(t) for t in outs}) == 4 and len(ex.buffers) == 2
