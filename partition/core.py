"""Partitions: which part every vertex belongs to, and the renumbering that makes parts
contiguous (DESIGN.md 2).

Two partitioners: :func:`metis_partition` (METIS k-way, edge-cut objective, through
pymetis, on the symmetrised graph without self-loops) and :func:`random_partition`
(balanced random assignment, the baseline). Both return a :class:`Partition`, which
carries the permutation that :func:`reorder` applies: after reordering, part ``k`` is
the contiguous ``global_nid`` range ``[offsets[k], offsets[k+1])`` and the order of the
vertices inside a part is their original order (a stable sort by part).

Id spaces: ``Partition.parts`` is indexed by the *original* ``global_nid``;
``perm[new_nid] = old_nid`` and ``inv_perm[old_nid] = new_nid``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import torch

from gnnpipe.data.graph import Graph
from gnnpipe.errors import PartitionError

__all__ = [
    "Partition",
    "KNOWN_METHODS",
    "metis_partition",
    "random_partition",
    "make_partition",
    "reorder",
    "resolve_vertex_weights",
    "check_num_parts",
    "symmetric_adjacency",
]

logger = logging.getLogger(__name__)

#: The partition methods that :func:`make_partition` (and every entry above it) knows.
KNOWN_METHODS: tuple[str, ...] = ("metis", "random")

#: ``vertex_weights`` may be a per-vertex array or one of these names.
VertexWeights = Union[None, str, torch.Tensor, np.ndarray]


@dataclass(frozen=True, eq=False)
class Partition:
    """An assignment of every vertex to one of ``num_parts`` parts, with the renumbering
    that makes each part a contiguous range.

    Shapes:
        parts: int64 [N] (part of each original global_nid); perm: int64 [N]
        (perm[new_nid] = old_nid); inv_perm: int64 [N] (inv_perm[old_nid] = new_nid);
        offsets: int64 [num_parts + 1] (part k = new ids [offsets[k], offsets[k+1])).
    """

    parts: torch.Tensor
    num_parts: int
    perm: torch.Tensor
    inv_perm: torch.Tensor
    offsets: torch.Tensor
    method: str
    seed: int

    # ----------------------------------------------------------- construction
    @classmethod
    def from_parts(cls, parts: Any, num_parts: int, *, method: str = "given", seed: int = 0) -> "Partition":
        """Build the permutation and offsets from a per-vertex part array.

        The permutation is a *stable* sort by part, so inside a part the vertices keep
        their original relative order. Raises :class:`PartitionError` when a part id
        lies outside ``[0, num_parts)``.

        Shapes: parts [N] (any integer dtype).
        """
        parts_t = torch.as_tensor(np.asarray(parts) if not isinstance(parts, torch.Tensor) else parts)
        parts_t = parts_t.to(torch.int64).reshape(-1).contiguous()
        num_parts = int(num_parts)
        if num_parts < 1:
            raise PartitionError(f"partition: num_parts must be >= 1, found {num_parts}")
        if parts_t.numel() and (int(parts_t.min()) < 0 or int(parts_t.max()) >= num_parts):
            raise PartitionError(
                f"partition: part ids must lie in [0, {num_parts}), found range "
                f"[{int(parts_t.min())}, {int(parts_t.max())}]"
            )
        perm = torch.argsort(parts_t, stable=True)
        inv_perm = torch.empty_like(perm)
        inv_perm[perm] = torch.arange(perm.numel(), dtype=torch.int64)
        sizes = torch.bincount(parts_t, minlength=num_parts)
        offsets = torch.zeros(num_parts + 1, dtype=torch.int64)
        offsets[1:] = torch.cumsum(sizes, 0)
        return cls(
            parts=parts_t, num_parts=num_parts, perm=perm, inv_perm=inv_perm,
            offsets=offsets, method=str(method), seed=int(seed),
        )

    # ---------------------------------------------------------------- basics
    @property
    def num_nodes(self) -> int:
        return int(self.parts.numel())

    @property
    def part_sizes(self) -> torch.Tensor:
        """int64 [num_parts]: number of vertices in each part."""
        return self.offsets[1:] - self.offsets[:-1]

    @property
    def reordered_parts(self) -> torch.Tensor:
        """int64 [N]: the part of each *reordered* global_nid (non-decreasing)."""
        return torch.repeat_interleave(torch.arange(self.num_parts, dtype=torch.int64), self.part_sizes)

    def part_range(self, part_idx: int) -> tuple[int, int]:
        """``(row_start, row_end)`` of part ``part_idx`` in reordered ids."""
        return int(self.offsets[part_idx]), int(self.offsets[part_idx + 1])

    # --------------------------------------------------------------- mapping
    def to_original_nid(self, new_nid: torch.Tensor) -> torch.Tensor:
        """Original global_nid of reordered ids. Shapes: new_nid [*] -> [*]."""
        return self.perm[new_nid]

    def to_reordered_nid(self, old_nid: torch.Tensor) -> torch.Tensor:
        """Reordered global_nid of original ids. Shapes: old_nid [*] -> [*]."""
        return self.inv_perm[old_nid]

    def rows_to_original(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows indexed by reordered id -> the same rows indexed by original id
        (e.g. logits of a reordered graph back to the user's vertex order).

        Shapes: rows [N, *] -> [N, *] (a tensor or a SparseFeatures)."""
        self._check_rows(rows)
        return rows[self.inv_perm.to(rows.device)]

    def rows_to_reordered(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows indexed by original id -> rows indexed by reordered id.

        Shapes: rows [N, *] -> [N, *]."""
        self._check_rows(rows)
        return rows[self.perm.to(rows.device)]

    def _check_rows(self, rows: torch.Tensor) -> None:
        if rows.dim() < 1 or rows.shape[0] != self.num_nodes:
            raise PartitionError(
                f"partition: rows must have N={self.num_nodes} rows, found shape {tuple(rows.shape)}"
            )

    def __repr__(self) -> str:
        sizes = self.part_sizes
        lo = int(sizes.min()) if sizes.numel() else 0
        hi = int(sizes.max()) if sizes.numel() else 0
        return (
            f"Partition(method={self.method!r}, seed={self.seed}, N={self.num_nodes}, "
            f"num_parts={self.num_parts}, part sizes {lo}..{hi})"
        )


# ------------------------------------------------------------------ checks
def check_num_parts(graph: Graph, num_parts: int) -> int:
    """``num_parts`` as an int, or :class:`PartitionError` naming both numbers."""
    n = graph.num_nodes
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)):
        raise PartitionError(f"{graph.name}: num_parts must be an integer, found {num_parts!r}")
    num_parts = int(num_parts)
    if num_parts < 1 or num_parts > n:
        raise PartitionError(
            f"{graph.name}: num_parts must lie in [1, N={n}], found num_parts={num_parts}"
        )
    return num_parts


def resolve_vertex_weights(graph: Graph, vertex_weights: VertexWeights) -> torch.Tensor | None:
    """Per-vertex integer METIS weights, or None.

    ``"degree"`` means in-degree + 1 (the per-row aggregation cost: one term per in-edge
    plus the row itself); ``"uniform"`` / None means no weights. An array must hold N
    positive integers.

    Shapes: returns int64 [N] or None.
    """
    if vertex_weights is None:
        return None
    n = graph.num_nodes
    if isinstance(vertex_weights, str):
        if vertex_weights == "uniform":
            return None
        if vertex_weights == "degree":
            return (graph.in_degree + 1).to(torch.int64)
        raise PartitionError(
            f"{graph.name}: vertex_weights must be 'degree', 'uniform', None or an array of N "
            f"positive integers, found {vertex_weights!r}"
        )
    w = torch.as_tensor(np.asarray(vertex_weights) if not isinstance(vertex_weights, torch.Tensor) else vertex_weights)
    w = w.reshape(-1)
    if w.numel() != n:
        raise PartitionError(f"{graph.name}: vertex_weights must have N={n} entries, found {w.numel()}")
    if w.is_floating_point():
        if not bool(torch.isfinite(w).all()) or not bool((w == torch.round(w)).all()):
            raise PartitionError(f"{graph.name}: vertex_weights must be integers, found non-integer values")
    elif w.dtype == torch.bool:
        raise PartitionError(f"{graph.name}: vertex_weights must be integers, found dtype bool")
    w = w.to(torch.int64)
    if n and int(w.min()) < 1:
        raise PartitionError(f"{graph.name}: vertex_weights must be >= 1, found minimum {int(w.min())}")
    return w.contiguous()


# ------------------------------------------------------------- partitioners
def symmetric_adjacency(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(indptr, indices)`` of the undirected simple graph underlying ``graph``:
    u ~ v iff u -> v or v -> u with u != v, each neighbour listed once, sorted.

    The same set as ``graph.symmetrize().remove_self_loops()``, built with scipy's
    sparse sum, which is an order of magnitude faster on million-edge graphs.

    Shapes: returns int64 [N + 1], int64 [2 * num_undirected_edges].
    """
    import scipy.sparse as sp

    n = graph.num_nodes
    # int32 counts: a sum that wrapped to 0 (int8 at 256 parallel edges) would drop the pair.
    ones = np.ones(graph.num_edges, dtype=np.int32)
    a = sp.csr_matrix((ones, graph.indices.numpy(), graph.indptr.numpy()), shape=(n, n))
    s = (a + a.T).tocoo()
    # Self-loops dropped by a filter: setdiag(0) inserts the missing diagonal entries
    # first, and scipy 1.9-1.11 (not 1.13) warns on stderr that it changes the structure.
    off = s.row != s.col
    s = sp.csr_matrix((s.data[off], (s.row[off], s.col[off])), shape=(n, n))
    s.sort_indices()
    return s.indptr.astype(np.int64), s.indices.astype(np.int64)


def metis_partition(
    graph: Graph,
    num_parts: int,
    *,
    seed: int = 0,
    vertex_weights: VertexWeights = None,
    recursive: bool | None = None,
    ufactor: int | None = None,
) -> Partition:
    """METIS k-way partition minimising the edge cut of the symmetrised graph.

    METIS needs an undirected graph without self-loops, so it runs on
    :func:`symmetric_adjacency` (duplicate edges merged, all edge weights 1). ``seed`` is METIS' random seed: the same graph, parameters and seed
    give the same partition. ``vertex_weights`` balances the parts by weight instead
    of by count (see :func:`resolve_vertex_weights`). ``recursive`` selects recursive
    bisection instead of k-way (pymetis' default: recursive for <= 8 parts);
    ``ufactor`` is METIS' allowed imbalance in thousandths (default 30 = 1.03 for
    k-way). ``num_parts == 1`` does not call METIS.

    METIS may leave a part empty on tiny or very unbalanced graphs; that is logged,
    not an error (an empty chunk is a valid, empty micro-batch).
    """
    num_parts = check_num_parts(graph, num_parts)
    weights = resolve_vertex_weights(graph, vertex_weights)
    n = graph.num_nodes
    if num_parts == 1:
        return Partition.from_parts(torch.zeros(n, dtype=torch.int64), 1, method="metis", seed=seed)

    import pymetis

    sym_indptr, sym_indices = symmetric_adjacency(graph)
    idx_dtype = pymetis.zero_copy_dtype()
    adjacency = pymetis.CSRAdjacency(
        adj_starts=sym_indptr.astype(idx_dtype, copy=False),
        adjacent=sym_indices.astype(idx_dtype, copy=False),
    )
    options = pymetis.Options(seed=int(seed))
    if ufactor is not None:
        options.ufactor = int(ufactor)
    vweights = None if weights is None else weights.numpy().astype(idx_dtype, copy=False)
    result = pymetis.part_graph(
        num_parts, adjacency, vweights=vweights, recursive=recursive, options=options
    )
    parts = torch.from_numpy(np.asarray(result.vertex_part, dtype=np.int64))
    part = Partition.from_parts(parts, num_parts, method="metis", seed=seed)
    empty = int((part.part_sizes == 0).sum())
    if empty:
        logger.warning("%s: METIS left %d of %d parts empty", graph.name, empty, num_parts)
    logger.debug("%s: METIS %d parts, reported edge cut %d", graph.name, num_parts, result.edge_cuts)
    return part


def random_partition(graph: Graph, num_parts: int, *, seed: int = 0) -> Partition:
    """Balanced random partition: a seeded random permutation of the vertices is cut
    into ``num_parts`` consecutive runs whose sizes differ by at most one. The baseline
    against which METIS is measured."""
    num_parts = check_num_parts(graph, num_parts)
    n = graph.num_nodes
    gen = torch.Generator().manual_seed(int(seed))
    order = torch.randperm(n, generator=gen)
    # The vertex at position i of the permutation goes to part floor(i * P / N).
    parts = torch.empty(n, dtype=torch.int64)
    parts[order] = torch.arange(n, dtype=torch.int64) * num_parts // n
    return Partition.from_parts(parts, num_parts, method="random", seed=seed)


def make_partition(
    graph: Graph, num_parts: int, *,
    method: str = "metis", seed: int = 0, vertex_weights: VertexWeights = None,
) -> Partition:
    """Dispatch on ``method`` (one of :data:`KNOWN_METHODS`), without any cache."""
    if method not in KNOWN_METHODS:
        raise PartitionError(
            f"{graph.name}: partition method must be one of {', '.join(KNOWN_METHODS)}, found {method!r}"
        )
    if method == "metis":
        return metis_partition(graph, num_parts, seed=seed, vertex_weights=vertex_weights)
    if resolve_vertex_weights(graph, vertex_weights) is not None:
        raise PartitionError(
            f"{graph.name}: vertex_weights are only used by method 'metis', found method {method!r}"
        )
    return random_partition(graph, num_parts, seed=seed)


# ---------------------------------------------------------------- reorder
def reorder(graph: Graph, partition: Partition) -> Graph:
    """Renumber the vertices so that every part is a contiguous range.

    Vertex ``old`` becomes ``partition.inv_perm[old]``; features, labels and the three
    masks are permuted with it and the in-edge CSR is rebuilt (sorted within rows, with
    every duplicate edge and self-loop kept). Sparse features
    (:class:`~gnnpipe.data.sparse.SparseFeatures`) stay sparse: their CSR rows are
    permuted the same way. Returns a new graph.
    """
    n = graph.num_nodes
    if partition.num_nodes != n:
        raise PartitionError(
            f"{graph.name}: partition has N={partition.num_nodes} vertices, the graph has N={n}"
        )
    perm, inv_perm = partition.perm, partition.inv_perm
    new_src = inv_perm[graph.indices]
    new_dst = inv_perm[graph.dst_index()]
    # Graph.from_edge_index owns the COO -> sorted CSR conversion; the placeholder graph
    # only lends its CSR, every other field comes from `graph` (so fields added to Graph
    # later survive a reorder).
    csr = Graph.from_edge_index(
        torch.stack([new_src, new_dst]), torch.zeros(n, 0), torch.zeros(n, dtype=torch.int64),
        num_nodes=n, num_classes=max(graph.num_classes, 1), name=graph.name,
    )
    return graph.replace(
        indptr=csr.indptr,
        indices=csr.indices,
        features=graph.features[perm].contiguous(),
        labels=graph.labels[perm].contiguous(),
        train_mask=graph.train_mask[perm].contiguous(),
        val_mask=graph.val_mask[perm].contiguous(),
        test_mask=graph.test_mask[perm].contiguous(),
    )
