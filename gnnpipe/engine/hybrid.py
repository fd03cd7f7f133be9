"""Mode ``hybrid``: W ways x S stages (DESIGN.md 6).

Rank ``way * S + stage`` (:class:`gnnpipe.engine.layout.Layout`). Chunks are dealt to
ways in contiguous blocks (:func:`gnnpipe.engine.schedule.way_blocks`); each way
pipelines its block through its S stages exactly as pipeline mode does (the runner is
:class:`gnnpipe.engine.pipeline.StageRunner`), all ways at the same step, and the
stages of one index exchange halo rows across the ways
(:mod:`gnnpipe.engine.way_exchange`). Layer 1 needs no exchange: X is replicated on
stage 0 of every way, which encodes all rows itself. Weight gradients are summed over
the W ways of each stage (ring all-reduce, ``weight_allreduce``) before the step.

``graph`` mode is the case S = 1, W = P, C = P (every read is fresh, so it is exact);
``pipeline`` mode is W = 1.

Volume of one training epoch (total over the ranks, element size ``e``):
``stage_activations = stage_gradients = e N sum_boundaries width`` (as pipeline mode:
every row crosses each stage boundary once, in the way that owns it);
``halo_rows = halo_gradients = e M_W sum_{l=2..L} d_l`` with ``M_W`` = the M of the
partition into W way-blocks (``ChunkedGraph.group_pair_counts(way_of_chunk).sum()``),
no term for layer 1 (X replicated); ``weight_allreduce = e 2 (W-1) |theta|``.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnpipe.engine.pipeline import StageRunner, predicted_pipeline_bytes
from gnnpipe.engine.schedule import way_blocks

__all__ = ["HybridRunner", "predicted_hybrid_bytes", "way_pair_count"]


def way_pair_count(chunked: Any, ways: int) -> int:
    """``M_W``: vertices of each way-block with an out-edge into another way-block,
    summed over the ordered pairs of ways."""
    way_of = torch.empty(chunked.num_chunks, dtype=torch.int64)
    for w, blk in enumerate(way_blocks(chunked.num_chunks, ways)):
        way_of[list(blk)] = w
    return int(chunked.group_pair_counts(way_of, ways).sum())


def predicted_hybrid_bytes(model: Any, chunked: Any, split: tuple[int, ...], ways: int,
                           element_size: int = 4, stage_element_size: int | None = None) -> dict[str, int]:
    """DESIGN.md 7 for one training epoch of hybrid mode, total over the ranks (see the
    module docstring); stage messages at ``stage_element_size`` bytes per value
    (default: ``element_size``), halo rows and weights at ``element_size``."""
    out = predicted_pipeline_bytes(model, chunked.graph.num_nodes, split,
                                   element_size if stage_element_size is None else stage_element_size)
    m_w = way_pair_count(chunked, ways)
    widths = sum(int(d) for d in model.layer_dims[1:len(model.layers)])  # inputs of layers 2..L
    out["halo_rows"] = out["halo_gradients"] = element_size * m_w * widths
    numel = sum(p.numel() for p in model.parameters())
    out["weight_allreduce"] = element_size * 2 * (ways - 1) * numel
    return out


class HybridRunner(StageRunner):
    """The ``hybrid`` mode runner (:class:`gnnpipe.engine.context.ModeRunner`):
    ``layout.ways`` ways of ``layout.stages`` stages."""

    def predicted_bytes(self) -> dict[str, int]:
        return predicted_hybrid_bytes(self.stage.model, self.ctx.chunked, self.layout.stage_split,
                                      self.layout.ways, self.element_size, self.stage_element_size)
