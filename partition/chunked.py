"""The entry that the engine calls: partition (cached), reorder, plan and measure once.

:func:`chunk_graph` returns a :class:`ChunkedGraph` holding everything the graph,
pipeline and hybrid modes need: the partition (with the permutation back to the
user's ids), the reordered graph, one :class:`ChunkPlan` per chunk and the quality
figures.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from gnnpipe.data.graph import Graph
from gnnpipe.errors import PartitionError
from gnnpipe.partition.cache import cached_partition
from gnnpipe.partition.core import (
    KNOWN_METHODS,
    Partition,
    VertexWeights,
    check_num_parts,
    make_partition,
    reorder,
    resolve_vertex_weights,
)
from gnnpipe.partition.plan import ChunkPlan, build_chunk_plans, halo_send_lists
from gnnpipe.partition.stats import PartitionStats, pair_counts, partition_stats

__all__ = ["ChunkedGraph", "chunk_graph", "partition_graph"]

logger = logging.getLogger(__name__)


def partition_graph(
    graph: Graph, num_parts: int, *,
    method: str = "metis", seed: int = 0, vertex_weights: VertexWeights = None,
    cache: bool = True, cache_dir: str | Path | None = None,
) -> Partition:
    """A partition of ``graph`` by ``method``, read from the disk cache when possible.

    Only METIS partitions are cached (a random partition costs one permutation).
    ``cache_dir`` overrides the cache root (entries go to ``cache_dir/partitions``)."""
    if method not in KNOWN_METHODS:
        raise PartitionError(
            f"{graph.name}: partition method must be one of {', '.join(KNOWN_METHODS)}, found {method!r}"
        )
    num_parts = check_num_parts(graph, num_parts)
    weights = resolve_vertex_weights(graph, vertex_weights)

    def build() -> Partition:
        return make_partition(graph, num_parts, method=method, seed=seed, vertex_weights=weights)

    if not cache or method != "metis" or num_parts == 1:
        return build()
    return cached_partition(graph, num_parts, method, seed, weights, build, cache_root=cache_dir)


@dataclass(frozen=True, eq=False)
class ChunkedGraph:
    """A graph cut into contiguous chunks, with plans and figures, built once.

    ``graph`` is the *reordered* graph (chunk k = rows ``plans[k].row_start ..
    row_end``); ``partition.perm`` / ``inv_perm`` map its ids to and from the ids of
    the graph that was passed to :func:`chunk_graph`.
    """

    partition: Partition
    graph: Graph
    plans: tuple[ChunkPlan, ...]
    stats: PartitionStats

    @property
    def num_chunks(self) -> int:
        return len(self.plans)

    @property
    def offsets(self) -> torch.Tensor:
        """int64 [num_chunks + 1]: chunk k = reordered rows [offsets[k], offsets[k+1])."""
        return self.partition.offsets

    def halo_send_lists(self) -> list[list[torch.Tensor]]:
        """``send[p][q]``: reordered global_nid rows that chunk p sends to chunk q
        (see :func:`gnnpipe.partition.halo_send_lists`)."""
        return halo_send_lists(self.plans)

    def group_pair_counts(self, group_of_chunk: Sequence[int] | torch.Tensor, num_groups: int | None = None) -> torch.Tensor:
        """``M[g][h]``: distinct vertices of the chunks of group g with an out-edge into a
        chunk of group h (g != h). For hybrid mode's ``M_W`` pass each chunk's way;
        ``M_W = result.sum()``. With every chunk its own group this is
        ``stats.pair_matrix()``.

        Shapes: group_of_chunk int64 [num_chunks]; returns int64 [num_groups, num_groups].
        """
        groups = torch.as_tensor(group_of_chunk, dtype=torch.int64).reshape(-1)
        if groups.numel() != self.num_chunks:
            raise PartitionError(
                f"{self.graph.name}: group_of_chunk must have num_chunks={self.num_chunks} entries, "
                f"found {groups.numel()}"
            )
        if num_groups is None:
            num_groups = int(groups.max()) + 1 if groups.numel() else 1
        if groups.numel() and (int(groups.min()) < 0 or int(groups.max()) >= num_groups):
            raise PartitionError(
                f"{self.graph.name}: group ids must lie in [0, {num_groups}), found range "
                f"[{int(groups.min())}, {int(groups.max())}]"
            )
        return pair_counts(self.graph, groups[self.partition.reordered_parts], num_groups)

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"ChunkedGraph({self.graph.name}: {s.method} {self.num_chunks} chunks, edge cut "
            f"{s.edge_cut}/{s.num_undirected_edges}, balance {s.balance:.3f}, total halo {s.total_halo})"
        )


def chunk_graph(
    graph: Graph, num_chunks: int, *,
    method: str = "metis", seed: int = 0, vertex_weights: VertexWeights = None,
    cache: bool = True, cache_dir: str | Path | None = None,
) -> ChunkedGraph:
    """Partition ``graph`` into ``num_chunks`` chunks and build everything the
    distributed modes need from it.

    The partition comes from :func:`partition_graph` (disk-cached for METIS); the graph
    is reordered so that chunk k is contiguous; one :class:`ChunkPlan` per chunk and the
    :class:`PartitionStats` are computed from the reordered graph. Self-loops and
    duplicate edges are kept as given (the trainer removes self-loops before calling
    this).
    """
    partition = partition_graph(
        graph, num_chunks, method=method, seed=seed, vertex_weights=vertex_weights,
        cache=cache, cache_dir=cache_dir,
    )
    reordered = reorder(graph, partition)
    plans = build_chunk_plans(reordered, partition.offsets)
    stats = partition_stats(
        reordered, partition.reordered_parts, partition.num_parts, method=method, seed=seed
    )
    logger.info(
        "%s: %s %d chunks, edge cut %d (%.1f%%), balance %.3f, total halo %d",
        graph.name, method, num_chunks, stats.edge_cut, 100 * stats.edge_cut_fraction,
        stats.balance, stats.total_halo,
    )
    return ChunkedGraph(partition=partition, graph=reordered, plans=plans, stats=stats)
