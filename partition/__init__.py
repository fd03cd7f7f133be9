"""gnnpipe.partition: METIS/random partitions, chunk plans, quality stats, cache.

Typical use (what the engine does)::

    from gnnpipe.partition import chunk_graph
    cg = chunk_graph(graph, num_chunks=8, method="metis", seed=0)
    cg.graph        # reordered Graph, chunk k = rows [cg.offsets[k], cg.offsets[k+1])
    cg.plans        # one ChunkPlan per chunk
    cg.stats        # PartitionStats (edge cut, balance, halo, M, M[p][q])
    cg.partition.rows_to_original(logits)   # back to the caller's vertex order
"""

from gnnpipe.partition.cache import cached_partition, partition_cache_dir, partition_key
from gnnpipe.partition.chunked import ChunkedGraph, chunk_graph, partition_graph
from gnnpipe.partition.core import (
    KNOWN_METHODS,
    Partition,
    make_partition,
    metis_partition,
    random_partition,
    reorder,
    resolve_vertex_weights,
    symmetric_adjacency,
)
from gnnpipe.partition.plan import ChunkPlan, build_chunk_plans, halo_send_lists, plan_graph_edges, whole_graph_plan
from gnnpipe.partition.stats import (
    PartitionStats,
    format_stats_table,
    pair_counts,
    partition_stats,
    undirected_edge_cut,
)

__all__ = [
    "ChunkPlan",
    "build_chunk_plans",
    "whole_graph_plan",
    "halo_send_lists",
    "plan_graph_edges",
    "KNOWN_METHODS",
    "Partition",
    "metis_partition",
    "random_partition",
    "make_partition",
    "reorder",
    "resolve_vertex_weights",
    "symmetric_adjacency",
    "PartitionStats",
    "partition_stats",
    "pair_counts",
    "undirected_edge_cut",
    "format_stats_table",
    "ChunkedGraph",
    "chunk_graph",
    "partition_graph",
    "cached_partition",
    "partition_cache_dir",
    "partition_key",
]
