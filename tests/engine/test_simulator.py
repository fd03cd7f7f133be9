"""The single-process simulator of DESIGN.md 5 (the oracle of the pipeline tests):
with one chunk, or with chunks that read nothing of each other, it IS single-mode
training (loss, every gradient, every parameter after 3 Adam steps); with exact
history it reproduces single's first forward exactly while dropping the gradient of
stale reads; technique 3 doubles exactly the gradient that reaches fresh halo rows."""

from __future__ import annotations

import pytest
import torch

from tests.engine.test_pipeline import (
    EPOCHS,
    MODELS,
    OFF,
    ON,
    TOL,
    build_model,
    make_config,
    single_reference,
    tiny_graph,
)


def _simulate(case, chunked, ways=None):
    from gnnpipe.engine.simulator import PipelineSimulator

    cfg = make_config(case)
    sim = PipelineSimulator(build_model(cfg, chunked.graph), chunked, cfg, ways=ways)
    out = []
    for epoch in range(1, EPOCHS + 1):
        loss = sim.train_epoch(epoch)
        out.append({"loss": loss, "grads": sim.gradients(), "logits": sim.last_logits().clone(),
                    "params": {k: p.detach().clone() for k, p in sim.model.named_parameters()}})
    return out, sim


def _assert_same(got, ref, epochs=EPOCHS):
    for e in range(epochs):
        assert got[e]["loss"] == pytest.approx(ref[e]["loss"], rel=1e-10)
        torch.testing.assert_close(got[e]["logits"], ref[e]["logits"], **TOL)
        assert set(got[e]["grads"]) == set(ref[e]["grads"])
        for k in ref[e]["grads"]:
            torch.testing.assert_close(got[e]["grads"][k], ref[e]["grads"][k], **TOL, msg=k)
            torch.testing.assert_close(got[e]["params"][k], ref[e]["params"][k], **TOL, msg=k)


@pytest.mark.parametrize("model", MODELS)
def test_one_chunk_is_single(model):
    from gnnpipe.partition import chunk_graph

    case = dict(mode="pipeline", workers=2, chunks=1, model=model, **ON)
    got, _ = _simulate(case, chunk_graph(tiny_graph(), 1, cache=False))
    ref, _ = single_reference(case)
    _assert_same(got, ref)


def _components_graph():
    """Three disjoint random components of 12 vertices: a 3-way METIS cut is empty."""
    from gnnpipe.data import Graph

    g = torch.Generator().manual_seed(2)
    src, dst = [], []
    for c in range(3):
        src.append(torch.randint(0, 12, (40,), generator=g) + 12 * c)
        dst.append(torch.randint(0, 12, (40,), generator=g) + 12 * c)
    n = 36
    x = torch.randn(n, 5, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    train = torch.zeros(n, dtype=torch.bool)
    train[::2] = True
    return Graph.from_edge_index(torch.stack([torch.cat(src), torch.cat(dst)]), x, y, train_mask=train,
                                 num_classes=3, name="components").remove_self_loops()


@pytest.mark.parametrize("model", ["gcn", "gcnii"])
def test_chunks_without_cross_reads_are_single(model, monkeypatch):
    from gnnpipe.partition import chunk_graph
    import tests.engine.test_pipeline as tp

    graph = _components_graph()
    chunked = chunk_graph(graph, 3, cache=False)
    assert chunked.stats.edge_cut == 0 and all(p.num_halo == 0 for p in chunked.plans)
    case = dict(mode="pipeline", workers=2, chunks=3, model=model, **ON)
    got, _ = _simulate(case, chunked)
    monkeypatch.setattr(tp, "chunked_for", lambda case: chunk_graph(graph, 3, cache=False))
    ref, _ = single_reference(case)
    _assert_same(got, ref)


def test_exact_history_reproduces_the_first_forward_but_not_its_gradient():
    from gnnpipe.partition import chunk_graph

    case = dict(mode="pipeline", workers=2, chunks=4, model="sage", input_proj=True, classifier=True,
                **dict(ON, unbiased_scale=False))
    chunked = chunk_graph(tiny_graph(), 4, cache=False)
    assert chunked.stats.edge_cut > 0
    got, _ = _simulate(case, chunked)
    ref, _ = single_reference(case)
    # Epoch 1: every stale row holds its exact value under the initial weights.
    assert got[0]["loss"] == pytest.approx(ref[0]["loss"], rel=1e-12)
    torch.testing.assert_close(got[0]["logits"], ref[0]["logits"], **TOL)
    # ... but the reads of chunks later in the order are constants: no gradient.
    diff = max(float((got[0]["grads"][k] - ref[0]["grads"][k]).abs().max()) for k in ref[0]["grads"])
    assert diff > 1e-6
    # The classifier sees exact inputs and its gradient is exact.
    for k in ("decode.linear.weight", "decode.linear.bias"):
        torch.testing.assert_close(got[0]["grads"][k], ref[0]["grads"][k], **TOL)


def test_zero_history_makes_first_chunk_forward_see_zeros():
    """Identity order, zero history: the first chunk reads zeros at every layer >= 2
    for its halo (layer 1 reads the exact encode output)."""
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.partition import chunk_graph

    case = dict(mode="pipeline", workers=2, chunks=3, model="gcn", **OFF)
    chunked = chunk_graph(tiny_graph(), 3, cache=False)
    cfg = make_config(case)
    model = build_model(cfg, chunked.graph).to(torch.float64)
    p = chunked.plans[0]
    ops = ChunkOps.build(p, dtype=torch.float64)
    x = chunked.graph.features.to(torch.float64)
    with torch.no_grad():
        h0 = model.encode(x)
        h = model.layers[0](h0[p.local_global_nid], ops)
        for layer in model.layers[1:]:
            h = layer(torch.cat([h, torch.zeros(p.num_halo, h.shape[1], dtype=h.dtype)]), ops)
        expected = model.decode(h)
    got, _ = _simulate(case, chunked)
    torch.testing.assert_close(got[0]["logits"][p.row_start:p.row_end], expected, **TOL)


def test_unbiased_scale_doubles_the_fresh_halo_gradient():
    """With a linear-in-input last layer the gradient that the last layer sends to the
    previous layer's output rows is own part + fresh part; technique 3 makes it
    own + 2 * fresh, so grad(on) - grad(off) = grad(off) - grad(no fresh reads)."""
    from gnnpipe.partition import chunk_graph

    chunked = chunk_graph(tiny_graph(), 4, cache=False)
    base = dict(mode="pipeline", workers=2, chunks=4, model="gcn", layers=2, **OFF)
    results = {}
    for name, over in (("off", {}), ("on", {"unbiased_scale": True})):
        got, _ = _simulate(dict(base, **over), chunked)
        results[name] = got[0]["grads"]
    # The forward does not depend on the factor s, and the backward below the scaled
    # reads is linear in the gradient that reaches them: grad(s) = A + s * B for
    # layer 1 and encode, so grad(2) = 2 grad(1) - grad(0). The classifier and
    # layer 2 lie above the scaled reads and do not change at all.
    zero, _ = _simulate_scaled(base, chunked, 0.0)
    for k in results["off"]:
        if k.startswith(("layers.0.", "encode.")):
            torch.testing.assert_close(results["on"][k], 2 * results["off"][k] - zero[k], **TOL, msg=k)
        else:
            torch.testing.assert_close(results["on"][k], results["off"][k], **TOL, msg=k)
    assert not torch.allclose(results["on"]["layers.0.weight"], results["off"]["layers.0.weight"])


def _simulate_scaled(case, chunked, factor):
    """The simulator's first-epoch gradients with the fresh-halo factor set to ``factor``."""
    import gnnpipe.engine.simulator as simmod

    orig = simmod._ScaleGrad.backward

    def backward(ctx, g):
        return g * factor, None

    simmod._ScaleGrad.backward = staticmethod(backward)
    try:
        got, _ = _simulate(dict(case, unbiased_scale=True), chunked)
    finally:
        simmod._ScaleGrad.backward = orig
    return got[0]["grads"], None
