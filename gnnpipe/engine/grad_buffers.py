"""A stage's gradient buffers ``G_l``: which rows they hold, and when.

``G_l`` collects, for layer ``l``, the gradient that a chunk's fresh reads of other
chunks' rows give those rows, until the owning chunk's backward takes it
(:mod:`gnnpipe.engine.stage`). It holds only the rows a read can give a gradient
(:mod:`gnnpipe.engine.row_space`):

* pipeline mode (one way): slots assigned per epoch from the chunk order
  (:class:`~gnnpipe.engine.row_space.EpochGradPlan`), plus a trash slot for stale
  reads, in a buffer sized for any order;
* hybrid mode: fixed slots (:class:`~gnnpipe.engine.row_space.GradRows`: the halo rows
  of the way's chunks and the rows other ways read); with one chunk per way (C = W)
  every read is fresh and back-propagated at the one step, where the exchange hands
  each row's gradient to its owner, so nothing in ``G_l`` outlives its layer's
  backward: the layers share one buffer per width, zeroed after each use (on the
  200k-vertex GCN-32 hybrid default, one buffer instead of 31).
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnpipe.engine.row_space import EpochGradPlan, GradRows

__all__ = ["GradBuffers"]


class GradBuffers:
    """The ``G_l`` of one stage and the slots they hold this epoch.

    ``static``: the fixed slots (hybrid), or None; ``epoch_plan``: the per-epoch plan
    (pipeline), or None; one of the two is given. ``shared``: one buffer per width for
    every layer (hybrid with one chunk per way).

    Shapes: ``G[l]`` [rows, widths[l]] (``rows``: the plan's capacity, plus the trash
    slot in pipeline mode).
    """

    def __init__(self, widths: dict[int, int], static: GradRows | None, epoch_plan: EpochGradPlan | None,
                 shared: bool, device: torch.device, dtype: torch.dtype) -> None:
        self.epoch_plan = epoch_plan
        self.rows: GradRows | None = static
        self.shared = shared
        n = (static if static is not None else epoch_plan).buffer_rows  # type: ignore[union-attr]
        self.num_rows = n
        by_width = {d: torch.zeros(n, d, device=device, dtype=dtype) for d in set(widths.values())} \
            if shared else {}
        self.G: dict[int, Tensor] = {l: by_width[d] if shared else torch.zeros(n, d, device=device, dtype=dtype)
                                     for l, d in widths.items()}

    def begin_epoch(self, step_of: Tensor) -> None:
        """Zero every buffer (a shared one once) and, in pipeline mode, assign the
        epoch's slots from its order (``step_of[k]``: the step of chunk k)."""
        for G in {id(G): G for G in self.G.values()}.values():
            G.zero_()
        if self.epoch_plan is not None:
            self.rows = self.epoch_plan.for_order(step_of)

    def done_with(self, G: Tensor) -> None:
        """A layer's backward has read its ``G_l``: a shared buffer is zeroed for the
        next layer."""
        if self.shared:
            G.zero_()
