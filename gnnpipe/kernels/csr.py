"""CSR operators for the native torch backend, and their autograd functions.

A chunk's aggregation is ``y = A x`` with ``A`` the sparse [num_own, num_local]
matrix of its local CSR, whose values carry the weighting (1 for ``sum``, ``1/d_v``
for ``mean``, the symmetric normalisation plus the self-loop for ``gcn``). The
backward of ``y = A x`` w.r.t. ``x`` is ``A^T grad_y``, a second CSR product. Both
``A`` and ``A^T`` are built once per (plan, weighting) by :func:`build_structure` and
:func:`fixed_operator`; the autograd functions here only multiply.

Duplicate edges are merged ("coalesced") at build time: the structure has one entry
per distinct (dst, src) pair and ``slot[e]`` maps a plan edge to its entry. Fixed
weightings sum the values of merged edges; ``weighted`` sums the edge weights of
merged edges with a differentiable ``index_add`` before the product.

Everything here is device-agnostic: ``torch.sparse_csr_tensor`` products run on CPU
(MKL or native) and CUDA (cuSPARSE).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["CsrStructure", "CsrOperator", "build_structure", "fixed_operator", "csr_mm", "csr_weighted_mm",
           "csr_index_dtype", "spmm", "without_transposed_rows", "operator_without_transposed_rows",
           "HeldTransposeOperator", "kept_entry_runs"]

def csr_index_dtype(num_rows: int, num_cols: int, nnz: int) -> torch.dtype:
    """int32 where every row pointer and column index fits in it, else int64.

    MKL's sparse products (torch's CPU CSR @ dense) take 32-bit indices: given int64
    ones, torch converts both index arrays to int32 at every product (two copies per
    call in torch's profiler, ad hoc), an [nnz] and an [rows + 1] copy; cuSPARSE takes
    either.
    A structure multiplied thousands of times keeps them int32 from the start, and
    half the bytes. The copies are small next to the product: in
    bench/results/csr_products_index_types.json int32 alone is within the machine's spread.
    """
    return torch.int32 if max(num_rows, num_cols, nnz) <= torch.iinfo(torch.int32).max else torch.int64


def make_csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """A sparse CSR tensor without invariant checks (the structure is built here and
    is valid by construction) and without the "beta" warning on every construction.

    Shapes: crow [rows + 1]; col [nnz]; values [nnz] -> sparse [rows, cols].
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        warnings.filterwarnings("ignore", message=".*[Ss]parse invariant checks.*")
        return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)


@dataclass(frozen=True, eq=False)
class CsrStructure:
    """The coalesced sparsity pattern of a chunk (or of a chunk plus self-loops) and
    of its transpose, on the target device.

    ``perm`` maps a transposed entry to its entry in the forward CSR, so the values
    of ``A^T`` are ``values[perm]``.

    Shapes: crow [num_rows + 1]; col [nnz] (local_nid); row [nnz] (own local_nid of
    every entry); t_crow [num_cols + 1]; t_col [nnz] (own local_nid); perm [nnz].
    ``crow``, ``col``, ``t_crow`` and ``t_col`` (what the products read) are of
    :func:`csr_index_dtype`; ``row``, ``perm``, ``slot`` and ``gather`` int64.
    When the plan's edges are distinct but not in CSR order, ``gather`` [nnz] lists
    the plan edge of every entry; when duplicates were merged, ``slot``
    [num_plan_edges] is the entry of every plan edge. Both are None when the plan's
    edges already are the structure's entries in order.
    """

    num_rows: int
    num_cols: int
    crow: torch.Tensor
    col: torch.Tensor
    row: torch.Tensor
    t_crow: torch.Tensor
    t_col: torch.Tensor
    perm: torch.Tensor
    slot: torch.Tensor | None
    gather: torch.Tensor | None

    @property
    def nnz(self) -> int:
        return int(self.col.numel())

    @property
    def empty(self) -> bool:
        return self.nnz == 0 or self.num_rows == 0 or self.num_cols == 0


@dataclass(frozen=True, eq=False)
class CsrOperator:
    """A fixed-valued operator ``A`` [num_own, num_local] and its transpose."""

    structure: CsrStructure
    forward_csr: torch.Tensor | None
    transpose_csr: torch.Tensor | None


def build_structure(
    dst: torch.Tensor, src: torch.Tensor, values: torch.Tensor, num_rows: int, num_cols: int,
    device: torch.device, dtype: torch.dtype,
) -> tuple[CsrStructure, torch.Tensor]:
    """Coalesce the edges ``src -> dst`` (summing ``values`` of duplicates) into a CSR
    and its transpose; return the structure and the merged values (on ``device``).

    Built on the CPU (once per plan), then moved.

    Shapes: dst, src int64 [E]; values float [E] -> merged values [nnz <= E].
    """
    key = dst * num_cols + src
    if key.numel() < 2 or bool((key[1:] >= key[:-1]).all()):
        # Plans list each row's local ids in ascending order: no sort is needed (the
        # common case, about 10x cheaper than torch.unique at 2M edges).
        uniq, inverse = torch.unique_consecutive(key, return_inverse=True)
    else:
        uniq, inverse = torch.unique(key, sorted=True, return_inverse=True)
    nnz = int(uniq.numel())
    merged = torch.zeros(nnz, dtype=torch.float64).index_add_(0, inverse, values.to(torch.float64))
    row = torch.div(uniq, num_cols, rounding_mode="floor") if num_cols else uniq
    col = uniq - row * num_cols
    crow = torch.zeros(num_rows + 1, dtype=torch.int64)
    crow[1:] = torch.cumsum(torch.bincount(row, minlength=num_rows), 0)
    # The transpose orders the entries by (col, row); a stable sort of col keeps rows
    # ascending inside each column because the forward order is (row, col).
    # int32 keys sort about 3x faster than int64 on CPU (fewer radix passes).
    sort_key = col.to(torch.int32) if num_cols < 2**31 else col
    perm = torch.sort(sort_key, stable=True).indices
    t_crow = torch.zeros(num_cols + 1, dtype=torch.int64)
    t_crow[1:] = torch.cumsum(torch.bincount(col, minlength=num_cols), 0)
    t_col = row[perm]
    has_duplicates = nnz != int(key.numel())
    in_order = not has_duplicates and bool(torch.equal(inverse, torch.arange(nnz)))
    gather = None
    if not has_duplicates and not in_order:
        gather = torch.empty_like(inverse)
        gather[inverse] = torch.arange(nnz)
    to = dict(device=device)
    index = dict(device=device, dtype=csr_index_dtype(num_rows, num_cols, nnz))
    structure = CsrStructure(
        num_rows=num_rows, num_cols=num_cols,
        crow=crow.to(**index), col=col.to(**index), row=row.to(**to),
        t_crow=t_crow.to(**index), t_col=t_col.to(**index), perm=perm.to(**to),
        slot=inverse.to(**to) if has_duplicates else None,
        gather=gather.to(**to) if gather is not None else None,
    )
    return structure, merged.to(device=device, dtype=dtype)


def fixed_operator(structure: CsrStructure, values: torch.Tensor) -> CsrOperator:
    """``A`` with the given (merged) values and ``A^T`` with the same values permuted.

    Shapes: values [nnz].
    """
    if structure.empty:
        return CsrOperator(structure, None, None)
    s = structure
    forward_csr = make_csr(s.crow, s.col, values, (s.num_rows, s.num_cols))
    transpose_csr = make_csr(s.t_crow, s.t_col, values[s.perm].contiguous(), (s.num_cols, s.num_rows))
    return CsrOperator(structure, forward_csr, transpose_csr)


def _kept_entries(t_crow: torch.Tensor, constant: torch.Tensor, nnz: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(entry_kept, kept_t_crow)``: which entries of a transpose with row pointers
    ``t_crow`` lie in rows not ``constant``, and the row pointers of those alone.

    Shapes: t_crow [num_cols + 1]; constant bool [num_cols] -> bool [nnz], [num_cols + 1]."""
    per_row = t_crow[1:] - t_crow[:-1]
    kept = ~constant.to(t_crow.device)
    entry_kept = kept.repeat_interleave(per_row.to(torch.int64), output_size=nnz)
    return entry_kept, _kept_t_crow(t_crow, kept)


def _kept_t_crow(t_crow: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """The row pointers of a transpose's entries in the rows ``kept`` alone (the other
    rows left empty).

    Shapes: t_crow [num_cols + 1]; kept bool [num_cols] -> [num_cols + 1]."""
    per_row = t_crow[1:] - t_crow[:-1]
    kept_t_crow = torch.zeros_like(t_crow)
    kept_t_crow[1:] = torch.cumsum(per_row * kept.to(per_row.dtype), 0)
    return kept_t_crow


def kept_entry_runs(t_crow_at: dict[int, int], constant_runs: tuple[tuple[int, int], ...],
                    nnz: int) -> tuple[tuple[int, int], ...]:
    """The entries of a transpose kept when its rows in ``constant_runs`` are left out,
    as runs ``(start, stop)`` of entry ids: rows ``a .. b`` of a CSR hold the entries
    ``t_crow[a] .. t_crow[b]``, so a run of rows is a run of entries, and what lies
    between the constant runs is kept. Host integers only: ``t_crow_at`` holds the row
    pointers at the runs' ends (read from the device once, when the operator was
    built), so cutting the transpose needs no device read.

    ``constant_runs``: ascending, disjoint ``(a, b)`` row ranges."""
    runs, start = [], 0
    for a, b in constant_runs:
        lo, hi = t_crow_at[a], t_crow_at[b]
        if lo > start:
            runs.append((start, lo))
        start = hi
    if nnz > start:
        runs.append((start, nnz))
    return tuple(runs)


def _take_runs(t: torch.Tensor, runs: tuple[tuple[int, int], ...]) -> torch.Tensor:
    """The entries of ``t`` in the ``runs``: a view for one run, else one copy.

    Shapes: t [nnz] -> [sum of the runs' lengths]."""
    if len(runs) == 1:
        a, b = runs[0]
        return t[a:b]
    return torch.cat([t[a:b] for a, b in runs]) if runs else t[:0]


def without_transposed_rows(structure: CsrStructure, constant: torch.Tensor,
                            runs: tuple[tuple[int, int], ...] | None = None) -> CsrStructure:
    """``structure`` with the entries of the columns ``constant`` left out of its
    transpose: the forward ``A x`` is unchanged, and ``A^T g`` computes only the rows
    of ``x`` that are not constant (the others come out 0, and cost nothing).

    A pipeline stage's chunk reads some halo rows stale: constants whose gradient it
    throws away. Under a random chunk order about half of a chunk's halo rows are, and
    on a dense graph most of a chunk's entries lie in halo columns, so the transposed
    product otherwise spends much of its work on gradients that are dropped. The
    forward entries and the products of the rows kept are the same, in the same order:
    their gradients are the same bit for bit. O(nnz), once per chunk and epoch.
    Measured (bench/results/csr_products.json, a gcn layer's forward and transposed
    products over C = 8 chunks, one thread, seeded random order): 0.944 of the full
    chunks' time on BlogCatalog (73 % of the transposed entries kept), 0.970 on Amazon
    Photo (92 %), 0.838 on the 200k-vertex systems graph (82 %); the transposed
    product still writes every local row.

    ``runs``: the kept entries of the transpose as runs (:func:`kept_entry_runs`),
    when the caller has them; they are cut without a device read. Without them the
    kept entries are found with a mask (on a GPU a host-device synchronisation, to
    size the result).

    Shapes: constant bool [num_cols]; the result's t_col and perm [nnz of the
    columns not constant], its t_crow [num_cols + 1].
    """
    s = structure
    if runs is not None:
        t_crow, t_col, perm = _kept_t_crow(s.t_crow, ~constant), _take_runs(s.t_col, runs), _take_runs(s.perm, runs)
    else:
        entry_kept, t_crow = _kept_entries(s.t_crow, constant, s.nnz)
        t_col, perm = s.t_col[entry_kept], s.perm[entry_kept]
    return CsrStructure(num_rows=s.num_rows, num_cols=s.num_cols, crow=s.crow, col=s.col, row=s.row,
                        t_crow=t_crow, t_col=t_col, perm=perm, slot=s.slot, gather=s.gather)


class HeldTransposeOperator:
    """A fixed operator whose transpose leaves out the columns ``constant``
    (:func:`operator_without_transposed_rows`), built at its first use.

    A stage's chunk runs every layer's forward long before their backwards; built in
    the forward, each chunk's transpose would be held through the end of the forward
    phase, where a stage's memory peaks. Built when the first backward asks for it, it
    is held only from the chunk's first backward to its last (every layer of the chunk
    shares it). ``structure`` and ``forward_csr`` are the base operator's.

    ``runs``: the kept entries as runs (:func:`without_transposed_rows`), or None.

    Shapes: constant bool [num_cols]."""

    def __init__(self, op: CsrOperator, constant: torch.Tensor,
                 runs: tuple[tuple[int, int], ...] | None = None) -> None:
        self.structure = op.structure
        self.forward_csr = op.forward_csr
        self._op: CsrOperator | None = op
        self._constant = constant
        self._runs = runs
        self._transpose: torch.Tensor | None = None

    @property
    def transpose_csr(self) -> torch.Tensor | None:
        if self._op is not None:
            op, self._op = self._op, None
            if op.transpose_csr is not None:
                t = op.transpose_csr
                if self._runs is not None:
                    t_crow = _kept_t_crow(op.structure.t_crow, ~self._constant)
                    col, values = _take_runs(t.col_indices(), self._runs), _take_runs(t.values(), self._runs)
                else:
                    entry_kept, t_crow = _kept_entries(op.structure.t_crow, self._constant, op.structure.nnz)
                    col, values = t.col_indices()[entry_kept], t.values()[entry_kept]
                self._transpose = make_csr(t_crow, col, values, tuple(t.shape))
        return self._transpose


def operator_without_transposed_rows(op: CsrOperator, constant: torch.Tensor,
                                     runs: tuple[tuple[int, int], ...] | None = None) -> HeldTransposeOperator:
    """``op`` with the columns ``constant`` left out of its transpose
    (:func:`without_transposed_rows`; ``runs`` as there), sharing its structure and
    forward CSR: what it adds is the kept entries' column indices and values and the
    row pointers, built at the transpose's first use (:class:`HeldTransposeOperator`).

    Shapes: constant bool [num_cols]."""
    return HeldTransposeOperator(op, constant, runs)


def _zeros_out(structure: CsrStructure, x: torch.Tensor) -> torch.Tensor:
    return x.new_zeros((structure.num_rows, x.shape[1]))


def spmm(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``a @ x`` for a sparse CSR ``a`` and a dense ``x``, written into a new tensor
    that is not zeroed first.

    ``a @ x`` zero-fills its output before the product adds into it; ``addmm`` with
    ``beta = 0`` ignores what the output holds (NaN included), so the fill is one pass
    over [rows, d] saved per product, the same values bit for bit. Measured
    (bench/results/csr_products_index_types.json, one thread, a layer's forward and transposed
    products, medians, 200k-vertex systems graph): against ``a @ x`` with the same
    int32 indices 606 -> 519 ms over the whole graph and 375 -> 321 ms over its C = 8
    chunks; against ``a @ x`` with int64 indices 666 -> 519 and 355 -> 321 ms; within
    the machine's spread on the 5k-8k-vertex dense graphs. Whole 200k epochs before
    and after did not differ beyond their spread (bench/results/kernel_ab_200k/).

    Shapes: a [rows, cols]; x [cols, d] -> [rows, d].
    """
    return torch.addmm(x.new_empty((a.shape[0], x.shape[1])), a, x, beta=0.0)


class _CsrMM(torch.autograd.Function):
    """``y = A x`` with ``A`` fixed; backward ``grad_x = A^T grad_y`` (built once)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, op: CsrOperator | HeldTransposeOperator) -> torch.Tensor:  # type: ignore[override]
        ctx.op = op
        if op.forward_csr is None:
            return _zeros_out(op.structure, x)
        return spmm(op.forward_csr, x)

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor | None, None]:  # type: ignore[override]
        op: CsrOperator | HeldTransposeOperator = ctx.op
        if not ctx.needs_input_grad[0]:
            return None, None
        if op.transpose_csr is None:
            return grad_y.new_zeros((op.structure.num_cols, grad_y.shape[1])), None
        return spmm(op.transpose_csr, grad_y.contiguous()), None


def csr_mm(op: CsrOperator | HeldTransposeOperator, x: torch.Tensor) -> torch.Tensor:
    """Differentiable ``A x`` for a fixed operator.

    Shapes: x [num_local, d] -> [num_own, d].
    """
    return _CsrMM.apply(x.contiguous(), op)


def edge_dot(grad_y: torch.Tensor, x: torch.Tensor, structure: CsrStructure) -> torch.Tensor:
    """``out[k] = <grad_y[row k], x[col k]>`` for every entry ``k`` of the structure.

    A sampled dense-dense product (SDDMM, ``torch.sparse.sampled_addmm``: MKL on CPU,
    cuSPARSE on CUDA) that never materialises the [nnz, d] gathered rows; measured
    about 12x faster than gather-multiply-sum on CPU at 2M edges, d = 64.

    Shapes: grad_y [num_rows, d]; x [num_cols, d] -> [nnz].
    """
    s = structure
    pattern = make_csr(s.crow, s.col, x.new_zeros(s.nnz), (s.num_rows, s.num_cols))
    return torch.sparse.sampled_addmm(pattern, grad_y, x.t(), beta=0.0).values()


class _CsrWeightedMM(torch.autograd.Function):
    """``y = A(w) x`` with per-entry values ``w`` (merged edge weights).

    Backward: ``grad_x = A(w)^T grad_y`` (the transposed structure is fixed; only its
    values ``w[perm]`` are gathered per call) and ``grad_w[k] = <grad_y[row k], x[col k]>``.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, values: torch.Tensor, structure: CsrStructure) -> torch.Tensor:  # type: ignore[override]
        ctx.structure = structure
        ctx.save_for_backward(x, values)
        if structure.empty:
            return _zeros_out(structure, x)
        s = structure
        return spmm(make_csr(s.crow, s.col, values, (s.num_rows, s.num_cols)), x)

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:  # type: ignore[override]
        s: CsrStructure = ctx.structure
        x, values = ctx.saved_tensors
        grad_y = grad_y.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            if s.empty:
                grad_x = torch.zeros_like(x)
            else:
                t = make_csr(s.t_crow, s.t_col, values[s.perm].contiguous(), (s.num_cols, s.num_rows))
                grad_x = spmm(t, grad_y)
        if ctx.needs_input_grad[1]:
            grad_w = edge_dot(grad_y, x, s) if not s.empty else torch.zeros_like(values)
        return grad_x, grad_w, None


def csr_weighted_mm(structure: CsrStructure, edge_weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Differentiable ``A(w) x`` where ``edge_weight`` is given per *plan* edge; merged
    duplicates add their weights (differentiably) before the product.

    Shapes: edge_weight [num_plan_edges]; x [num_local, d] -> [num_own, d].
    """
    if structure.slot is not None:
        values = edge_weight.new_zeros(structure.nnz).index_add(0, structure.slot, edge_weight)
    elif structure.gather is not None:
        # A gather (not an index_add) when no edges merge: deterministic on every device.
        values = edge_weight[structure.gather]
    else:
        values = edge_weight
    return _CsrWeightedMM.apply(x.contiguous(), values.contiguous(), structure)
