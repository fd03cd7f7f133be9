"""gnnpipe.partition: METIS/random partitions, chunk plans, quality stats, cache."""

from gnnpipe.partition.plan import ChunkPlan, build_chunk_plans, halo_send_lists, whole_graph_plan

__all__ = ["ChunkPlan", "build_chunk_plans", "whole_graph_plan", "halo_send_lists"]
