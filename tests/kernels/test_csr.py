"""The CSR structures' index type: int32 where it fits (what MKL's products take
without a conversion per call), int64 beyond, and the same products either way."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.kernels import ChunkOps
from gnnpipe.kernels.csr import csr_index_dtype, edge_dot, make_csr
from gnnpipe.partition import build_chunk_plans, whole_graph_plan

F64 = torch.float64


def test_index_dtype_is_int32_up_to_its_largest_value_and_int64_past_it():
    big = 2**31 - 1
    assert csr_index_dtype(10, 10, 10) == torch.int32
    assert csr_index_dtype(big, big, big) == torch.int32
    for sizes in [(big + 1, 10, 10), (10, big + 1, 10), (10, 10, big + 1)]:
        assert csr_index_dtype(*sizes) == torch.int64


def _int64_copy(a: torch.Tensor) -> torch.Tensor:
    return make_csr(a.crow_indices().long(), a.col_indices().long(), a.values(), tuple(a.shape))


@pytest.mark.parametrize("reduce", ["sum", "mean", "gcn"])
def test_built_operators_hold_int32_indices_and_multiply_as_int64_ones_do(make_random_graph, reduce):
    graph = make_random_graph(30, 120, seed=31)
    for plan in [whole_graph_plan(graph), *build_chunk_plans(graph, torch.tensor([0, 11, 30]))]:
        op = ChunkOps.build(plan, dtype=F64, reduces=[reduce])._impl._ops[reduce]
        s = op.structure
        assert {s.crow.dtype, s.col.dtype, s.t_crow.dtype, s.t_col.dtype} == {torch.int32}
        assert s.row.dtype == s.perm.dtype == torch.int64  # index arguments of torch ops, not of MKL
        for a in (op.forward_csr, op.transpose_csr):
            assert a.crow_indices().dtype == a.col_indices().dtype == torch.int32
            x = torch.randn(a.shape[1], 5, dtype=F64, generator=torch.Generator().manual_seed(3))
            assert torch.equal(a @ x, _int64_copy(a) @ x)


def test_edge_dot_reads_int32_structures(make_random_graph):
    plan = whole_graph_plan(make_random_graph(20, 70, seed=32))
    s = ChunkOps.build(plan, dtype=F64, reduces=["weighted"])._impl._base()
    assert s.col.dtype == torch.int32
    gen = torch.Generator().manual_seed(4)
    grad_y = torch.randn(s.num_rows, 6, dtype=F64, generator=gen)
    x = torch.randn(s.num_cols, 6, dtype=F64, generator=gen)
    rows, cols = s.row, s.col.long()
    assert torch.allclose(edge_dot(grad_y, x, s), (grad_y[rows] * x[cols]).sum(1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_spmm_equals_the_product_whatever_its_new_output_held(make_random_graph, monkeypatch, dtype):
    """``spmm`` does not zero its output: every row must be written by the product,
    rows without entries (vertices without in-edges, columns no row reads) too."""
    from gnnpipe.kernels.csr import spmm

    graph = make_random_graph(30, 120, seed=33)
    plans = [whole_graph_plan(graph), *build_chunk_plans(graph, torch.tensor([0, 11, 30]))]
    ops = [ChunkOps.build(p, dtype=dtype, reduces=["sum", "gcn"])._impl._ops[r] for p in plans for r in ("sum", "gcn")]
    mats = [a for op in ops for a in (op.forward_csr, op.transpose_csr)]
    assert any(bool((a.crow_indices().diff() == 0).any()) for a in mats)  # the empty-row case is here
    gen = torch.Generator().manual_seed(5)
    inputs = [torch.randn(a.shape[1], 7, generator=gen).to(dtype) for a in mats]
    wants = [a @ x for a, x in zip(mats, inputs)]
    # What the allocator hands spmm is whatever it held: NaN here, every time.
    monkeypatch.setattr(torch.Tensor, "new_empty",
                        lambda self, size, **kw: torch.full(size, float("nan"), dtype=self.dtype))
    for a, x, want in zip(mats, inputs, wants):
        got = spmm(a, x)
        assert torch.equal(got, want)


def _constant_masks(num_cols: int, seed: int) -> list[torch.Tensor]:
    """None, some and all columns constant."""
    some = torch.rand(num_cols, generator=torch.Generator().manual_seed(seed)) < 0.5
    return [torch.zeros(num_cols, dtype=torch.bool), some, torch.ones(num_cols, dtype=torch.bool)]


@pytest.mark.parametrize("reduce", ["sum", "mean", "gcn"])
def test_transpose_without_constant_columns_computes_the_other_rows_bit_for_bit(make_random_graph, monkeypatch,
                                                                                 reduce):
    """The forward is untouched; the transposed product gives the rows not constant
    exactly as the full transpose does and 0 for the constant ones, whatever its new
    output held (``spmm`` writes every row)."""
    from gnnpipe.kernels.csr import fixed_operator, operator_without_transposed_rows, spmm, without_transposed_rows

    graph = make_random_graph(30, 120, seed=34)
    gen = torch.Generator().manual_seed(6)
    cases = []
    for plan in [whole_graph_plan(graph), *build_chunk_plans(graph, torch.tensor([0, 11, 30]))]:
        full = ChunkOps.build(plan, dtype=F64, reduces=[reduce])._impl._ops[reduce]
        for constant in _constant_masks(plan.num_local, seed=plan.num_local):
            g = torch.randn(plan.num_own, 5, dtype=F64, generator=gen)
            x = torch.randn(plan.num_local, 5, dtype=F64, generator=gen)
            # From the structure (as the weighted reduce builds it) and from the operator.
            for op in (fixed_operator(without_transposed_rows(full.structure, constant), full.forward_csr.values()),
                       operator_without_transposed_rows(full, constant)):
                cases.append((full, op, constant, g, x))
    assert any(bool(c[2].any()) and not bool(c[2].all()) for c in cases)
    monkeypatch.setattr(torch.Tensor, "new_empty",
                        lambda self, size, **kw: torch.full(size, float("nan"), dtype=self.dtype))
    for full, op, constant, g, x in cases:
        assert torch.equal(spmm(op.forward_csr, x), spmm(full.forward_csr, x))
        got, want = spmm(op.transpose_csr, g), spmm(full.transpose_csr, g)
        assert torch.equal(got[~constant], want[~constant])
        assert bool((got[constant] == 0).all())
        assert op.transpose_csr._nnz() == int(full.structure.t_crow.diff()[~constant].sum())


def test_held_transpose_is_built_at_the_first_backward_and_shared_by_later_ones(make_random_graph, monkeypatch):
    """A stage runs a chunk's forwards long before their backwards: the transpose
    without the constant columns is built when a backward first needs it, once."""
    import gnnpipe.kernels.csr as csr

    plan = build_chunk_plans(make_random_graph(30, 120, seed=35), torch.tensor([0, 11, 30]))[0]
    full = ChunkOps.build(plan, dtype=F64, reduces=["gcn"])._impl._ops["gcn"]
    constant = torch.zeros(plan.num_local, dtype=torch.bool)
    constant[plan.num_own:] = True
    builds = []
    kept_entries = csr._kept_entries
    monkeypatch.setattr(csr, "_kept_entries", lambda *a: builds.append(1) or kept_entries(*a))
    held = csr.operator_without_transposed_rows(full, constant)
    x = torch.randn(plan.num_local, 4, dtype=F64, requires_grad=True)
    outs = [csr.csr_mm(held, x) for _ in range(2)]  # two layers' forwards
    assert builds == []
    for out in outs:
        out.sum().backward()
    assert builds == [1]
    assert bool((x.grad[plan.num_own:] == 0).all()) and bool(x.grad[:plan.num_own].abs().sum() > 0)
