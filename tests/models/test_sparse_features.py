"""Sparse (CSR) features through the model: the input projection's sparse path equals
the dense one (forward, weight and bias gradients, full tensors, dropout 0); sparse
dropout keeps each stored value with probability 1 - p and scales it by 1 / (1 - p);
a model without a projection densifies once; and whole runs (single, graph, pipeline,
hybrid, pipeline with cross-epoch overlap, through ``gnnpipe.train``) give the same
losses with the features sparse as dense (float64, dropout 0), although stage 0 encodes
dense features group by group and sparse ones whole."""

from __future__ import annotations

import logging
import math

import pytest
import torch

from gnnpipe.data import Graph
from gnnpipe.data.sparse import SparseFeatures
from gnnpipe.models import InputProjection, build_model, model_input

DT = torch.float64


def _bag_of_words(n: int = 80, f: int = 50, density: float = 0.06, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    counts = torch.randint(1, 4, (n, f), generator=gen).to(DT)
    x = counts * (torch.rand(n, f, generator=gen) < density)
    x[5] = 0.0
    return x


def _projection(f: int, h: int, p: float = 0.0, activation: bool = True) -> InputProjection:
    torch.manual_seed(4)
    return InputProjection(f, h, dropout=p, activation=activation).to(DT)


@pytest.mark.parametrize("activation", [True, False])
def test_sparse_projection_equals_dense_forward_and_gradients(activation):
    x = _bag_of_words()
    s = SparseFeatures.from_dense(x)
    proj = _projection(x.shape[1], 7, activation=activation)
    proj.train()
    g = torch.randn(x.shape[0], 7, generator=torch.Generator().manual_seed(2), dtype=DT)

    dense = proj(x)
    dense.backward(g)
    grads = {k: p.grad.clone() for k, p in proj.named_parameters()}
    proj.zero_grad()
    sparse = proj(s)
    sparse.backward(g)

    torch.testing.assert_close(sparse, dense, rtol=1e-13, atol=1e-13)
    for k, p in proj.named_parameters():
        torch.testing.assert_close(p.grad, grads[k], rtol=1e-13, atol=1e-13, msg=lambda m: f"{k}: {m}")
    assert all(bool(g.abs().sum() > 0) for g in grads.values())


def test_sparse_dropout_keeps_one_minus_p_of_the_values_scaled():
    """Identity weight, no bias, no activation: the output is dropout(X) itself."""
    p = 0.3
    x = _bag_of_words(n=400, f=300, density=0.2, seed=1)
    s = SparseFeatures.from_dense(x)
    proj = _projection(x.shape[1], x.shape[1], p=p, activation=False)
    with torch.no_grad():
        proj.linear.weight.copy_(torch.eye(x.shape[1], dtype=DT))
        proj.linear.bias.zero_()
    proj.train()
    out = proj(s).detach()
    assert bool((out[x == 0] == 0).all())  # a zero stays zero
    ratio = out[x != 0] / x[x != 0]
    kept = ratio != 0
    torch.testing.assert_close(ratio[kept], torch.full_like(ratio[kept], 1.0 / (1.0 - p)), rtol=1e-15, atol=0)
    nnz = s.nnz
    assert nnz > 20000
    assert abs(float(kept.double().mean()) - (1 - p)) < 5 * math.sqrt(p * (1 - p) / nnz)
    # Mean preserved: E[dropout(x)] = x.
    assert abs(float(out.sum() / x.sum()) - 1.0) < 0.02
    # Eval mode: no dropout.
    proj.eval()
    torch.testing.assert_close(proj(s), x, rtol=0, atol=0)


def test_sparse_dropout_gradient_is_the_dense_gradient_of_the_dropped_matrix():
    p = 0.5
    x = _bag_of_words(seed=3)
    s = SparseFeatures.from_dense(x)
    f = x.shape[1]
    ident = _projection(f, f, p=p, activation=False)
    with torch.no_grad():
        ident.linear.weight.copy_(torch.eye(f, dtype=DT))
        ident.linear.bias.zero_()
    proj = _projection(f, 6, p=p)
    torch.manual_seed(11)
    dropped = ident(s).detach()  # the same draws as the next call
    torch.manual_seed(11)
    out = proj(s)
    g = torch.randn_like(out)
    out.backward(g)
    w = proj.linear.weight.detach().clone().requires_grad_(True)
    b = proj.linear.bias.detach().clone().requires_grad_(True)
    ref = torch.relu(torch.nn.functional.linear(dropped, w, b))
    ref.backward(g)
    torch.testing.assert_close(out, ref, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(proj.linear.weight.grad, w.grad, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(proj.linear.bias.grad, b.grad, rtol=1e-13, atol=1e-13)


def test_model_input_keeps_sparse_for_a_projection_and_densifies_without(caplog):
    x = SparseFeatures.from_dense(_bag_of_words().float())
    gcnii = build_model({"model": "gcnii", "layers": 2, "hidden": 4}, x.shape[1], 3)
    gcn = build_model({"model": "gcn", "layers": 2, "hidden": 4}, x.shape[1], 3)
    kept = model_input(gcnii, x, device=torch.device("cpu"), dtype=DT)
    assert isinstance(kept, SparseFeatures) and kept.dtype == DT
    with caplog.at_level(logging.INFO, logger="gnnpipe.models.model"):
        dense = model_input(gcn, x, device="cpu", dtype=DT)
    assert isinstance(dense, torch.Tensor) and torch.equal(dense, x.to_dense().to(DT))
    assert "densifying" in caplog.text
    # Dense features: exactly Tensor.to.
    d = _bag_of_words().float()
    assert torch.equal(model_input(gcnii, d, dtype=DT), d.to(dtype=DT))


# ---------------------------------------------------------------- whole runs
def _graph(n: int = 60, f: int = 40, c: int = 3, seed: int = 7) -> Graph:
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=gen)
    x = _bag_of_words(n, f, density=0.08, seed=seed).float()
    x[:, :c] += torch.nn.functional.one_hot(y, c).float() * (torch.rand(n, 1, generator=gen) < 0.5)
    e = 5 * n
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n, (e,), generator=gen)
    perm = torch.randperm(n, generator=gen)
    g = Graph.from_edge_index(torch.stack([src, dst]), x, y, num_classes=c, name="bow",
                              train_mask=perm[: n // 2], val_mask=perm[n // 2: 3 * n // 4],
                              test_mask=perm[3 * n // 4:])
    return g.symmetrize().remove_self_loops().validate()


#: case -> the run's parallel settings (stage 0 encodes dense features group by group
#: and sparse ones whole: the losses must agree all the same).
_LAYOUTS = {
    "single": {"mode": "single"},
    "graph": {"mode": "graph", "workers": 2, "chunks": 2},
    "pipeline": {"mode": "pipeline", "workers": 2, "chunks": 4},
    "hybrid": {"mode": "hybrid", "workers": 2, "ways": 2, "chunks": 4},
    "pipeline-cross-epoch": {"mode": "pipeline", "workers": 2, "chunks": 4, "cross_epoch_chunks": 1},
}


def _losses(graph: Graph, model: str, case: str) -> list[float]:
    import gnnpipe
    from gnnpipe.config import ModelConfig, ParallelConfig, TrainConfig

    rec = gnnpipe.train(
        graph,
        ModelConfig(model=model, layers=4, hidden=6, dropout=0.0),
        TrainConfig(epochs=3, lr=0.05, dtype="float64", seed=3, eval_every=1, log_level="WARNING"),
        ParallelConfig(device="cpu", **_LAYOUTS[case]),
    )
    return [e["loss"] for e in rec["epochs"]]


@pytest.mark.parametrize("model", ["gcnii", "gcn"])
def test_single_mode_sparse_equals_dense(model):
    dense = _graph()
    sparse = dense.with_feature_layout(True)
    assert sparse.sparse_features and not dense.sparse_features
    a, b = _losses(dense, model, "single"), _losses(sparse, model, "single")
    assert len(a) == 3
    assert b == pytest.approx(a, rel=1e-12, abs=0)


@pytest.mark.dist
@pytest.mark.parametrize("mode", ["pipeline", "graph", "hybrid", "pipeline-cross-epoch"])
def test_distributed_mode_sparse_equals_dense(mode):
    dense = _graph()
    sparse = dense.with_feature_layout(True)
    a, b = _losses(dense, "gcnii", mode), _losses(sparse, "gcnii", mode)
    assert len(a) == 3
    assert b == pytest.approx(a, rel=1e-12, abs=0)


def test_simulated_pipeline_sparse_equals_dense_gradients():
    """The single-process pipeline oracle: every parameter's gradient of every epoch."""
    from types import SimpleNamespace

    from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig, TrainConfig
    from gnnpipe.engine.simulator import PipelineSimulator
    from gnnpipe.partition import chunk_graph

    cfg = RunConfig(model=ModelConfig(model="gcnii", layers=4, hidden=6, dropout=0.0),
                    train=TrainConfig(epochs=2, lr=0.05, dtype="float64", seed=3),
                    parallel=ParallelConfig(mode="pipeline", workers=2, chunks=4, device="cpu", shuffle=True))
    out = {}
    for layout in (False, True):
        chunked = chunk_graph(_graph().with_feature_layout(layout), 4, method="metis", seed=0, cache=False)
        assert chunked.graph.sparse_features == layout
        torch.manual_seed(cfg.train.seed)
        model = build_model(cfg.model, chunked.graph.num_features, chunked.graph.num_classes)
        sim = PipelineSimulator(model, chunked, cfg)
        per_epoch = []
        for epoch in range(2):
            loss = sim.train_epoch(epoch)
            per_epoch.append(SimpleNamespace(loss=loss, grads={k: g.clone() for k, g in sim.gradients().items()}))
        out[layout] = per_epoch
    for d, s in zip(out[False], out[True]):
        assert s.loss == pytest.approx(d.loss, rel=1e-12)
        assert d.grads.keys() == s.grads.keys() and d.grads
        for k in d.grads:
            torch.testing.assert_close(s.grads[k], d.grads[k], rtol=1e-10, atol=1e-12, msg=lambda m: f"{k}: {m}")
