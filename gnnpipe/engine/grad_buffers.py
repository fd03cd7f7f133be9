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

**Lent memory** (pipeline mode, synchronous schedule). ``G_l`` is needed only from
the epoch's first backward at layer ``l`` to its last, while what the stage's arena
(:mod:`gnnpipe.engine.saved_arena`) holds for the first chunk to go back, the last in
the order, is dead from that chunk's backward of layer ``l`` until its next forward,
in the next epoch: every other chunk goes back before that. So the first backward at
layer ``l`` offers its largest saved tensor of the layer, just consumed, and ``G_l``
takes its memory for the rest of the epoch when it is large enough; otherwise, or
without an offer, ``G_l`` is a buffer of its own, made once and kept. On the 200k
systems graph at C = 2 (GCN-32's default) the own buffers were 16 x 71,547 x 100
floats, 0.46 GB a stage, held beside the saved tensors through the forward. Not with
the cross-epoch overlap (a chunk's next forward may come before the epoch's last
backward) nor in hybrid mode, whose buffers are exchanged at fixed slots.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnpipe.engine import saved_arena
from gnnpipe.engine.row_space import EpochGradPlan, GradRows

__all__ = ["GradBuffers", "lendable"]


def lendable(min_own_rows: int, buffer_rows: int, min_width: int, element_size: int) -> bool:
    """Whether every chunk's layers save a slot that holds a ``G_l`` of ``buffer_rows``
    rows: each layer kind saves at least one ``[own rows, d]`` tensor, and the arena
    takes it (at least :data:`~gnnpipe.engine.saved_arena.MIN_BYTES`). The stage decides
    by it whether to lend, and the planner whether to count ``G_l``."""
    return (min_own_rows >= buffer_rows
            and min_own_rows * min_width * element_size >= saved_arena.MIN_BYTES)


class GradBuffers:
    """The ``G_l`` of one stage and the slots they hold this epoch.

    ``static``: the fixed slots (hybrid), or None; ``epoch_plan``: the per-epoch plan
    (pipeline), or None; one of the two is given. ``shared``: one buffer per width for
    every layer (hybrid with one chunk per way). ``lend``: ``G_l`` may take the memory
    a layer's first backward of the epoch offers (module docstring: pipeline mode,
    synchronous schedule); own buffers are then made only for the layers that need one.

    Shapes: ``buffer(l)`` [rows, widths[l]] (``rows``: the plan's capacity, plus the
    trash slot in pipeline mode).
    """

    def __init__(self, widths: dict[int, int], static: GradRows | None, epoch_plan: EpochGradPlan | None,
                 shared: bool, device: torch.device, dtype: torch.dtype, lend: bool = False) -> None:
        self.epoch_plan = epoch_plan
        self.rows: GradRows | None = static
        self.shared = shared
        self.widths = dict(widths)
        self.device, self.dtype = device, dtype
        n = (static if static is not None else epoch_plan).buffer_rows  # type: ignore[union-attr]
        self.num_rows = n
        self.lend = bool(lend) and not shared and epoch_plan is not None
        # Own buffers (made once, zeroed at each epoch's start) and, with ``lend``, this
        # epoch's borrowed ones (zeroed when taken).
        self.G: dict[int, Tensor] = {}
        self.borrowed: dict[int, Tensor] = {}
        if not self.lend:
            by_width = {d: torch.zeros(n, d, device=device, dtype=dtype) for d in set(widths.values())} \
                if shared else {}
            self.G = {l: by_width[d] if shared else torch.zeros(n, d, device=device, dtype=dtype)
                      for l, d in widths.items()}

    def begin_epoch(self, step_of: Tensor) -> None:
        """Zero every own buffer (a shared one once), give back last epoch's borrowed
        memory and, in pipeline mode, assign the epoch's slots from its order
        (``step_of[k]``: the step of chunk k)."""
        for G in {id(G): G for G in self.G.values()}.values():
            G.zero_()
        self.borrowed = {}
        if self.epoch_plan is not None:
            self.rows = self.epoch_plan.for_order(step_of)

    def buffer(self, l: int, offer: Tensor | None = None) -> Tensor:
        """``G_l`` this epoch. With ``lend``, the epoch's first call for layer ``l``
        takes the memory of ``offer`` (dead until the next epoch: module docstring),
        zeroed, when it is contiguous and holds the buffer's bytes, and makes (once) or
        reuses the layer's own buffer otherwise; later calls return what it chose."""
        G = self.borrowed.get(l)
        if G is not None:
            return G
        if l not in self.G:  # lend, and no own buffer made yet
            shape = (self.num_rows, self.widths[l])
            need = shape[0] * shape[1] * self.dtype.itemsize
            # The offer is a slot of the stage's own arena, on the stage's device.
            if offer is not None and offer.is_contiguous() and offer.numel() * offer.element_size() >= need:
                G = offer.reshape(-1).view(torch.uint8)[:need].view(self.dtype).view(shape).zero_()
                self.borrowed[l] = G
                return G
            self.G[l] = torch.zeros(shape, device=self.device, dtype=self.dtype)
        return self.G[l]

    @property
    def own_bytes(self) -> int:
        """Bytes of the buffers held apart from borrowed memory (a shared one once)."""
        return sum(G.numel() * G.element_size() for G in {id(G): G for G in self.G.values()}.values())

    def done_with(self, G: Tensor) -> None:
        """A layer's backward has read its ``G_l``: a shared buffer is zeroed for the
        next layer."""
        if self.shared:
            G.zero_()
