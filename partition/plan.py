"""Chunk plans: what one chunk needs to aggregate its rows, as plain data.

A chunk is one part of a partition (DESIGN.md 2). After :func:`reorder` the rows of
chunk ``k`` are the contiguous range ``[row_start, row_end)`` of ``global_nid``. Its
*halo* is the set of sources of its in-edges that lie outside it. The chunk's local
id space (``local_nid``) is ``[own rows | halo rows]``:

* ``local_nid < num_own``: own row ``row_start + local_nid``;
* ``local_nid >= num_own``: halo row ``halo_global_nid[local_nid - num_own]``.

The local CSR maps each own row to its in-neighbours in that local space, so that a
layer computes its own rows from the stacked tensor ``cat([h_own, h_halo])`` with one
sparse-dense product. The whole graph is the one-chunk plan (no halo).

Plans are frozen and hold CPU tensors only; device-side operators (sparse matrices,
their transposes, normalisation weights) are built from them once by
:mod:`gnnpipe.kernels`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from gnnpipe.data.graph import Graph
from gnnpipe.errors import PartitionError

__all__ = ["ChunkPlan", "build_chunk_plans", "whole_graph_plan", "halo_send_lists", "plan_graph_edges"]


@dataclass(frozen=True, eq=False)
class ChunkPlan:
    """One chunk's rows, halo and local CSR.

    Shapes:
        halo_global_nid: int64 [H] (sorted ascending); halo_chunk: int64 [H];
        indptr: int64 [num_own + 1]; indices: int64 [nnz] (local_nid, sorted within
        each row);
        in_degree: int64 [num_own + H] (global in-degree of every local vertex, as
        the normalisations of DESIGN.md 3 need it).
    """

    chunk_idx: int
    num_chunks: int
    row_start: int
    row_end: int
    halo_global_nid: torch.Tensor
    halo_chunk: torch.Tensor
    indptr: torch.Tensor
    indices: torch.Tensor
    in_degree: torch.Tensor

    @property
    def num_own(self) -> int:
        return self.row_end - self.row_start

    @property
    def num_halo(self) -> int:
        return int(self.halo_global_nid.numel())

    @property
    def num_local(self) -> int:
        return self.num_own + self.num_halo

    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())

    @property
    def own_global_nid(self) -> torch.Tensor:
        """int64 [num_own]."""
        return torch.arange(self.row_start, self.row_end, dtype=torch.int64)

    @property
    def local_global_nid(self) -> torch.Tensor:
        """int64 [num_local]: global_nid of every local_nid."""
        return torch.cat([self.own_global_nid, self.halo_global_nid])

    @functools.cached_property
    def halo_blocks(self) -> tuple[tuple[int, int, int], ...]:
        """``(chunk_idx, local_start, local_stop)`` per chunk that owns halo rows of this
        one, in local-id order (computed at the first use, then kept: the kernels and
        the stage read it): the halo is sorted by global id and every chunk's rows are
        contiguous in it, so the halo rows of one source chunk are one run of local ids.
        A pipeline stage holds a source chunk's rows constant as a whole (stale reads),
        so it names them by these runs, host integers, without reading the device.

        Raises :class:`PartitionError` if the halo is not grouped by chunk (a plan not
        built by :func:`build_chunk_plans`)."""
        chunks, counts = torch.unique_consecutive(self.halo_chunk.cpu(), return_counts=True)
        if chunks.numel() > 1 and not bool((chunks[1:] > chunks[:-1]).all()):
            raise PartitionError(f"chunk {self.chunk_idx}: expected its halo grouped by source chunk in "
                                 f"ascending order, found the chunks {chunks.tolist()}")
        stops = (torch.cumsum(counts, 0) + self.num_own).tolist()
        starts = [self.num_own] + stops[:-1]
        return tuple(zip(chunks.tolist(), starts, stops))

    def dst_local(self) -> torch.Tensor:
        """int64 [nnz]: the own-row local_nid (destination) of every local edge."""
        return torch.repeat_interleave(
            torch.arange(self.num_own, dtype=torch.int64), self.indptr[1:] - self.indptr[:-1]
        )

    def __repr__(self) -> str:
        return (
            f"ChunkPlan(chunk {self.chunk_idx}/{self.num_chunks}, rows [{self.row_start}, "
            f"{self.row_end}), halo {self.num_halo}, edges {self.num_edges})"
        )


def build_chunk_plans(graph: Graph, offsets: torch.Tensor) -> tuple[ChunkPlan, ...]:
    """One :class:`ChunkPlan` per chunk of a graph whose chunks are contiguous.

    ``graph`` must already be reordered so that chunk ``k`` is the rows
    ``[offsets[k], offsets[k+1])`` (see :func:`gnnpipe.partition.reorder`). Empty
    chunks (``offsets[k] == offsets[k+1]``) give plans with no rows. Every stored edge
    (duplicates and self-loops included) appears exactly once in the plan of its
    destination's chunk; the local indices of a row are sorted ascending (own rows
    first, then halo rows), so a local CSR is canonical.

    Shapes: offsets int64 [num_chunks + 1], offsets[0] = 0, offsets[-1] = N,
    non-decreasing.
    """
    offsets = _check_offsets(graph, offsets)
    num_chunks = int(offsets.numel() - 1)
    n = graph.num_nodes
    degree = graph.in_degree
    plans = []
    for k in range(num_chunks):
        a, b = int(offsets[k]), int(offsets[k + 1])
        num_own = b - a
        e0, e1 = int(graph.indptr[a]), int(graph.indptr[b])
        indptr = graph.indptr[a : b + 1] - e0
        src = graph.indices[e0:e1]
        own = (src >= a) & (src < b)
        # Halo = distinct outside sources, sorted: mark them on an [N] table (O(N + nnz),
        # no sort); the running count of marks is then each halo vertex's halo_nid.
        is_halo = torch.zeros(n, dtype=torch.bool)
        is_halo[src[~own]] = True
        halo = torch.nonzero(is_halo).flatten()
        halo_nid_of = torch.cumsum(is_halo, 0) - 1
        local = torch.where(own, src - a, num_own + halo_nid_of[src])
        local = _sort_rows_own_first(local, own, indptr)
        # searchsorted(right) - 1 is the last chunk starting at or before the vertex,
        # which skips empty chunks that share its start offset.
        halo_chunk = torch.searchsorted(offsets, halo, right=True) - 1
        in_degree = torch.cat([degree[a:b], degree[halo]])
        plans.append(
            ChunkPlan(
                chunk_idx=k, num_chunks=num_chunks, row_start=a, row_end=b,
                halo_global_nid=halo, halo_chunk=halo_chunk,
                indptr=indptr.contiguous(), indices=local.contiguous(), in_degree=in_degree,
            )
        )
    return tuple(plans)


def plan_graph_edges(graph: Graph, plan: ChunkPlan) -> torch.Tensor:
    """The graph edge id (position in ``graph.indices``) of every edge of ``plan``.

    ``graph`` is the graph the plan was built from (after :func:`reorder`). With it a
    per-edge weight of the graph, ``w [num_edges]``, becomes the plan's
    ``w[plan_graph_edges(graph, plan)]``, which ``ChunkOps.aggregate(...,
    "weighted", edge_weight)`` takes. Not stored in the plan: it is recomputed in
    O(nnz) from the graph (the plan orders each row "own sources, then halo sources",
    a stable partition of the graph's row).

    Shapes: -> int64 [plan.num_edges].
    """
    if not (0 <= plan.row_start <= plan.row_end <= graph.num_nodes):
        raise PartitionError(f"{graph.name}: plan rows [{plan.row_start}, {plan.row_end}) are outside the "
                             f"graph's {graph.num_nodes} vertices")
    e0, e1 = int(graph.indptr[plan.row_start]), int(graph.indptr[plan.row_end])
    if e1 - e0 != plan.num_edges:
        raise PartitionError(f"{graph.name}: plan of chunk {plan.chunk_idx} has {plan.num_edges} edges, "
                             f"the graph's rows [{plan.row_start}, {plan.row_end}) have {e1 - e0}: "
                             "not the graph it was built from")
    src = graph.indices[e0:e1]
    own = (src >= plan.row_start) & (src < plan.row_end)
    return _sort_rows_own_first(torch.arange(e0, e1, dtype=torch.int64), own, plan.indptr)


def _sort_rows_own_first(local: torch.Tensor, own: torch.Tensor, indptr: torch.Tensor) -> torch.Tensor:
    """Sort the local ids of every row, given rows sorted by global id.

    Within a row, own sources (local ids < num_own) and halo sources (local ids >=
    num_own) are each already ascending, because both maps from global to local id are
    increasing; only the halo sources *below* the chunk sit before the own ones. So
    the sorted row is "own edges in order, then halo edges in order": a stable
    partition of every row, computed with prefix sums instead of a sort.

    Shapes: local, own [nnz]; indptr [num_own + 1]; returns [nnz].
    """
    nnz = local.numel()
    if nnz == 0:
        return local
    counts = indptr[1:] - indptr[:-1]
    row = torch.repeat_interleave(torch.arange(counts.numel(), dtype=torch.int64), counts)
    own_i = own.to(torch.int64)
    own_before = torch.zeros(nnz + 1, dtype=torch.int64)  # own edges before position j
    own_before[1:] = torch.cumsum(own_i, 0)
    row_start = indptr[:-1][row]
    own_rank = own_before[:-1] - own_before[row_start]  # own edges before j in its row
    own_in_row = (own_before[indptr[1:]] - own_before[indptr[:-1]])[row]
    pos_in_row = torch.arange(nnz, dtype=torch.int64) - row_start
    new_pos = row_start + torch.where(own, own_rank, own_in_row + pos_in_row - own_rank)
    out = torch.empty_like(local)
    out[new_pos] = local
    return out


def _check_offsets(graph: Graph, offsets: torch.Tensor) -> torch.Tensor:
    """``offsets`` as int64, or :class:`PartitionError` if it does not cover [0, N]."""
    offsets = torch.as_tensor(offsets).to(torch.int64).reshape(-1)
    n = graph.num_nodes
    if offsets.numel() < 2:
        raise PartitionError(
            f"{graph.name}: chunk offsets must have num_chunks + 1 >= 2 entries, found {offsets.numel()}"
        )
    if int(offsets[0]) != 0 or int(offsets[-1]) != n:
        raise PartitionError(
            f"{graph.name}: chunk offsets must run from 0 to N={n}, found "
            f"{int(offsets[0])} .. {int(offsets[-1])}"
        )
    if bool((offsets[1:] < offsets[:-1]).any()):
        raise PartitionError(f"{graph.name}: chunk offsets must be non-decreasing, found a decrease")
    return offsets


def whole_graph_plan(graph: Graph) -> ChunkPlan:
    """The one-chunk plan of the whole graph: no halo, local_nid == global_nid."""
    return build_chunk_plans(graph, torch.tensor([0, graph.num_nodes]))[0]


def halo_send_lists(plans: tuple[ChunkPlan, ...]) -> list[list[torch.Tensor]]:
    """``send[p][q]``: the global_nid rows that chunk ``p`` owns and chunk ``q`` reads
    as halo, sorted, in the order of ``plans[q].halo_global_nid`` (so that the rows
    that ``p`` sends are exactly the slice of q's halo that p owns)."""
    num_chunks = len(plans)
    send: list[list[torch.Tensor]] = [[torch.empty(0, dtype=torch.int64)] * num_chunks for _ in range(num_chunks)]
    for q, plan in enumerate(plans):
        for p in range(num_chunks):
            if p != q:
                send[p][q] = plan.halo_global_nid[plan.halo_chunk == p]
    return send
