"""The stage's gather with the layer's input dropout applied in place
(:func:`gnnpipe.engine.stage_autograd.gather_rows` with ``drop``): the same layer
output and the same gradients, bit for bit, as gathering plain rows and letting the
layer draw and apply its own dropout, for every layer that declares
``drops_input_rows``."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.engine.stage_autograd import gather_rows, sunk_grad
from gnnpipe.kernels import ChunkOps
from gnnpipe.models import GCNIILayer, GCNLayer, MLPLayer, ResGCNPlusLayer, SAGELayer
from gnnpipe.models.layers import INPUT_DROPPED
from gnnpipe.models.masks import MaskRows, draw_keep
from gnnpipe.partition.plan import build_chunk_plans
from tests.models.test_layers import random_graph

DT = torch.float64


def _layer(kind: str, d: int, p: float) -> torch.nn.Module:
    torch.manual_seed(3)
    if kind == "gcn":
        return GCNLayer(d, d, dropout=p)
    if kind == "gcn-narrow":  # out < in: the layer transforms the rows before aggregating
        return GCNLayer(d, d - 2, dropout=p)
    if kind == "sage":
        return SAGELayer(d, d, dropout=p)
    return GCNIILayer(d, 2, alpha=0.2, lambda_=0.7, dropout=p)


def _run(layer, ops, buf, ids, h0, g_out, *, fused: bool, keep, seed: int):
    """The layer's output, the sunk gradient of its gathered rows and its weights'
    gradients: with the dropout in the gather (``fused``) or in the layer."""
    layer.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # chunk masks: the draw comes from the default generator
    p = layer.input_dropout
    if fused:
        h_local, sink = gather_rows(buf, ids, drop=(p, keep))
        out = layer(h_local, ops, h0, INPUT_DROPPED)
    else:
        h_local, sink = gather_rows(buf, ids)
        out = layer(h_local, ops, h0, keep)
    torch.autograd.backward(out, g_out)
    grads = {n: q.grad.clone() for n, q in layer.named_parameters()}
    return out.detach(), sunk_grad(sink, (ids.numel(), buf.shape[1]), buf), grads


@pytest.mark.parametrize("masks", ["chunk", "row"])
@pytest.mark.parametrize("kind", ["gcn", "gcn-narrow", "sage", "gcnii"])
def test_dropout_applied_in_the_gather_equals_the_layers_own(kind, masks):
    graph = random_graph(n=40, feat=6)
    plan = build_chunk_plans(graph, torch.tensor([0, 14, 40]))[1]
    assert plan.num_halo > 0
    ops = ChunkOps.build(plan, dtype=DT)
    d = 6
    layer = _layer(kind, d, p=0.5).to(DT).train()
    assert layer.drops_input_rows
    torch.manual_seed(1)
    buf = torch.randn(graph.num_nodes, d, dtype=DT)
    ids = torch.as_tensor(plan.local_global_nid)
    h0 = torch.randn(plan.num_own, d, dtype=DT) if layer.needs_h0 else None
    g_out = torch.randn(plan.num_own, layer.out_dim, dtype=DT)
    keep = None
    if masks == "row":  # one mask over the buffer's rows; the chunk reads its rows of it
        keep = MaskRows(draw_keep((graph.num_nodes, d), 0.5, generator=torch.Generator().manual_seed(5)), ids)

    out_f, g_f, w_f = _run(layer, ops, buf, ids, h0, g_out, fused=True, keep=keep, seed=7)
    out_l, g_l, w_l = _run(layer, ops, buf, ids, h0, g_out, fused=False, keep=keep, seed=7)
    torch.testing.assert_close(out_f, out_l, rtol=0, atol=0)
    torch.testing.assert_close(g_f, g_l, rtol=0, atol=0)
    for n in w_l:
        torch.testing.assert_close(w_f[n], w_l[n], rtol=0, atol=0)
    # The dropout did act: without it the output differs, and the dropped entries of
    # the gathered rows get no gradient.
    layer.eval()
    with torch.no_grad():
        plain = layer(buf[ids], ops, h0)
    layer.train()
    assert not torch.equal(out_f, plain)
    assert bool((g_f == 0).any()) and bool((g_f != 0).any())
    # The rows of the buffer itself are left as they were.
    torch.manual_seed(1)
    assert torch.equal(buf, torch.randn(graph.num_nodes, d, dtype=DT))


def test_only_layers_that_drop_their_rows_as_given_declare_it():
    # ResGCN+ drops after its norm, MLP its own rows only: a gather cannot do it for them.
    assert GCNLayer(4, 4).drops_input_rows and SAGELayer(4, 4).drops_input_rows
    assert GCNIILayer(4, 1).drops_input_rows
    assert not ResGCNPlusLayer(4, 4).drops_input_rows and not MLPLayer(4, 4).drops_input_rows


def test_a_gather_with_dropout_saves_the_mask_words_not_the_rows():
    # Saved-tensor hooks see what the gather keeps for backward (a stage moves it into
    # its arena): at p = 0.5 one bit an entry, never the [n, d] gathered rows.
    buf = torch.randn(50, 64)
    ids = torch.arange(0, 50, 2)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        h_local, sink = gather_rows(buf, ids, drop=(0.5, None))
    assert [t.dtype for t in saved] == [torch.int64]
    assert sum(t.numel() * 8 for t in saved) * 8 == 25 * 64  # 1 bit an entry
    h_local.sum().backward()
    (g,) = sink
    assert torch.equal(g, (h_local.detach() != 0).to(g.dtype))  # dropped entries: no gradient



def test_a_gather_applies_the_mask_to_the_gradient_of_the_used_rows_only():
    """``used_rows``: the sunk gradient of those runs is masked as without them (bit
    for bit); the other rows' (stale reads, whose gradient the stage drops) is left
    as it came, unmasked; the forward is the same."""
    buf = torch.randn(40, 16, dtype=torch.float64)
    ids = torch.arange(39, -1, -1)
    grad = torch.randn(40, 16, dtype=torch.float64)
    runs = ((0, 10), (15, 22), (30, 40))
    outs = []
    for used in (None, runs):
        torch.manual_seed(5)  # the same mask drawn in both
        h_local, sink = gather_rows(buf, ids, drop=(0.5, None), used_rows=used)
        h_local.backward(grad.clone())  # the backward masks the gradient it gets in place
        outs.append((h_local.detach(), sink[0]))
    (h_all, g_all), (h_used, g_used) = outs
    assert torch.equal(h_used, h_all)
    in_runs = torch.zeros(40, dtype=torch.bool)
    for a, b in runs:
        in_runs[a:b] = True
    assert torch.equal(g_used[in_runs], g_all[in_runs])
    assert torch.equal(g_used[~in_runs], grad[~in_runs])
    assert not torch.equal(g_all[~in_runs], grad[~in_runs])  # the mask did act there
