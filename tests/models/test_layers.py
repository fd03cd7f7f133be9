"""Layer-level tests: the chunk invariance the engine relies on, and references.

THE KEY INVARIANT: a layer computed chunk by chunk from ``[own | halo]`` rows of the
previous layer's full output gives the whole-graph layer output, forward and
gradients (float64; with dropout, when every chunk applies its rows of the one mask
the whole-graph layer applies). References: a dense numpy ``A_hat`` for GCN, a dense
mean for GraphSAGE, and torch_geometric's GCNConv / GCN2Conv / SAGEConv with copied
weights.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnpipe.data.graph import Graph
from gnnpipe.kernels import ChunkOps
from gnnpipe.models import GCNIILayer, GCNLayer, MLPLayer, ResGCNPlusLayer, SAGELayer, dropout
from gnnpipe.models.masks import MaskRows, draw_keep
from gnnpipe.partition.plan import build_chunk_plans, whole_graph_plan

DT = torch.float64
RTOL = 1e-10
ATOL = 1e-12


def random_graph(n: int = 40, avg_deg: float = 4.0, feat: int = 6, classes: int = 3, seed: int = 0) -> Graph:
    """A random directed graph without self-loops or duplicate edges, with some isolated rows."""
    gen = torch.Generator().manual_seed(seed)
    e = int(n * avg_deg)
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n - 3, (e,), generator=gen)  # the last 3 rows have no in-edges
    x = torch.randn(n, feat, generator=gen)
    y = torch.randint(0, classes, (n,), generator=gen)
    g = Graph.from_edge_index(torch.stack([src, dst]), x, y, train_mask=torch.ones(n, dtype=torch.bool))
    return g.remove_self_loops().remove_duplicate_edges()


OFFSETS = torch.tensor([0, 7, 15, 16, 30, 40])  # uneven contiguous chunks, one of a single row


@pytest.fixture(scope="module")
def graph() -> Graph:
    return random_graph()


@pytest.fixture(scope="module")
def whole_ops(graph: Graph) -> ChunkOps:
    return ChunkOps.build(whole_graph_plan(graph), dtype=DT)


@pytest.fixture(scope="module")
def chunks(graph: Graph) -> list[tuple[object, ChunkOps]]:
    plans = build_chunk_plans(graph, OFFSETS)
    assert any(p.num_halo > 0 for p in plans)  # the test must exercise halo rows
    return [(p, ChunkOps.build(p, dtype=DT)) for p in plans]


def make_layer(kind: str, d_in: int, d_out: int, l: int = 1, p: float = 0.0):
    if kind == "gcn":
        return GCNLayer(d_in, d_out, dropout=p)
    if kind == "sage":
        return SAGELayer(d_in, d_out, dropout=p)
    if kind == "mlp":
        return MLPLayer(d_in, d_out, dropout=p)
    if kind == "gcnii":
        return GCNIILayer(d_out, l, alpha=0.2, lambda_=0.7, dropout=p)
    if kind == "resgcn+":
        return ResGCNPlusLayer(d_in, d_out, first=(l == 1), dropout=p)
    raise AssertionError(kind)


def _perturb_(module: torch.nn.Module, seed: int) -> None:
    """Random non-zero values for every parameter (biases and LayerNorm included),
    so that no term of the layer is trivially zero or one."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)


CASES = [
    ("gcn", 6, 5, 1), ("gcn", 5, 9, 1),      # both matmul orders
    ("sage", 6, 5, 1), ("sage", 5, 9, 1),
    ("mlp", 6, 5, 1),
    ("gcnii", 5, 5, 1), ("gcnii", 5, 5, 7),
    ("resgcn+", 6, 5, 1), ("resgcn+", 5, 5, 3),
]


@pytest.mark.parametrize("p", [0.0, 0.5], ids=["no-dropout", "shared-mask"])
@pytest.mark.parametrize("kind,d_in,d_out,l", CASES)
def test_layer_chunked_equals_whole_graph_forward_and_backward(graph, whole_ops, chunks, kind, d_in, d_out, l, p):
    torch.manual_seed(1)
    layer = make_layer(kind, d_in, d_out, l, p).to(DT)
    _perturb_(layer, 2)
    n = graph.num_nodes
    gen = torch.Generator().manual_seed(3)
    h_in = torch.randn(n, d_in, generator=gen, dtype=DT)
    h0 = torch.randn(n, d_out, generator=gen, dtype=DT)
    g_out = torch.randn(n, d_out, generator=gen, dtype=DT)  # upstream gradient
    # One mask over all rows; each chunk applies its rows of it (gnnpipe.models.masks).
    keep = torch.rand(n, d_in, generator=gen) >= p if layer.input_dropout > 0 else None

    # Whole graph.
    x_w = h_in.clone().requires_grad_(True)
    h0_w = h0.clone().requires_grad_(True)
    out_w = layer(x_w, whole_ops, h0_w if layer.needs_h0 else None, keep)
    layer.zero_grad()
    (out_w * g_out).sum().backward()
    grads_w = [p.grad.clone() for p in layer.parameters()]

    # Chunk by chunk, [own | halo] rows gathered from the previous layer's full output.
    x_c = h_in.clone().requires_grad_(True)
    h0_c = h0.clone().requires_grad_(True)
    layer.zero_grad()
    rows = []
    for plan, ops in chunks:
        h_local = x_c[plan.local_global_nid]
        h0_own = h0_c[plan.row_start:plan.row_end] if layer.needs_h0 else None
        # As a stage passes it: the chunk's rows of the whole mask, gathered where applied.
        out_k = layer(h_local, ops, h0_own, None if keep is None else MaskRows(keep, plan.local_global_nid))
        assert out_k.shape == (plan.num_own, d_out)
        (out_k * g_out[plan.row_start:plan.row_end]).sum().backward()
        rows.append(out_k.detach())
    out_c = torch.cat(rows)

    torch.testing.assert_close(out_c, out_w.detach(), rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(x_c.grad, x_w.grad, rtol=RTOL, atol=ATOL)
    if layer.needs_h0:
        torch.testing.assert_close(h0_c.grad, h0_w.grad, rtol=RTOL, atol=ATOL)
    for p, gw in zip(layer.parameters(), grads_w):
        torch.testing.assert_close(p.grad, gw, rtol=RTOL, atol=ATOL)
    # The gradient must reach the input (otherwise the comparison above is vacuous).
    assert x_w.grad.abs().sum() > 0


def dense_a_hat(graph: Graph) -> np.ndarray:
    """D^-1/2 (A + I) D^-1/2 with A[v, u] = 1 for an edge u -> v, D = in-degree + 1."""
    n = graph.num_nodes
    a = np.zeros((n, n))
    a[graph.dst_index().numpy(), graph.indices.numpy()] = 1.0
    a += np.eye(n)
    d = a.sum(axis=1)
    return a / np.sqrt(d)[:, None] / np.sqrt(d)[None, :]


def test_gcn_layer_matches_dense_numpy_reference(graph, whole_ops):
    torch.manual_seed(0)
    layer = GCNLayer(6, 4).to(DT)
    _perturb_(layer, 5)
    x = torch.randn(graph.num_nodes, 6, dtype=DT)
    ref = dense_a_hat(graph) @ x.numpy() @ layer.weight.detach().numpy() + layer.bias.detach().numpy()
    out = layer(x, whole_ops)
    torch.testing.assert_close(out.detach(), torch.from_numpy(np.maximum(ref, 0.0)), rtol=RTOL, atol=ATOL)
    layer.activation = False
    torch.testing.assert_close(layer(x, whole_ops).detach(), torch.from_numpy(ref), rtol=RTOL, atol=ATOL)


def test_sage_layer_matches_dense_mean_reference(graph, whole_ops):
    torch.manual_seed(0)
    layer = SAGELayer(6, 4, activation=False).to(DT)
    _perturb_(layer, 6)
    n = graph.num_nodes
    a = np.zeros((n, n))
    a[graph.dst_index().numpy(), graph.indices.numpy()] = 1.0
    deg = a.sum(axis=1, keepdims=True)
    mean = a / np.maximum(deg, 1.0)  # isolated rows aggregate to 0
    x = torch.randn(n, 6, dtype=DT).numpy()
    ws, wn, b = (t.detach().numpy() for t in (layer.weight_self, layer.weight_nbr, layer.bias))
    ref = x @ ws + mean @ x @ wn + b
    out = layer(torch.from_numpy(x), whole_ops)
    torch.testing.assert_close(out.detach(), torch.from_numpy(ref), rtol=RTOL, atol=ATOL)


def test_gcn_layer_matches_pyg_gcnconv(graph, whole_ops):
    pyg = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    ours = GCNLayer(6, 4, activation=False).to(DT)
    _perturb_(ours, 7)
    ref = pyg.GCNConv(6, 4).to(DT)
    with torch.no_grad():
        ref.lin.weight.copy_(ours.weight.T)
        ref.bias.copy_(ours.bias)
    x = torch.randn(graph.num_nodes, 6, dtype=DT)
    torch.testing.assert_close(ours(x, whole_ops), ref(x, graph.edge_index()), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("l", [1, 5])
def test_gcnii_layer_matches_pyg_gcn2conv(graph, whole_ops, l):
    pyg = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    ours = GCNIILayer(5, l, alpha=0.1, lambda_=0.5, activation=False).to(DT)
    _perturb_(ours, 8)
    ref = pyg.GCN2Conv(5, alpha=0.1, theta=0.5, layer=l, shared_weights=True).to(DT)
    with torch.no_grad():
        ref.weight1.copy_(ours.weight)
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(graph.num_nodes, 5, generator=gen, dtype=DT)
    x0 = torch.randn(graph.num_nodes, 5, generator=gen, dtype=DT)
    torch.testing.assert_close(ours(x, whole_ops, x0), ref(x, x0, graph.edge_index()), rtol=RTOL, atol=ATOL)


def test_sage_layer_matches_pyg_sageconv(graph, whole_ops):
    pyg = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    ours = SAGELayer(6, 4, activation=False).to(DT)
    _perturb_(ours, 10)
    ref = pyg.SAGEConv(6, 4, aggr="mean").to(DT)
    with torch.no_grad():
        ref.lin_l.weight.copy_(ours.weight_nbr.T)  # lin_l: neighbours, with the bias
        ref.lin_l.bias.copy_(ours.bias)
        ref.lin_r.weight.copy_(ours.weight_self.T)  # lin_r: the root, no bias
    x = torch.randn(graph.num_nodes, 6, dtype=DT)
    torch.testing.assert_close(ours(x, whole_ops), ref(x, graph.edge_index()), rtol=RTOL, atol=ATOL)


def test_gcnii_beta_follows_the_paper():
    for l in (1, 2, 10, 64):
        assert GCNIILayer(4, l, lambda_=0.5).beta == pytest.approx(np.log(0.5 / l + 1.0), rel=1e-15)
    with pytest.raises(ValueError):
        GCNIILayer(4, 0)


def test_mlp_layer_ignores_the_halo(chunks):
    plan, ops = next((p, o) for p, o in chunks if p.num_halo > 0)
    torch.manual_seed(0)
    layer = MLPLayer(3, 2).to(DT)
    h = torch.randn(ops.num_local, 3, dtype=DT)
    h2 = h.clone()
    h2[ops.num_own:] = torch.randn(ops.num_halo, 3, dtype=DT)
    torch.testing.assert_close(layer(h, ops), layer(h2, ops), rtol=0, atol=0)
    ref = torch.relu(h[: ops.num_own] @ layer.weight + layer.bias)
    torch.testing.assert_close(layer(h, ops), ref, rtol=RTOL, atol=ATOL)


def test_dropout_is_on_the_layer_input_and_off_in_eval(whole_ops, graph):
    torch.manual_seed(0)
    layer = GCNLayer(6, 4, dropout=0.5, activation=False).to(DT)
    x = torch.randn(graph.num_nodes, 6, dtype=DT)
    layer.eval()
    torch.testing.assert_close(layer(x, whole_ops), layer(x, whole_ops), rtol=0, atol=0)
    layer.train()
    torch.manual_seed(11)
    out = layer(x, whole_ops)
    torch.manual_seed(11)
    mask = dropout(torch.ones_like(x), 0.5, True)
    layer.eval()
    torch.testing.assert_close(out, layer(x * mask, whole_ops), rtol=RTOL, atol=ATOL)


def test_dropout_zeroes_a_fraction_p_and_rescales_the_rest():
    torch.manual_seed(0)
    x = torch.rand(400, 250, dtype=DT) + 0.5  # no zeros of its own
    x.requires_grad_(True)
    y = dropout(x, 0.3, True)
    kept = y != 0
    assert abs(1.0 - float(kept.double().mean()) - 0.3) < 0.01  # 100k draws: sd of the rate ~0.0015
    torch.testing.assert_close(y[kept], x.detach()[kept] / 0.7, rtol=1e-15, atol=0)
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad, kept.to(DT) / 0.7, rtol=1e-15, atol=0)
    assert dropout(x, 0.3, False) is x and dropout(x, 0.0, True) is x


def test_dropout_keeps_a_bool_mask_for_backward_where_p_needs_8_bits_or_more():
    # The saved mask is the largest state a pipelined stage keeps per chunk and layer:
    # at most 1 byte per entry, and the same draw with or without grad.
    x = torch.randn(50, 8, dtype=torch.float32, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        torch.manual_seed(3)
        y = dropout(x, 0.4, True)
    assert [t.dtype for t in saved] == [torch.bool]
    assert saved[0].shape == x.shape
    torch.manual_seed(3)
    torch.testing.assert_close(y.detach(), dropout(x.detach(), 0.4, True), rtol=0, atol=0)


@pytest.mark.parametrize("p,bits", [(0.5, 1), (0.25, 2), (0.0625, 4)])
def test_dropout_keeps_the_random_words_where_p_needs_fewer_bits(p, bits):
    # At p = 0.5 the mask is one random bit an entry: dropout saves those words, an
    # eighth of a bool mask, and unpacks them again in backward. The backward must use
    # what the saved-tensor hooks hand back (a stage moves saved tensors into its
    # arena), and apply the forward's mask.
    x = (torch.rand(300, 70, dtype=DT) + 0.5).requires_grad_(True)
    saved = []

    def pack(t):
        saved.append(t)
        return t.clone()  # the backward gets a copy, as from the arena

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = dropout(x, p, True, generator=torch.Generator().manual_seed(6))
    assert [t.dtype for t in saved] == [torch.int64]
    assert saved[0].numel() * 8 == -(-x.numel() * bits // 64) * 8  # bits per entry, in whole words
    saved[0].zero_()  # the original words are not what the backward reads
    keep = draw_keep(x.shape, p, generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(y.detach(), x.detach() * keep / (1 - p), rtol=1e-15, atol=0)
    g = torch.randn_like(x)
    y.backward(g)
    torch.testing.assert_close(x.grad, g * keep / (1 - p), rtol=1e-15, atol=0)
    assert abs(float(keep.double().mean()) - (1 - p)) < 0.02


@pytest.mark.parametrize("d_in,d_out", [(6, 4), (4, 6)])  # transform first / aggregate first
def test_gcn_layer_without_bias_matches_dense_reference(graph, whole_ops, d_in, d_out):
    torch.manual_seed(0)
    layer = GCNLayer(d_in, d_out, bias=False).to(DT)
    assert layer.bias is None and len(list(layer.parameters())) == 1
    x = torch.randn(graph.num_nodes, d_in, dtype=DT)
    ref = np.maximum(dense_a_hat(graph) @ x.numpy() @ layer.weight.detach().numpy(), 0.0)
    torch.testing.assert_close(layer(x, whole_ops).detach(), torch.from_numpy(ref), rtol=RTOL, atol=ATOL)


def test_dropout_with_a_given_mask_applies_it_forward_and_backward():
    # A chunked engine passes each reader its rows of one mask: dropout must apply
    # exactly that mask (no draw of its own) and keep it, 1 byte per entry, for backward.
    gen = torch.Generator().manual_seed(4)
    x = (torch.rand(30, 7, generator=gen, dtype=DT) + 0.5).requires_grad_(True)
    keep = torch.rand(30, 7, generator=gen) >= 0.25
    state = torch.get_rng_state()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = dropout(x, 0.25, True, keep)
    assert torch.equal(torch.get_rng_state(), state)  # nothing drawn
    torch.testing.assert_close(y, x.detach() * keep / 0.75, rtol=1e-15, atol=0)
    assert [t.dtype for t in saved] == [torch.bool]
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad, keep.to(DT) / 0.75, rtol=1e-15, atol=0)
    torch.testing.assert_close(dropout(x.detach(), 0.25, True, keep), y.detach(), rtol=0, atol=0)
    assert dropout(x, 0.25, False, keep) is x  # eval: no dropout, mask or not


def test_dropout_draws_from_the_given_generator():
    x = torch.ones(20, 9, dtype=DT)
    a = dropout(x, 0.5, True, generator=torch.Generator().manual_seed(8))
    torch.manual_seed(0)
    b = dropout(x, 0.5, True, generator=torch.Generator().manual_seed(8))
    c = dropout(x, 0.5, True, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_dropout_with_mask_rows_saves_no_gathered_copy_and_equals_the_gathered_mask():
    # A stage passes MaskRows (its layer's N-row mask and the chunk's row ids): the
    # backward gathers the rows again, so nothing of the chunk's size is kept.
    from gnnpipe.models.masks import MaskRows

    gen = torch.Generator().manual_seed(5)
    mask = torch.rand(40, 6, generator=gen) >= 0.5
    ids = torch.tensor([3, 17, 17, 0, 39, 8])
    x = torch.randn(6, 6, generator=gen, dtype=DT, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = dropout(x, 0.5, True, MaskRows(mask, ids))
    assert saved == []
    g = torch.randn(6, 6, generator=gen, dtype=DT)
    y.backward(g)
    x2 = x.detach().clone().requires_grad_(True)
    y2 = dropout(x2, 0.5, True, mask[ids])
    y2.backward(g)
    assert torch.equal(y.detach(), y2.detach()) and torch.equal(x.grad, x2.grad)


@pytest.mark.parametrize("kind,d_in,d_out,l", CASES)
def test_folded_dropout_scale_equals_inverted_dropout(graph, whole_ops, kind, d_in, d_out, l):
    # Layers apply the mask alone and fold 1 / (1 - p) into the linear map that follows
    # (dropout(..., scaled=False), scaled_weight): output and every gradient must equal
    # those of the explicit x * keep / (1 - p) (ResGCN+ drops after its norm and ReLU).
    from gnnpipe.models.layers import _sage_conv

    p = 0.3
    layer = make_layer(kind, d_in, d_out, l, p).to(DT)
    _perturb_(layer, 3)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(graph.num_nodes, d_in, generator=gen, dtype=DT)
    h0 = torch.randn(graph.num_nodes, d_out, generator=gen, dtype=DT) if kind == "gcnii" else None
    keep = torch.rand(graph.num_nodes, d_in, generator=gen) >= p
    g_out = torch.randn(graph.num_nodes, d_out, generator=gen, dtype=DT)

    def run(train: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        layer.zero_grad()
        xi = x.clone().requires_grad_(True)
        layer.train(train)
        if train:
            out = layer(xi, whole_ops, h0, keep)
        elif kind == "resgcn+" and l > 1:
            z = torch.relu(layer.norm(xi)) * keep / (1 - p)
            out = _sage_conv(z, whole_ops, layer.weight_self, layer.weight_nbr, layer.bias) + xi
        elif kind == "resgcn+":
            out = layer(xi, whole_ops)  # the first block is the bare conv: no dropout
        else:
            out = layer(xi * keep / (1 - p), whole_ops, h0)
        out.backward(g_out)
        return out.detach(), [xi.grad] + [q.grad.clone() for q in layer.parameters()]

    got, got_grads = run(True)
    want, want_grads = run(False)
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)


def test_classifier_and_input_projection_fold_the_dropout_scale():
    from gnnpipe.models.masks import draw_keep
    from gnnpipe.models.model import Classifier, InputProjection

    p = 0.4
    gen = torch.Generator().manual_seed(2)
    h = torch.randn(25, 6, generator=gen, dtype=DT)
    keep = torch.rand(25, 6, generator=gen) >= p
    clf = Classifier(6, 3, dropout=p).to(DT)
    clf.train()
    got = clf(h, keep)
    clf.eval()
    torch.testing.assert_close(got, clf(h * keep / (1 - p)), rtol=RTOL, atol=ATOL)

    proj = InputProjection(6, 4, dropout=p).to(DT)
    proj.train()
    got = proj(h, generator=torch.Generator().manual_seed(7))
    drawn = draw_keep(h.shape, p, generator=torch.Generator().manual_seed(7))
    proj.eval()
    torch.testing.assert_close(got, proj(h * drawn / (1 - p)), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind,d_in,d_out,l", CASES)
def test_operators_holding_halo_rows_constant_change_no_parameter_gradient_where_the_layer_says(chunks, kind, d_in,
                                                                                              d_out, l):
    """``aggregates_input_rows``: where True, operators that hold halo rows constant
    give the same output, the same parameter gradients and the same input gradient of
    the other rows (a pipeline stage then passes them for its stale reads); where False
    (the rows are multiplied by a weight or normalised before the aggregation), they
    would change a parameter's gradient, so the flag is what keeps a stage exact."""
    torch.manual_seed(1)
    layer = make_layer(kind, d_in, d_out, l, 0.0).to(DT)
    _perturb_(layer, 2)
    changed = []
    for plan, ops in chunks:
        if plan.num_halo == 0:
            continue
        gen = torch.Generator().manual_seed(plan.num_local)
        h_local = torch.randn(plan.num_local, d_in, generator=gen, dtype=DT)
        h0 = torch.randn(plan.num_own, d_out, generator=gen, dtype=DT) if layer.needs_h0 else None
        g_out = torch.randn(plan.num_own, d_out, generator=gen, dtype=DT)
        constant = torch.zeros(plan.num_local, dtype=torch.bool)
        constant[plan.num_own:] = torch.rand(plan.num_halo, generator=gen) < 0.5
        constant[plan.num_own] = True
        results = []
        for o in (ops, ops.with_constant_rows(constant)):
            x = h_local.clone().requires_grad_(True)
            layer.zero_grad()
            out = layer(x, o, h0)
            (out * g_out).sum().backward()
            results.append((out.detach(), x.grad, [p.grad.clone() for p in layer.parameters()]))
        (out_f, gx_f, gp_f), (out_c, gx_c, gp_c) = results
        assert torch.equal(out_c, out_f)
        same_params = all(torch.allclose(a, b, rtol=RTOL, atol=ATOL) for a, b in zip(gp_c, gp_f))
        if layer.aggregates_input_rows:
            assert same_params
            torch.testing.assert_close(gx_c[~constant], gx_f[~constant], rtol=RTOL, atol=ATOL)
        changed.append(not same_params)
    if not layer.aggregates_input_rows and kind != "mlp":
        assert any(changed)  # the flag is False for a reason
    expected = {"gcn": d_out >= d_in, "sage": d_out >= d_in, "gcnii": True, "resgcn+": l == 1 and d_out >= d_in,
                "mlp": False}[kind]
    assert layer.aggregates_input_rows == expected
