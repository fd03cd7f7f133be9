"""Long-lived memory for what a pipeline stage's autograd saves between a chunk's
forward and its backward.

A stage runs every chunk's forward before the backwards come back, so what the
layers save for their backward (pre-activation products, dropout masks, norm inputs)
lives for most of the epoch, while the forward allocates and frees as much again in
temporaries (gathered rows, dropout outputs) around it. With the host's allocator
(glibc) the long-lived blocks end up between freed ones, which the heap can neither
return nor always reuse: on the 200,000-vertex GCN-32 at C = 8 a stage's peak resident
set was 1.8 GiB above its live tensors (bench/results/memory_200k). Giving the freed
pages back after each chunk (``malloc_trim``) removed that, but cost 36 % of the epoch
on this machine, in page faults when the next chunk touched them again.

:class:`SavedArena` keeps those tensors out of the heap instead: after a layer's
forward, each saved tensor is copied into a segment that belongs to its chunk and is
reused, at the same offsets, by the same chunk's forward in every later epoch (a
chunk's saved tensors have the same sizes every epoch), and the original is freed
while the layer's other temporaries still are. The heap then holds only temporaries,
which the next chunk reuses; the segments are allocated once (first touch in the
first epoch) and the copy is one pass over the saved bytes. Measured there (one run
each): peak 7.72 / 7.50 -> 7.33 / 7.39 GiB per worker, epoch 18.9 -> 17.8 s; the
resident set of a stage no longer grows from its first epoch's forward to its second.

A key's first round grows its segments geometrically (a new one as large as all before
it, at least :data:`MIN_SEGMENT_BYTES`); at its next ``begin`` a key that needed more
than one segment, or less than half of its one, gets one segment of exactly what the
round used, which the same sequence of sizes fills again from then on. So the arena holds what the chunks save
and no more from the second epoch on (at most twice that in the first), which
matters on a GPU, where a segment is device memory whether touched or not.

A chunk's slots are reused when its next forward begins: its backward of the previous
epoch is done by then in the synchronous schedule. With the cross-epoch overlap a
chunk's forward of epoch e + 1 runs before its backward of epoch e, so slots are kept
per chunk and epoch parity.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["SavedArena", "movable", "MIN_SEGMENT_BYTES", "MIN_BYTES", "ALIGN"]

#: The smallest segment (the first of a key; later ones double the key's total). Above
#: glibc's largest heap block (32 MiB), so that a first round's segments are mappings
#: of their own, not blocks between the temporaries: with 1 MiB the 200k C = 8 peak was
#: 7.60 / 7.48 GiB against 7.33 / 7.39 (bench/results/memory_200k).
MIN_SEGMENT_BYTES = 64 << 20
#: Saved tensors smaller than this stay in the heap (a page: scalars and the like). Any
#: larger one left there is a long-lived block among the forward's temporaries, and
#: glibc places such blocks in the holes those temporaries leave, so that a hole no
#: longer holds the next layer's temporary of the same size and the heap grows instead:
#: on the 200k-vertex GCN-32 at C = 8 the dropout mask words (1.03 MB a layer, just
#: below the 1 MiB this threshold was) and the scaled weight (40 KB) per layer stayed in
#: the heap, which held 4.7 GiB free (of 5.9-6.0 GiB) at the workers' peak of 9.0 GiB
#: (bench/heap_trace.py); with them moved the peak was 7.1-7.7 GiB against 9.0-9.4 GiB in
#: same-run pairs (bench/results/memory_200k/arena_all/).
MIN_BYTES = 4 << 10
#: Offsets are multiples of this, so that any dtype's view of a slot is aligned.
ALIGN = 64


class _Slots:
    """The segments of one (chunk, parity) and the next free offset in each."""

    def __init__(self) -> None:
        self.segments: list[Tensor] = []
        self.used: list[int] = []

    def reset(self, device: torch.device) -> None:
        """Free every slot; one exact segment instead of several, or of one mostly
        unused (module docstring)."""
        used = sum(self.used)
        if used and (len(self.segments) > 1 or 2 * used < self.segments[0].numel()):
            self.segments = [torch.empty(used, dtype=torch.uint8, device=device)]
        self.used = [0] * len(self.segments)


class SavedArena:
    """Per-chunk segments for saved tensors (module docstring).

    ``begin(key)`` before a chunk's forward frees that key's slots (its previous
    backward is done); ``place(key, t)`` returns a copy of ``t`` in a slot, first fit
    over the key's segments, a new segment when none has room.

    Shapes: segments uint8 [bytes]; a slot is a view of one, of the placed shape."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._slots: dict[object, _Slots] = {}

    def begin(self, key: object) -> None:
        self._slots.setdefault(key, _Slots()).reset(self.device)

    def place(self, key: object, t: Tensor) -> Tensor:
        """A contiguous copy of ``t`` in ``key``'s segments.

        Shapes: t [any] -> the same shape and dtype."""
        slots = self._slots[key]
        nbytes = t.numel() * t.element_size()
        size = -(-nbytes // ALIGN) * ALIGN
        for i, seg in enumerate(slots.segments):
            if seg.numel() - slots.used[i] >= size:
                break
        else:
            grow = max(size, sum(seg.numel() for seg in slots.segments), MIN_SEGMENT_BYTES)
            slots.segments.append(torch.empty(grow, dtype=torch.uint8, device=self.device))
            slots.used.append(0)
            i = len(slots.segments) - 1
        off = slots.used[i]
        slots.used[i] = off + size
        view = slots.segments[i][off:off + nbytes].view(t.dtype).view(t.shape)
        return view.copy_(t)

    def adopt(self, key: object, holders: list[list[Tensor]], out: Tensor) -> list[Tensor]:
        """Move what a layer just saved (``holders``: one-element lists, as the stage's
        pack hook keeps them) into the slots of ``key``, so that the originals are freed
        with the layer's temporaries, and return the slots (views) placed. A tensor
        saved twice is placed once. The output's own storage stays where it is: the
        next layer's buffer takes it over, or it is the stage's output."""
        out_ptr = out.untyped_storage().data_ptr()
        placed: dict[tuple, Tensor] = {}
        for h in holders:
            t = h[0]
            if t.untyped_storage().data_ptr() == out_ptr or not movable(t):
                continue
            ident = (t.data_ptr(), t.dtype, tuple(t.shape), t.stride())
            if ident not in placed:
                placed[ident] = self.place(key, t)
            h[0] = placed[ident]
        return list(placed.values())

    @property
    def reserved_bytes(self) -> int:
        """Bytes of every segment held (they stay allocated from epoch to epoch)."""
        return sum(seg.numel() for s in self._slots.values() for seg in s.segments)


def movable(t: Tensor) -> bool:
    """Whether a saved tensor belongs in the arena: large enough to matter, and not a
    parameter (weights live on anyway)."""
    return t.numel() * t.element_size() >= MIN_BYTES and not (t.is_leaf and t.requires_grad)
