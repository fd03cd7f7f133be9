"""Native torch backend (the default): CSR sparse-dense products and scatter max.

``sum``, ``mean``, ``gcn`` and ``weighted`` are one ``torch.sparse_csr_tensor``
product each, with the weighting folded into the CSR values at build time (``gcn``
also folds its self-loop into the structure). Their backward is the product with the
transposed CSR, also built at build time (see :mod:`gnnpipe.kernels.csr`).

``max`` gathers the source rows and reduces them with ``scatter_reduce(amax,
include_self=False)`` into zeros, so that rows without in-edges give 0. Its backward
sends ``grad_y[v, j]`` to the sources ``u`` whose ``x[u, j]`` equals the maximum;
**ties split the gradient evenly** among the tied edges (as torch's own ``amax``
backward does), so a duplicated edge counts once per copy.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnpipe.kernels.csr import (CsrOperator, CsrStructure, HeldTransposeOperator, build_structure, csr_mm,
                                 csr_weighted_mm, fixed_operator, kept_entry_runs,
                                 operator_without_transposed_rows, without_transposed_rows)
from gnnpipe.kernels.constant import hold_constant
from gnnpipe.partition.plan import ChunkPlan

__all__ = ["TorchBackend", "ConstantRows", "scatter_max"]


class _ScatterMax(torch.autograd.Function):
    """``y[v] = max_{u -> v} x[u]`` (elementwise; 0 for rows without in-edges).

    Saves only ``x`` and ``y``; the arg-max mask is recomputed in backward rather than
    kept, as it would be [nnz, d].
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dst: torch.Tensor, src: torch.Tensor, num_rows: int) -> torch.Tensor:  # type: ignore[override]
        d = x.shape[1]
        out = x.new_zeros((num_rows, d))
        if src.numel():
            # expand() is a stride-0 view: no [nnz, d] index is materialised.
            out.scatter_reduce_(0, dst.view(-1, 1).expand(-1, d), x[src], "amax", include_self=False)
        ctx.save_for_backward(x, out, dst, src)
        return out

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:  # type: ignore[override]
        x, out, dst, src = ctx.saved_tensors
        grad_x = torch.zeros_like(x)
        if not ctx.needs_input_grad[0] or src.numel() == 0:
            return grad_x, None, None, None
        at_max = x[src] == out[dst]  # [nnz, d]: where this edge attains the max
        ties = out.new_zeros(out.shape).index_add_(0, dst, at_max.to(x.dtype))
        share = grad_y / ties.clamp_min(1)
        # index_add_ is deterministic on CPU, and on CUDA under
        # torch.use_deterministic_algorithms(True).
        grad_x.index_add_(0, src, share[dst].masked_fill_(~at_max, 0))
        return grad_x, None, None, None


def scatter_max(x: torch.Tensor, dst: torch.Tensor, src: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Differentiable elementwise max over in-edges (ties split evenly).

    Shapes: x [num_local, d]; dst, src int64 [nnz] -> [num_rows, d].
    """
    return _ScatterMax.apply(x, dst, src, num_rows)


def _with_self_loops(dst: torch.Tensor, src: torch.Tensor, num_own: int, num_local: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The edges plus one self-loop ``v -> v`` per own row, in (dst, src) order when
    the edges are (a merge of two sorted lists by searchsorted, cheaper than a sort).

    Shapes: dst, src int64 [E] -> int64 [E + num_own] each.
    """
    own = torch.arange(num_own, dtype=torch.int64)
    edge_key = dst * num_local + src
    if edge_key.numel() > 1 and not bool((edge_key[1:] >= edge_key[:-1]).all()):
        return torch.cat([dst, own]), torch.cat([src, own])  # unsorted: build_structure sorts
    loop_key = own * num_local + own
    # Final position of every item in the merged order; an edge that is itself a self-loop
    # goes before the added one (they merge anyway).
    edge_pos = torch.arange(edge_key.numel()) + torch.searchsorted(loop_key, edge_key, side="left")
    loop_pos = own + torch.searchsorted(edge_key, loop_key, side="right")
    out_dst = torch.empty(edge_key.numel() + num_own, dtype=torch.int64)
    out_src = torch.empty_like(out_dst)
    out_dst[edge_pos], out_src[edge_pos] = dst, src
    out_dst[loop_pos], out_src[loop_pos] = own, own
    return out_dst, out_src


class TorchBackend:
    """Operators of one chunk for the native torch backend, built once per reduce.

    ``reduces``: the reduces to build now (:meth:`ChunkOps.build` passes every one
    unless told). A reduce not built yet is built at its first :meth:`aggregate` and
    kept. Each model here reads one of the five (GCN and GCNII ``gcn``, GraphSAGE and
    ResGCN+ ``mean``; MLP none), and each operator holds its CSR and transpose ([nnz]
    indices and values each), so building only that one keeps 52-54 of the 130 bytes
    an edge the five took (the tensors' bytes over the edges of a 20,000-vertex
    synthetic graph's whole-graph plan, float32, measured ad hoc): a pipeline stage
    holds the operators of all its C chunks, every edge of the graph.

    Shapes: every CSR is [num_own, num_local]; its transpose [num_local, num_own].
    """

    name = "torch"

    def __init__(self, plan: ChunkPlan, device: torch.device, dtype: torch.dtype,
                 reduces: tuple[str, ...] = ()) -> None:
        self.plan = plan
        self.device = device
        self.dtype = dtype
        self.num_own = plan.num_own
        self._structure: CsrStructure | None = None
        self._counts: torch.Tensor | None = None
        self._ops: dict[str, CsrOperator] = {}
        self._edges: tuple[torch.Tensor, torch.Tensor] | None = None
        self._built: set[str] = set()
        self._t_crow_at: dict[CsrStructure, dict[int, int]] = {}
        for reduce in reduces:
            self._build(reduce)

    @property
    def built(self) -> frozenset[str]:
        """The reduces built so far (named at construction or used since)."""
        return frozenset(self._built)

    def _base(self) -> CsrStructure:
        """The coalesced structure of the chunk's edges (sum, mean, weighted share it)."""
        if self._structure is None:
            p = self.plan
            ones = torch.ones(p.indices.numel(), dtype=torch.float64)
            self._structure, self._counts = build_structure(p.dst_local(), p.indices, ones, p.num_own,
                                                            p.num_local, self.device, torch.float64)
            self._read_bounds(self._structure)
        return self._structure

    def _build(self, reduce: str) -> None:
        p, dtype = self.plan, self.dtype
        self._built.add(reduce)
        if reduce == "sum":
            self._ops["sum"] = fixed_operator(self._base(), self._counts.to(dtype))  # type: ignore[union-attr]
        elif reduce == "mean":
            structure = self._base()
            own_degree = p.in_degree.to(torch.float64)[:p.num_own].to(self.device)
            # Isolated rows have no entries, so clamping their degree only avoids 0/0.
            values = self._counts / own_degree.clamp_min(1)[structure.row]  # type: ignore[operator]
            self._ops["mean"] = fixed_operator(structure, values.to(dtype))
        elif reduce == "gcn":
            # D^-1/2 (A + I) D^-1/2 with D = in_degree + 1 (global degrees), the I as one
            # extra entry per own row; entries merge with existing self-loop edges.
            g_dst, g_src = _with_self_loops(p.dst_local(), p.indices, p.num_own, p.num_local)
            inv_sqrt = (p.in_degree.to(torch.float64) + 1).rsqrt()
            g_val = inv_sqrt[g_dst] * inv_sqrt[g_src]
            structure, values = build_structure(g_dst, g_src, g_val, p.num_own, p.num_local, self.device, dtype)
            self._read_bounds(structure)
            self._ops["gcn"] = fixed_operator(structure, values)
        elif reduce == "weighted":
            self._base()
        elif reduce == "max":
            self._edges = (p.dst_local().to(self.device), p.indices.to(self.device))
        else:
            raise AssertionError(f"unvalidated reduce {reduce!r}")

    def aggregate(self, x_local: torch.Tensor, reduce: str, edge_weight: torch.Tensor | None) -> torch.Tensor:
        if reduce not in self._built:
            self._build(reduce)
        if reduce == "weighted":
            assert edge_weight is not None
            return csr_weighted_mm(self._base(), edge_weight, x_local)
        if reduce == "max":
            dst, src = self._edges  # type: ignore[misc]
            return scatter_max(x_local, dst, src, self.num_own)
        return csr_mm(self._ops[reduce], x_local)

    def with_constant_rows(self, constant: torch.Tensor,
                           row_runs: tuple[tuple[int, int], ...] | None = None) -> "ConstantRows":
        """These operators with the rows ``constant`` of ``x_local`` held constant
        (:class:`ConstantRows`). ``row_runs``: the same rows as ascending ranges of
        local ids that begin and end at the plan's halo-block bounds
        (:attr:`~gnnpipe.partition.ChunkPlan.halo_blocks`), or None."""
        return ConstantRows(self, constant, row_runs)

    def _read_bounds(self, structure: CsrStructure) -> None:
        """Keep ``structure``'s transposed row pointers at the halo-block bounds on the
        host: read from the device here, where the structure is built, once."""
        bounds = sorted({self.num_own} | {stop for _, _, stop in self.plan.halo_blocks})
        index = torch.tensor(bounds, dtype=torch.int64, device=structure.t_crow.device)
        self._t_crow_at[structure] = dict(zip(bounds, structure.t_crow[index].tolist()))

    def entry_runs(self, structure: CsrStructure, row_runs: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
        """The entries of ``structure``'s transpose outside the rows ``row_runs``, as
        runs (:func:`~gnnpipe.kernels.csr.kept_entry_runs`), from its row pointers at
        the halo-block bounds that its build kept on the host."""
        return kept_entry_runs(self._t_crow_at[structure], row_runs, structure.nnz)


class ConstantRows:
    """A :class:`TorchBackend`'s operators whose backward leaves out the rows
    ``constant`` of ``x_local``: their gradient is 0 and is not computed.

    ``sum``, ``mean``, ``gcn`` and ``weighted`` use the base's operators with those
    columns left out of their transposes (:mod:`gnnpipe.kernels.csr`:
    ``operator_without_transposed_rows``, whose transpose is built at the first
    backward; ``weighted``: ``without_transposed_rows``, at its first forward); ``max``
    computes the full gradient and zeroes them.
    The forward is the base's, bit for bit, and so are the other rows' gradients.

    With ``row_runs`` (the same rows as ranges at the halo-block bounds) the
    transposes are cut by host integers, without a device read.

    Shapes: constant bool [num_local].
    """

    name = "torch"

    def __init__(self, base: TorchBackend, constant: torch.Tensor,
                 row_runs: tuple[tuple[int, int], ...] | None = None) -> None:
        self._base = base
        self._constant = constant
        self._row_runs = row_runs
        self._ops: dict[str, HeldTransposeOperator] = {}
        self._structure: CsrStructure | None = None

    def _entry_runs(self, structure: CsrStructure) -> tuple[tuple[int, int], ...] | None:
        return None if self._row_runs is None else self._base.entry_runs(structure, self._row_runs)

    def aggregate(self, x_local: torch.Tensor, reduce: str, edge_weight: torch.Tensor | None) -> torch.Tensor:
        base = self._base
        if reduce == "max":  # the base builds it at first use
            return base.aggregate(hold_constant(x_local, self._constant), reduce, None)
        if reduce == "weighted":
            assert edge_weight is not None
            if self._structure is None:
                structure = base._base()
                self._structure = without_transposed_rows(structure, self._constant, self._entry_runs(structure))
            return csr_weighted_mm(self._structure, edge_weight, x_local)
        op = self._ops.get(reduce)
        if op is None:
            if reduce not in base.built:
                base._build(reduce)
            full = base._ops[reduce]
            op = self._ops[reduce] = operator_without_transposed_rows(full, self._constant,
                                                                      self._entry_runs(full.structure))
        return csr_mm(op, x_local)
