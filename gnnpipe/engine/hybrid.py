"""Mode ``hybrid``: W ways x S stages (DESIGN.md 6).

Rank ``way * S + stage``. Chunks are dealt to ways in contiguous blocks
(:func:`gnnpipe.engine.schedule.way_blocks`); each way pipelines its block through its
S stages exactly as pipeline mode does (the executor is
:class:`gnnpipe.engine.pipeline.StagePipeline`), all ways at the same step. At every
layer ``l >= 2``, before computing it, a stage sends the input rows of its current
chunk that chunks of other ways read to the peers of the same stage (kind
``halo_rows``), which write them into their ``B_l``: fresh there from this step on,
the older values are historical. Layer 1 needs no exchange: X is replicated on stage 0
of every way, which encodes all rows itself. In backward, at the same step and layer,
the gradient that a way's fresh reads gave to those rows goes back to the owner way
(``halo_gradients``): the reads at later steps were back-propagated already (reverse
order), the reads at this step just now. Weight gradients are then summed over the W
ways of each stage (ring all-reduce, ``weight_allreduce``) before the step.

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

from gnnpipe.engine.context import WorkerContext
from gnnpipe.engine.pipeline import StagePipeline, predicted_pipeline_bytes
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
                           element_size: int = 4) -> dict[str, int]:
    """DESIGN.md 7 for one training epoch of hybrid mode, total over the ranks (see the
    module docstring)."""
    out = predicted_pipeline_bytes(model, chunked.graph.num_nodes, split, element_size)
    m_w = way_pair_count(chunked, ways)
    widths = sum(int(d) for d in model.layer_dims[1:len(model.layers)])  # inputs of layers 2..L
    out["halo_rows"] = out["halo_gradients"] = element_size * m_w * widths
    numel = sum(p.numel() for p in model.parameters())
    out["weight_allreduce"] = element_size * 2 * (ways - 1) * numel
    return out


class HybridRunner(StagePipeline):
    """The ``hybrid`` mode runner (:class:`gnnpipe.engine.context.ModeRunner`):
    ``config.parallel.ways`` ways of ``workers / ways`` stages."""

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx, ways=int(ctx.config.parallel.ways))

    def predicted_bytes(self) -> dict[str, int]:
        return predicted_hybrid_bytes(self.model, self.ctx.chunked, self.split, self.W, self.element_size)
