"""ChunkOps: every backend against the reference (float64, forward and backward),
the reference against dense-matrix definitions, chunks against the whole graph, the
max tie rule, operator reuse, determinism and input errors."""

from __future__ import annotations

import os

import pytest
import torch

from gnnpipe.errors import ConfigError, DataError
from gnnpipe.kernels import BACKENDS, REDUCES, ChunkOps, available_backends
from gnnpipe.partition import build_chunk_plans, whole_graph_plan

F64 = torch.float64
HAS_SCATTER = "scatter" in available_backends()
# .ci/run sets GNNPIPE_REQUIRE_SCATTER=1 after installing torch-scatter: the scatter
# backend tests then run (and fail if torch_scatter does not import) instead of skipping.
REQUIRE_SCATTER = os.environ.get("GNNPIPE_REQUIRE_SCATTER") == "1"
SCATTER = pytest.param(
    "scatter",
    marks=pytest.mark.skipif(
        not HAS_SCATTER and not REQUIRE_SCATTER, reason="torch_scatter is not importable (GNNPIPE_REQUIRE_SCATTER unset)"
    ),
)
FAST_BACKENDS = ["torch", SCATTER]
ALL_BACKENDS = ["torch", SCATTER, "reference"]
TIGHT = dict(rtol=1e-12, atol=1e-12)

# Offsets over 30 vertices: an empty chunk first, in the middle and last, a chunk of
# one vertex, and uneven sizes.
CHUNKINGS = [[0, 30], [0, 0, 7, 7, 8, 19, 30, 30], [0, 15, 30], [0, 4, 9, 13, 21, 25, 30]]


def _seeded(shape: tuple[int, ...], seed: int, dtype: torch.dtype = F64) -> torch.Tensor:
    # Drawn in float64 and cast, so that a seed gives the same values in every dtype.
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(dtype)


def _run(ops: ChunkOps, x: torch.Tensor, reduce: str, w: torch.Tensor | None, grad_y_seed: int):
    """Forward, then backward of <grad_y, y>; returns (y, grad_x, grad_w)."""
    x = x.clone().requires_grad_(True)
    w = w.clone().requires_grad_(True) if w is not None else None
    y = ops.aggregate(x, reduce, edge_weight=w)
    grad_y = _seeded(tuple(y.shape), grad_y_seed, y.dtype)
    (y * grad_y).sum().backward()
    return y.detach(), x.grad, (w.grad if w is not None else None)


def _plan_edge_ids(graph, plan) -> torch.Tensor:
    """int64 [nnz]: the graph edge (CSR position) of every plan edge. Plans may order a
    row's edges differently from the graph; copies of a duplicated edge are matched in
    order (they are interchangeable)."""
    e0, e1 = int(graph.indptr[plan.row_start]), int(graph.indptr[plan.row_end])
    n = graph.num_nodes
    plan_key = (plan.dst_local() + plan.row_start) * n + plan.local_global_nid[plan.indices]
    graph_key = graph.dst_index()[e0:e1] * n + graph.indices[e0:e1]
    ids = torch.empty(plan.num_edges, dtype=torch.int64)
    ids[torch.sort(plan_key, stable=True).indices] = e0 + torch.sort(graph_key, stable=True).indices
    return ids


def _dense_reference(graph, x: torch.Tensor, reduce: str, w: torch.Tensor | None) -> torch.Tensor:
    """The ARCHITECTURE.md definitions as dense matrices over the whole graph."""
    n = graph.num_nodes
    dst, src = graph.dst_index(), graph.indices
    vals = w if w is not None else torch.ones(src.numel(), dtype=F64)
    a = torch.zeros(n, n, dtype=F64).index_put_((dst, src), vals, accumulate=True)
    deg = graph.in_degree.to(F64)
    if reduce in ("sum", "weighted"):
        return a @ x
    if reduce == "mean":
        return torch.where(deg[:, None] > 0, (a @ x) / deg.clamp_min(1)[:, None], 0.0)
    if reduce == "gcn":
        dinv = (deg + 1).rsqrt()
        return (dinv[:, None] * (a + torch.eye(n, dtype=F64)) * dinv[None, :]) @ x
    if reduce == "max":
        masked = torch.where(a[:, :, None] > 0, x[None, :, :], float("-inf"))
        return torch.where(deg[:, None] > 0, masked.amax(dim=1), 0.0)
    raise AssertionError(reduce)


@pytest.mark.parametrize("reduce", REDUCES)
def test_reference_matches_dense_definition(make_random_graph, reduce):
    graph = make_random_graph(25, 90, seed=1)
    plan = whole_graph_plan(graph)
    x = _seeded((25, 4), 2)
    w = _seeded((plan.num_edges,), 3) if reduce == "weighted" else None
    y = ChunkOps.build(plan, dtype=F64, backend="reference").aggregate(x, reduce, edge_weight=w)
    torch.testing.assert_close(y, _dense_reference(graph, x, reduce, w), **TIGHT)


@pytest.mark.parametrize("offsets", CHUNKINGS, ids=lambda o: f"{len(o) - 1}chunks")
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_backend_matches_reference_forward_and_backward(make_random_graph, backend, reduce, offsets):
    graph = make_random_graph(30, 120, seed=4)
    for plan in build_chunk_plans(graph, torch.tensor(offsets)):
        x = _seeded((plan.num_local, 5), 10 + plan.chunk_idx)
        w = _seeded((plan.num_edges,), 20 + plan.chunk_idx) if reduce == "weighted" else None
        got = _run(ChunkOps.build(plan, dtype=F64, backend=backend), x, reduce, w, 30)
        want = _run(ChunkOps.build(plan, dtype=F64, backend="reference"), x, reduce, w, 30)
        assert got[0].shape == (plan.num_own, 5)
        for g, r in zip(got, want):
            if r is None:
                assert g is None
            else:
                torch.testing.assert_close(g, r, **TIGHT)


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_chunks_without_halo_match_reference(make_two_component_graph, backend, reduce):
    graph, offsets = make_two_component_graph(seed=5)
    plans = build_chunk_plans(graph, offsets)
    assert [p.num_halo for p in plans] == [0, 0]
    for plan in plans:
        x = _seeded((plan.num_local, 3), 40 + plan.chunk_idx)
        w = _seeded((plan.num_edges,), 50) if reduce == "weighted" else None
        got = _run(ChunkOps.build(plan, dtype=F64, backend=backend), x, reduce, w, 60)
        # The chunk is a graph of its own: the dense definition over its block applies.
        block = whole_graph_plan(graph)
        full_x = _seeded((graph.num_nodes, 3), 99)
        full_x[plan.row_start : plan.row_end] = x
        full_w = None
        if w is not None:
            full_w = torch.zeros(block.num_edges, dtype=F64)
            full_w[_plan_edge_ids(graph, plan)] = w
        want = _dense_reference(graph, full_x, reduce, full_w)[plan.row_start : plan.row_end]
        torch.testing.assert_close(got[0], want, **TIGHT)


@pytest.mark.parametrize("offsets", CHUNKINGS[1:], ids=lambda o: f"{len(o) - 1}chunks")
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_chunks_match_whole_graph(make_random_graph, backend, reduce, offsets):
    """Per-chunk aggregates of [own | halo] rows are the whole graph's rows, and the
    chunks' x_local gradients (own and halo rows) add up to the whole-graph gradient."""
    graph = make_random_graph(30, 120, seed=7)
    whole = whole_graph_plan(graph)
    x = _seeded((30, 4), 70)
    w = _seeded((whole.num_edges,), 71) if reduce == "weighted" else None
    grad_y = _seeded((30, 4), 72)

    x_whole = x.clone().requires_grad_(True)
    w_whole = w.clone().requires_grad_(True) if w is not None else None
    y_whole = ChunkOps.build(whole, dtype=F64, backend=backend).aggregate(x_whole, reduce, edge_weight=w_whole)
    (y_whole * grad_y).sum().backward()

    grad_x = torch.zeros_like(x)
    grad_w = torch.zeros_like(w) if w is not None else None
    for plan in build_chunk_plans(graph, torch.tensor(offsets)):
        local_global = plan.local_global_nid
        edge_ids = _plan_edge_ids(graph, plan)
        x_local = x[local_global].clone().requires_grad_(True)
        w_local = w[edge_ids].clone().requires_grad_(True) if w is not None else None
        y = ChunkOps.build(plan, dtype=F64, backend=backend).aggregate(x_local, reduce, edge_weight=w_local)
        torch.testing.assert_close(y, y_whole[plan.row_start : plan.row_end].detach(), **TIGHT)
        (y * grad_y[plan.row_start : plan.row_end]).sum().backward()
        grad_x.index_add_(0, local_global, x_local.grad)
        if w is not None:
            grad_w[edge_ids] = w_local.grad
    torch.testing.assert_close(grad_x, x_whole.grad, **TIGHT)
    if w is not None:
        torch.testing.assert_close(grad_w, w_whole.grad, **TIGHT)


@pytest.mark.parametrize("backend", ["torch", "reference"])
def test_max_ties_split_gradient_evenly(make_random_graph, backend):
    """Rule: an output element's gradient is shared equally by the edges whose source
    attains the maximum (a duplicated edge counts once per copy)."""
    graph = make_random_graph(30, 120, seed=8)
    plan = whole_graph_plan(graph)
    # Integer features from {0, 1, 2} tie often.
    x = torch.randint(0, 3, (30, 3), generator=torch.Generator().manual_seed(9)).to(F64)
    y, grad_x, _ = _run(ChunkOps.build(plan, dtype=F64, backend=backend), x, "max", None, 10)
    grad_y = _seeded((30, 3), 10)
    # The rule written out per edge, independently of both backends.
    dst, src = graph.dst_index(), graph.indices
    hit = (x[src] == y[dst]).to(F64)
    ties = torch.zeros(30, 3, dtype=F64).index_add_(0, dst, hit)
    want = torch.zeros(30, 3, dtype=F64).index_add_(0, src, hit * (grad_y / ties.clamp_min(1))[dst])
    assert int((ties > 1).sum()) > 10  # the case is exercised
    torch.testing.assert_close(grad_x, want, **TIGHT)


@pytest.mark.skipif(not HAS_SCATTER and not REQUIRE_SCATTER, reason="torch_scatter is not importable")
def test_scatter_max_sends_each_gradient_to_one_arg_max_edge(make_random_graph):
    """The scatter backend's rule (torch-scatter's): an output element's gradient goes
    whole to one edge whose source attains the maximum, not split among ties. Checked
    element by element with one-hot output gradients."""
    graph = make_random_graph(30, 120, seed=8)
    plan = whole_graph_plan(graph)
    x = torch.randint(0, 3, (30, 3), generator=torch.Generator().manual_seed(9)).to(F64).requires_grad_(True)
    y = ChunkOps.build(plan, dtype=F64, backend="scatter").aggregate(x, "max")
    dst, src, y_val = graph.dst_index(), graph.indices, y.detach()
    checked_ties = 0
    for v in range(30):
        sources = src[dst == v]
        for j in range(3):
            (grad_x,) = torch.autograd.grad(y[v, j], x, retain_graph=True)
            if sources.numel() == 0:
                assert float(y_val[v, j]) == 0.0 and not grad_x.any()
                continue
            winners = set(sources[x.detach()[sources, j] == y_val[v, j]].tolist())
            nonzero = grad_x.nonzero().tolist()
            assert len(nonzero) == 1 and nonzero[0][1] == j and nonzero[0][0] in winners
            assert float(grad_x.sum()) == 1.0
            checked_ties += len(winners) > 1
    assert checked_ties > 10  # distinct sources tie: the case where the rules differ


@pytest.mark.skipif(not REQUIRE_SCATTER, reason="GNNPIPE_REQUIRE_SCATTER=1 is not set (CI sets it with torch-scatter installed)")
def test_required_scatter_backend_is_the_real_torch_scatter(make_random_graph):
    """Under GNNPIPE_REQUIRE_SCATTER=1 the scatter backend must be the compiled library:
    torch_scatter imports, its segment_csr op is registered with torch, and ChunkOps
    uses that segment_csr (not a stand-in), so the scatter tests above ran for real."""
    import torch_scatter

    assert HAS_SCATTER
    assert torch_scatter.segment_csr.__module__ == "torch_scatter.segment_csr"
    assert hasattr(torch.ops.torch_scatter, "segment_sum_csr") and hasattr(torch.ops.torch_scatter, "segment_max_csr")
    ops = ChunkOps.build(whole_graph_plan(make_random_graph(8, 20, seed=29)), backend="scatter")
    assert ops.backend == "scatter"
    assert ops._impl._segment_csr is torch_scatter.segment_csr


@pytest.mark.parametrize("reduce", REDUCES)
def test_torch_backend_gradcheck(make_random_graph, reduce):
    graph = make_random_graph(12, 40, seed=11, num_isolated=2)
    plan = build_chunk_plans(graph, torch.tensor([0, 5, 12]))[1]
    ops = ChunkOps.build(plan, dtype=F64, backend="torch")
    x = _seeded((plan.num_local, 2), 12).requires_grad_(True)
    if reduce == "weighted":
        w = _seeded((plan.num_edges,), 13).requires_grad_(True)
        assert torch.autograd.gradcheck(lambda a, b: ops.aggregate(a, reduce, edge_weight=b), (x, w))
    else:
        assert torch.autograd.gradcheck(lambda a: ops.aggregate(a, reduce), (x,))


@pytest.mark.parametrize("reduce", ["sum", "mean", "gcn"])
def test_fixed_operators_are_not_rebuilt_per_call(make_random_graph, monkeypatch, reduce):
    """sum/mean/gcn use the CSR and transposed CSR made in build: no sparse tensor is
    constructed in forward or backward."""
    import gnnpipe.kernels.csr as csr

    graph = make_random_graph(20, 60, seed=14)
    ops = ChunkOps.build(build_chunk_plans(graph, torch.tensor([0, 8, 20]))[0], dtype=F64)
    calls = []
    real = csr.make_csr
    monkeypatch.setattr(csr, "make_csr", lambda *a, **k: calls.append(1) or real(*a, **k))
    _run(ops, _seeded((ops.num_local, 3), 15), reduce, None, 16)
    assert calls == []


def test_torch_backend_builds_only_the_reduces_named_and_the_rest_at_first_use(make_random_graph):
    """``reduces=("gcn",)`` builds the gcn operator alone; another reduce is built at
    its first aggregate, and every result equals that of operators built at once."""
    graph = make_random_graph(30, 120, seed=21)
    plan = build_chunk_plans(graph, torch.tensor([0, 11, 30]))[1]
    every = ChunkOps.build(plan, dtype=F64)
    assert every._impl.built == frozenset(REDUCES)
    ops = ChunkOps.build(plan, dtype=F64, reduces=("gcn",))
    assert ops._impl.built == frozenset({"gcn"})
    x = _seeded((plan.num_local, 4), 22)
    w = _seeded((plan.num_edges,), 23).abs()
    for i, reduce in enumerate(("gcn", "mean", "max", "weighted", "sum")):
        got = _run(ops, x, reduce, w if reduce == "weighted" else None, 24 + i)
        want = _run(every, x, reduce, w if reduce == "weighted" else None, 24 + i)
        for a, b in zip(got, want):
            assert (a is None and b is None) or torch.equal(a, b), reduce
    assert ops._impl.built == frozenset(REDUCES)
    assert ChunkOps.build(plan, dtype=F64, reduces=())._impl.built == frozenset()


def test_unknown_reduce_to_build_is_a_config_error(make_random_graph):
    plan = build_chunk_plans(make_random_graph(10, 30, seed=25), torch.tensor([0, 10]))[0]
    with pytest.raises(ConfigError, match="reduces: expected names among .* found 'median'"):
        ChunkOps.build(plan, reduces=("gcn", "median"))


@pytest.mark.parametrize("reduce", REDUCES)
def test_torch_backend_is_deterministic(make_random_graph, reduce):
    graph = make_random_graph(40, 200, seed=17)
    plan = build_chunk_plans(graph, torch.tensor([0, 20, 40]))[1]
    ops = ChunkOps.build(plan, dtype=torch.float32)
    x = _seeded((plan.num_local, 8), 18, torch.float32)
    w = _seeded((plan.num_edges,), 19, torch.float32) if reduce == "weighted" else None
    first, second = _run(ops, x, reduce, w, 20), _run(ops, x, reduce, w, 20)
    for a, b in zip(first, second):
        assert (a is None and b is None) or torch.equal(a, b)


@pytest.mark.parametrize("reduce", REDUCES)
def test_float32_matches_float64_reference(make_random_graph, reduce):
    graph = make_random_graph(30, 120, seed=21)
    plan = build_chunk_plans(graph, torch.tensor([0, 13, 30]))[0]
    x = _seeded((plan.num_local, 6), 22)
    w = _seeded((plan.num_edges,), 23) if reduce == "weighted" else None
    got = _run(ChunkOps.build(plan, dtype=torch.float32), x.float(), reduce, w.float() if w is not None else None, 24)
    want = _run(ChunkOps.build(plan, dtype=F64, backend="reference"), x, reduce, w, 24)
    for g, r in zip(got, want):
        if r is not None:
            assert g.dtype == torch.float32
            torch.testing.assert_close(g.double(), r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_empty_chunk_returns_empty_rows_with_zero_gradients(make_random_graph, backend):
    graph = make_random_graph(10, 30, seed=25)
    plan = build_chunk_plans(graph, torch.tensor([0, 4, 4, 10]))[1]
    assert plan.num_own == 0 and plan.num_halo == 0
    ops = ChunkOps.build(plan, dtype=F64, backend=backend)
    for reduce in REDUCES:
        w = torch.zeros(0, dtype=F64) if reduce == "weighted" else None
        y, grad_x, _ = _run(ops, torch.zeros(0, 7, dtype=F64), reduce, w, 26)
        assert y.shape == (0, 7) and grad_x.shape == (0, 7)


def test_unknown_backend_is_a_config_error(make_random_graph):
    plan = whole_graph_plan(make_random_graph(8, 20, seed=27))
    with pytest.raises(ConfigError, match="backend.*'cusparse'"):
        ChunkOps.build(plan, backend="cusparse")


def test_unknown_reduce_is_a_config_error(make_random_graph):
    ops = ChunkOps.build(whole_graph_plan(make_random_graph(8, 20, seed=28)))
    with pytest.raises(ConfigError, match="reduce.*'min'"):
        ops.aggregate(torch.zeros(8, 2), "min")


@pytest.mark.skipif(HAS_SCATTER, reason="torch_scatter is installed here")
def test_scatter_backend_without_torch_scatter_is_a_config_error(make_random_graph):
    with pytest.raises(ConfigError, match="torch_scatter"):
        ChunkOps.build(whole_graph_plan(make_random_graph(8, 20, seed=29)), backend="scatter")


def test_bad_inputs_raise_one_line_errors(make_random_graph):
    ops = ChunkOps.build(whole_graph_plan(make_random_graph(8, 20, seed=30)))
    cases = [
        (DataError, lambda: ops.aggregate(torch.zeros(7, 2), "sum"), "x_local.*\\[8, d\\].*\\[7, 2\\]"),
        (DataError, lambda: ops.aggregate(torch.zeros(8), "sum"), "x_local.*\\[8\\]"),
        (DataError, lambda: ops.aggregate(torch.zeros(8, 2, dtype=F64), "sum"), "x_local.*float32.*float64"),
        (ConfigError, lambda: ops.aggregate(torch.zeros(8, 2), "weighted"), "edge_weight.*None"),
        (ConfigError, lambda: ops.aggregate(torch.zeros(8, 2), "sum", edge_weight=torch.zeros(ops.num_edges)), "edge_weight"),
        (DataError, lambda: ops.aggregate(torch.zeros(8, 2), "weighted", edge_weight=torch.zeros(ops.num_edges + 1)), "edge_weight"),
        (ConfigError, lambda: ChunkOps.build(ops.plan, dtype=torch.int64), "dtype"),
    ]
    for error, call, pattern in cases:
        with pytest.raises(error, match=pattern) as info:
            call()
        assert "\n" not in str(info.value)


def test_backends_listed():
    assert set(available_backends()) <= set(BACKENDS)
    assert {"torch", "reference"} <= set(available_backends())


class _SegmentCsrStandIn:
    """A pure-torch stand-in for ``torch_scatter.segment_csr`` (sum / max, 0 for empty
    segments), so that the scatter backend's own code (gathers, normalisations,
    self-loop term, empty chunks) is tested even where torch_scatter is absent."""

    @staticmethod
    def segment_csr(src: torch.Tensor, indptr: torch.Tensor, reduce: str = "sum") -> torch.Tensor:
        rows = []
        for a, b in zip(indptr[:-1].tolist(), indptr[1:].tolist()):
            if a == b:
                rows.append(src.new_zeros(src.shape[1:]))
            else:
                rows.append(src[a:b].sum(0) if reduce == "sum" else src[a:b].amax(0))
        return torch.stack(rows)


@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_backend_code_with_stand_in_segment_csr(make_random_graph, monkeypatch, reduce):
    import gnnpipe.kernels.scatter_backend as scatter_backend

    monkeypatch.setattr(scatter_backend, "_import_torch_scatter", lambda: _SegmentCsrStandIn)
    graph = make_random_graph(30, 120, seed=31)
    for plan in build_chunk_plans(graph, torch.tensor(CHUNKINGS[1])):
        x = _seeded((plan.num_local, 3), 32 + plan.chunk_idx)
        w = _seeded((plan.num_edges,), 33) if reduce == "weighted" else None
        got = _run(ChunkOps.build(plan, dtype=F64, backend="scatter"), x, reduce, w, 34)
        want = _run(ChunkOps.build(plan, dtype=F64, backend="reference"), x, reduce, w, 34)
        for g, r in zip(got, want):
            if r is not None:
                torch.testing.assert_close(g, r, **TIGHT)


@pytest.mark.parametrize("reduce", REDUCES)
def test_plan_with_unsorted_rows_matches_reference(make_random_graph, reduce):
    """A plan whose rows list local ids in descending order (not what build_chunk_plans
    makes, but a valid CSR) takes the sorting paths of the build and gives the same
    results as the reference, edge weights following the plan's edge order."""
    import dataclasses

    graph = make_random_graph(30, 120, seed=35)
    plan = build_chunk_plans(graph, torch.tensor([0, 12, 30]))[1]
    row = plan.dst_local()
    order = torch.argsort(row * plan.num_local - plan.indices, stable=True)
    shuffled = dataclasses.replace(plan, indices=plan.indices[order].contiguous())
    assert not torch.equal(shuffled.indices, plan.indices)
    x = _seeded((plan.num_local, 4), 36)
    w = _seeded((plan.num_edges,), 37) if reduce == "weighted" else None
    got = _run(ChunkOps.build(shuffled, dtype=F64, backend="torch"), x, reduce, w, 38)
    want = _run(ChunkOps.build(shuffled, dtype=F64, backend="reference"), x, reduce, w, 38)
    for g, r in zip(got, want):
        if r is not None:
            torch.testing.assert_close(g, r, **TIGHT)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("reduce", REDUCES)
def test_constant_rows_get_no_gradient_and_change_nothing_else(make_random_graph, backend, reduce):
    """``with_constant_rows``: the same output; the rows held constant get gradient 0,
    the others (and the edge weights) the gradient of the full operators, bit for bit."""
    graph = make_random_graph(30, 120, seed=21)
    plans = build_chunk_plans(graph, torch.tensor([0, 11, 30]))
    checked = 0
    for plan in plans:
        ops = ChunkOps.build(plan, dtype=F64, backend=backend)
        gen = torch.Generator().manual_seed(plan.num_local)
        constant = torch.rand(plan.num_local, generator=gen) < 0.5
        constant[: plan.num_own] = False  # as a stage holds them: halo rows only
        x = _seeded((plan.num_local, 4), 7)
        w = _seeded((plan.num_edges,), 8).abs() if reduce == "weighted" else None
        y, gx, gw = _run(ops, x, reduce, w, grad_y_seed=9)
        held = ops.with_constant_rows(constant)
        y2, gx2, gw2 = _run(held, x, reduce, w, grad_y_seed=9)
        assert torch.equal(y2, y)
        assert torch.equal(gx2[~constant], gx[~constant])
        assert bool((gx2[constant] == 0).all())
        if w is not None:
            assert torch.equal(gw2, gw)
        checked += int(bool(constant.any()) and bool(gx[constant].abs().sum() > 0))
    assert checked  # some constant row had a gradient to leave out


def test_constant_rows_of_the_wrong_shape_or_type_are_refused(make_random_graph):
    plan = build_chunk_plans(make_random_graph(30, 120, seed=22), torch.tensor([0, 11, 30]))[0]
    ops = ChunkOps.build(plan, dtype=F64)
    with pytest.raises(DataError, match=rf"constant: expected shape \[{plan.num_local}\]"):
        ops.with_constant_rows(torch.zeros(plan.num_local + 1, dtype=torch.bool))
    with pytest.raises(DataError, match="constant: expected dtype torch.bool, found torch.int64"):
        ops.with_constant_rows(torch.zeros(plan.num_local, dtype=torch.int64))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("reduce", REDUCES)
def test_constant_chunks_are_the_constant_rows_of_their_halo_runs(make_random_graph, backend, reduce):
    """``with_constant_chunks``: the same operators as ``with_constant_rows`` of the
    halo rows of those chunks (the torch backend cutting its transposes by entry runs),
    bit for bit, for every subset of the source chunks; none held: the ops themselves."""
    import itertools

    graph = make_random_graph(40, 200, seed=23)
    plans = build_chunk_plans(graph, torch.tensor([0, 9, 20, 31, 40]))
    checked = 0
    for plan in plans:
        ops = ChunkOps.build(plan, dtype=F64, backend=backend)
        sources = [j for j, _, _ in plan.halo_blocks]
        assert ops.with_constant_chunks(()) is ops and ops.with_constant_chunks({plan.chunk_idx}) is ops
        x = _seeded((plan.num_local, 4), 10)
        w = _seeded((plan.num_edges,), 11).abs() if reduce == "weighted" else None
        for n in range(1, len(sources) + 1):
            for held_chunks in itertools.combinations(sources, n):
                constant = torch.cat([torch.zeros(plan.num_own, dtype=torch.bool),
                                      torch.isin(plan.halo_chunk, torch.tensor(held_chunks))])
                by_chunks = ops.with_constant_chunks(set(held_chunks))
                assert torch.equal(by_chunks.constant, constant)
                got = _run(by_chunks, x, reduce, w, grad_y_seed=12)
                want = _run(ops.with_constant_rows(constant), x, reduce, w, grad_y_seed=12)
                for g, r in zip(got, want):
                    assert (g is None) == (r is None) and (g is None or torch.equal(g, r))
                checked += 1
    assert checked > len(plans)


def test_kept_entry_runs_are_the_entries_between_the_constant_rows():
    from gnnpipe.kernels.csr import kept_entry_runs

    t_crow = [0, 2, 2, 5, 9, 12, 12, 15]  # 7 rows, 15 entries
    at = dict(enumerate(t_crow))
    assert kept_entry_runs(at, (), 15) == ((0, 15),)
    assert kept_entry_runs(at, ((2, 4),), 15) == ((0, 2), (9, 15))
    assert kept_entry_runs(at, ((0, 1), (3, 5)), 15) == ((2, 5), (12, 15))
    assert kept_entry_runs(at, ((5, 7),), 15) == ((0, 12),)  # row 5 is empty: nothing in between
    assert kept_entry_runs(at, ((0, 7),), 15) == ()
