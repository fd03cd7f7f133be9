"""Quality figures of a partition (DESIGN.md 2) and the per-pair replication counts that
the communication predictions of DESIGN.md 7 need.

Conventions (edge u -> v means v aggregates from u; the graph's CSR lists in-edges):

* ``edge_cut``: number of *undirected* edges ``{u, v}`` (u != v) of the symmetrised
  graph -- duplicates merged, self-loops dropped, the graph METIS sees -- whose
  endpoints lie in different parts. This is the figure METIS minimises and reports.
* ``cut_in_edges``: number of *stored* directed edges (with multiplicity) whose source
  and destination lie in different parts: the halo reads of one aggregation.
* ``pair_counts[p][q]`` (p != q): number of distinct vertices of part p with an
  out-edge into part q, i.e. the rows that p must send to q each layer. The diagonal
  is 0. Its column sum is the halo size of q, and
  ``M = sum of all entries = total halo``: both names are kept because DESIGN.md 2
  defines them separately.
* ``balance``: max part size / mean part size (1.0 is perfect).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from gnnpipe.data.graph import Graph
from gnnpipe.errors import PartitionError
from gnnpipe.partition.core import symmetric_adjacency

__all__ = ["PartitionStats", "partition_stats", "pair_counts", "undirected_edge_cut", "format_stats_table"]


#: Largest N * num_parts for which pair_counts marks pairs on a dense boolean table.
_DENSE_TABLE_LIMIT = 1 << 27


def _check_parts(graph: Graph, parts: torch.Tensor, num_parts: int) -> torch.Tensor:
    parts = torch.as_tensor(parts).to(torch.int64).reshape(-1)
    if parts.numel() != graph.num_nodes:
        raise PartitionError(
            f"{graph.name}: parts must have N={graph.num_nodes} entries, found {parts.numel()}"
        )
    if parts.numel() and (int(parts.min()) < 0 or int(parts.max()) >= num_parts):
        raise PartitionError(
            f"{graph.name}: part ids must lie in [0, {num_parts}), found range "
            f"[{int(parts.min())}, {int(parts.max())}]"
        )
    return parts


def pair_counts(graph: Graph, parts: torch.Tensor, num_parts: int) -> torch.Tensor:
    """``M[p][q]``: distinct vertices of part p with an out-edge into part q (p != q).

    ``parts`` may be any labelling of the vertices: for hybrid mode's ``M_W`` pass the
    *way* of each vertex (``way_of_chunk[chunk_of_vertex]``) and ``num_parts = W``; a
    vertex read by several chunks of one way counts once for that way, as it is sent
    once.

    Shapes: parts int64 [N] (in the graph's id space); returns int64 [num_parts, num_parts].
    """
    parts = _check_parts(graph, parts, num_parts)
    src = graph.indices
    dst_part = parts[graph.dst_index()]
    src_part = parts[src]
    cross = src_part != dst_part
    # One key per distinct (source vertex, destination part) pair: marked on an
    # [N * P] table when that is small (no sort), else deduplicated by torch.unique.
    key = src[cross] * num_parts + dst_part[cross]
    table_size = graph.num_nodes * num_parts
    if table_size <= _DENSE_TABLE_LIMIT:
        seen = torch.zeros(table_size, dtype=torch.bool)
        seen[key] = True
        key = torch.nonzero(seen).flatten()
    else:
        key = torch.unique(key)
    u, q = key // num_parts, key % num_parts
    flat = torch.bincount(parts[u] * num_parts + q, minlength=num_parts * num_parts)
    return flat.reshape(num_parts, num_parts)


def undirected_edge_cut(graph: Graph, parts: torch.Tensor, num_parts: int) -> tuple[int, int]:
    """``(edge_cut, num_undirected_edges)`` of the symmetrised graph without self-loops
    (the graph METIS partitions, :func:`gnnpipe.partition.core.symmetric_adjacency`).

    Shapes: parts int64 [N]."""
    parts = _check_parts(graph, parts, num_parts)
    indptr, indices = symmetric_adjacency(graph)
    # Every undirected edge is stored twice (u -> v and v -> u): count both, halve.
    row = torch.repeat_interleave(torch.arange(graph.num_nodes), torch.from_numpy(np.diff(indptr)))
    crossing = int((parts[row] != parts[torch.from_numpy(indices)]).sum())
    return crossing // 2, int(indices.size) // 2


@dataclass(frozen=True)
class PartitionStats:
    """Quality figures of one partition of one graph (conventions: module docstring).

    All sequences are per part, indexed by part id; ``pair_counts`` is row = sending
    part p, column = reading part q.
    """

    graph_name: str
    method: str
    seed: int
    num_parts: int
    num_nodes: int
    num_edges: int
    num_undirected_edges: int
    part_sizes: tuple[int, ...]
    part_in_edges: tuple[int, ...]
    halo_sizes: tuple[int, ...]
    pair_counts: tuple[tuple[int, ...], ...]
    edge_cut: int
    cut_in_edges: int
    balance: float
    total_halo: int
    M: int

    @property
    def edge_cut_fraction(self) -> float:
        """edge_cut / number of undirected edges (0 for an edgeless graph)."""
        return self.edge_cut / self.num_undirected_edges if self.num_undirected_edges else 0.0

    def pair_matrix(self) -> torch.Tensor:
        """int64 [num_parts, num_parts]: ``pair_counts`` as a tensor."""
        return torch.tensor(self.pair_counts, dtype=torch.int64).reshape(self.num_parts, self.num_parts)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples become lists), with ``edge_cut_fraction`` added."""
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = [list(x) if isinstance(x, tuple) else x for x in v]
        d["edge_cut_fraction"] = self.edge_cut_fraction
        return d

    def format_table(self) -> str:
        return format_stats_table(self)


def partition_stats(
    graph: Graph, parts: torch.Tensor, num_parts: int, *, method: str = "given", seed: int = 0
) -> PartitionStats:
    """Compute :class:`PartitionStats` for ``parts`` (in the id space of ``graph``: the
    original parts for the original graph, ``Partition.reordered_parts`` for the
    reordered graph; the figures are the same).

    Shapes: parts int64 [N]."""
    parts = _check_parts(graph, parts, num_parts)
    n = graph.num_nodes
    sizes = torch.bincount(parts, minlength=num_parts)
    dst_part = parts[graph.dst_index()]
    in_edges = torch.bincount(dst_part, minlength=num_parts)
    cut_in_edges = int((parts[graph.indices] != dst_part).sum())
    m = pair_counts(graph, parts, num_parts)
    halo = m.sum(dim=0)
    edge_cut, num_und = undirected_edge_cut(graph, parts, num_parts)
    balance = float(sizes.max()) / (n / num_parts) if n else 1.0
    return PartitionStats(
        graph_name=graph.name,
        method=method,
        seed=int(seed),
        num_parts=int(num_parts),
        num_nodes=n,
        num_edges=graph.num_edges,
        num_undirected_edges=num_und,
        part_sizes=tuple(int(x) for x in sizes),
        part_in_edges=tuple(int(x) for x in in_edges),
        halo_sizes=tuple(int(x) for x in halo),
        pair_counts=tuple(tuple(int(x) for x in row) for row in m),
        edge_cut=edge_cut,
        cut_in_edges=cut_in_edges,
        balance=balance,
        total_halo=int(halo.sum()),
        M=int(m.sum()),
    )


def format_stats_table(stats: PartitionStats) -> str:
    """A plain-text table: one row per part (size, in-edges, halo, rows sent) and the
    summary figures below it."""
    sent = [sum(row) for row in stats.pair_counts]
    header = f"{'part':>6} {'vertices':>10} {'in-edges':>10} {'halo':>8} {'rows sent':>10}"
    lines = [
        f"{stats.graph_name}: {stats.method} partition (seed {stats.seed}) into {stats.num_parts} parts, "
        f"N={stats.num_nodes}, E={stats.num_edges} stored / {stats.num_undirected_edges} undirected",
        header,
        "-" * len(header),
    ]
    for p in range(stats.num_parts):
        lines.append(
            f"{p:>6} {stats.part_sizes[p]:>10} {stats.part_in_edges[p]:>10} "
            f"{stats.halo_sizes[p]:>8} {sent[p]:>10}"
        )
    lines.append("-" * len(header))
    lines.append(
        f"edge cut {stats.edge_cut} of {stats.num_undirected_edges} undirected edges "
        f"({100 * stats.edge_cut_fraction:.2f}%); cut in-edges {stats.cut_in_edges} of {stats.num_edges}"
    )
    lines.append(f"balance (max/mean part size) {stats.balance:.4f}")
    lines.append(f"total halo {stats.total_halo}; M (replicated rows) {stats.M}")
    return "\n".join(lines)
