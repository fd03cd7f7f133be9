"""Dropout masks keyed by (seed, epoch, slot, stream): one mask per row and layer per epoch.

In a chunked run (a pipeline stage, the hybrid's ways, the simulator) a row of a
layer's input is read by its own chunk and, as a halo row, by every chunk with an edge
to it. Drawing a dropout mask in each reader gives every reader another sample, and
costs one uniform draw per row *read*: on a dense graph whose chunks' halos are most of
N (BlogCatalog, C = 8: 6.4 N rows read per layer) that was the largest cost of a stage
layer (bench/chunk_overhead.py). :class:`EpochMasks` instead draws one mask per layer
over the rows it holds, as a whole-graph run does over all N, and every reader takes
its rows of it: the same rows of the same sample. The draw comes from a generator
seeded by ``(seed, epoch, slot, stream)`` alone, so every process that needs a
layer's mask draws the same one without exchanging anything (the stages of a way and
the single-process simulator), and a resumed run draws what the uninterrupted run
drew. The stream is the way: a hybrid way draws over its own row space (its block
and the rows its chunks read, about N / W + halo), not over all N rows, so a row that
two ways read gets one sample in each, as a halo row in graph mode does.

Slots: 0 is the input projection (its dropout over the feature matrix or the stored
values of sparse features), ``l`` (1-based) is layer ``l``'s input dropout, ``L + 1``
the classifier's. Rows are the way's row space (:mod:`gnnpipe.engine.row_space`;
pipeline mode: all N reordered ids).

These are process-free values: the engines decide who draws what.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["EpochMasks", "LANE_WIDTHS", "MaskRows", "PackedKeep", "draw_keep", "draw_packed", "keep_threshold",
           "lane_bits", "mask_seed"]

_MASK64 = (1 << 64) - 1


#: The lane widths :func:`draw_keep` reads its random words in: a lane of ``b`` bits
#: gives a keep probability that is a multiple of ``2^-b``, exactly.
LANE_WIDTHS = (1, 2, 4, 8, 16)


def lane_bits(p: float) -> int:
    """The width of the uniform integer lanes ``draw_keep`` compares for ``p``: the
    narrowest of 1, 2, 4 and 8 bits on which ``p`` is exact (``p`` a multiple of
    ``2^-b``: 1 bit for the usual 0.5, 2 for 0.25, 8 for 3/256), else 16 (``p`` rounded to
    a multiple of 2^-16, within 2^-17). Narrower lanes take fewer random bits."""
    for bits in LANE_WIDTHS[:-1]:
        if (float(p) * (1 << bits)).is_integer():
            return bits
    return 16


def keep_threshold(p: float, bits: int = 16) -> int:
    """The signed ``bits``-bit lane value from which a lane is kept: a lane ``v``
    (uniform over the 2^bits values, read as a two's-complement integer) is kept when
    ``v >= keep_threshold(p, bits)``, with probability ``1 - round(p * 2^bits) / 2^bits``."""
    levels = 1 << bits
    return min(round(p * levels), levels - 1) - levels // 2


_PACKED = {8: torch.int64, 4: torch.int32, 2: torch.int16}
_byte_tables: dict[tuple[int, int, torch.device], Tensor] = {}


def _byte_table(bits: int, threshold: int, device: torch.device) -> Tensor:
    """For lanes narrower than a byte: entry ``u`` (a random byte) is the keep flags
    of its ``8 / bits`` lanes, low bits first, as one integer of that many bytes (a
    gather of it writes the flags in lane order). Built once per width, threshold and
    device.

    Shapes: -> [256], an integer type of ``8 / bits`` bytes."""
    key = (bits, threshold, device)
    table = _byte_tables.get(key)
    if table is None:
        per_byte = 8 // bits
        lanes = (torch.arange(256).unsqueeze(1) >> (torch.arange(per_byte) * bits)) & ((1 << bits) - 1)
        signed = torch.where(lanes >= 1 << (bits - 1), lanes - (1 << bits), lanes)
        flags = (signed >= threshold).to(torch.uint8).contiguous()  # [256, per_byte]
        table = _byte_tables[key] = flags.view(_PACKED[per_byte]).view(256).to(device)
    return table


@dataclass(frozen=True)
class PackedKeep:
    """A keep mask as the random words it was cut from: ``bits`` bits an entry instead
    of a bool's 8, unpacked (:meth:`unpack`) where it is applied.

    Dropout keeps its mask from forward to backward; in a pipelined stage that is a
    mask over the own and halo rows of every layer of every chunk in flight (on the
    200k systems graph at C = 8 a stage reads 4.4 N rows a layer). At the usual p = 0.5
    the words are one bit an entry: an eighth of the bool mask.

    Shapes: words int64 [ceil(numel * bits / 64)]; unpack() -> ``shape``, bool.
    """

    words: Tensor
    shape: tuple[int, ...]
    bits: int
    threshold: int

    @property
    def nbytes(self) -> int:
        """Bytes of the words (what saving this costs)."""
        return self.words.numel() * self.words.element_size()

    def unpack(self) -> Tensor:
        """The bool mask: lanes of ``bits`` bits, low bits first, kept from ``threshold``."""
        numel = math.prod(self.shape)
        if self.bits >= 8:
            lanes = self.words.view(torch.int8 if self.bits == 8 else torch.int16)[:numel]
            return lanes.view(self.shape) >= self.threshold
        per_byte = 8 // self.bits
        random_bytes = self.words.view(torch.uint8)[:(numel + per_byte - 1) // per_byte]
        flags = _byte_table(self.bits, self.threshold, self.words.device).index_select(0, random_bytes.to(torch.int32))
        return flags.view(torch.uint8)[:numel].view(torch.bool).view(self.shape)


def draw_packed(shape: tuple[int, ...] | torch.Size, p: float, *, generator: torch.Generator | None = None,
                device: torch.device | str | None = None, bits: int | None = None) -> PackedKeep:
    """The random words of :func:`draw_keep`'s mask, not yet unpacked (same arguments,
    same draws: ``draw_packed(...).unpack() == draw_keep(...)``)."""
    numel = math.prod(shape)
    bits = lane_bits(p) if bits is None else int(bits)
    per_word = 64 // bits
    words = torch.empty((numel + per_word - 1) // per_word, dtype=torch.int64, device=device)
    words.random_(-(1 << 63), None, generator=generator)
    return PackedKeep(words, tuple(int(n) for n in shape), bits, keep_threshold(p, bits))


def draw_keep(shape: tuple[int, ...] | torch.Size, p: float, *, generator: torch.Generator | None = None,
              device: torch.device | str | None = None, bits: int | None = None) -> Tensor:
    """A bool keep mask of ``shape``: each entry True with probability ``1 - p`` (``p``
    rounded to a multiple of 2^-16; exact where it is a multiple of 2^-8), independently.

    Why not ``torch.rand(shape) >= p``: a float draw costs one generator call per entry
    and was the largest cost of dropout on the CPU (a pipeline stage draws per layer for
    every row it reads). Here each 64-bit draw (all 64 bits uniform: ``random_`` over
    the full int64 range) is cut into lanes of :func:`lane_bits` bits, each compared
    with a threshold: four 16-bit lanes, eight 8-bit ones, or, where ``p`` is exact on
    fewer bits, 16, 32 or 64 lanes (the usual 0.5 takes one bit an entry). Lanes of 8
    and 16 bits are compared as they lie; narrower ones are read a byte at a time from
    a 256-entry table of the byte's keep flags (:func:`_byte_table`). Measured per stage
    layer on BlogCatalog (the mask draw over 8 chunks' own and halo rows, one thread,
    bench/results/chunk_overhead_1bit.json): 16-bit lanes 4.4 ms, 8-bit 3.2 ms, 1-bit
    0.6 ms.

    ``bits`` forces the lane width (one of :data:`LANE_WIDTHS`; for benchmarks): by
    default :func:`lane_bits`.

    Shapes: -> ``shape``, bool.
    """
    return draw_packed(shape, p, generator=generator, device=device, bits=bits).unpack()


def _splitmix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def mask_seed(seed: int, epoch: int, slot: int, stream: int = 0) -> int:
    """The generator seed of ``(seed, epoch, slot, stream)``: a 63-bit mix of the
    four, so that neighbouring epochs, slots and streams get unrelated draws."""
    z = _splitmix64(int(seed) & _MASK64)
    for key in (epoch, slot, stream):
        z = _splitmix64(z ^ (int(key) & _MASK64))
    return z >> 1


@dataclass(frozen=True)
class MaskRows:
    """Rows ``rows`` of a keep mask, gathered when dropout applies them, in forward and
    again in backward, so that no gathered copy is kept between the two.

    A stage's chunks read own and halo rows (3.4x the own rows on the 200k synthetic
    graph at C = 8, 6.4 N rows a layer on BlogCatalog): keeping each chunk's gathered
    mask until its backward would hold that many bytes per layer; the stage holds its
    layers' N-row masks instead, and gathering a bool row is cheap.

    Shapes: mask [n, d] bool; rows int64 [m] (or a slice of m rows); gathered [m, d].
    """

    mask: Tensor
    rows: Tensor | slice

    def gather(self) -> Tensor:
        return self.mask[self.rows] if isinstance(self.rows, slice) else self.mask.index_select(0, self.rows)

    def head(self, m: int) -> "MaskRows":
        """The first ``m`` of the rows (a layer that reads only its own rows)."""
        return MaskRows(self.mask, self.rows[:m] if not isinstance(self.rows, slice)
                        else slice(self.rows.start, self.rows.start + m))


class EpochMasks:
    """The dropout masks of one epoch.

    Args:
        seed: the run's seed.
        epoch: the epoch's index (as the schedule's chunk orders use it).
        device: where the masks are drawn and kept.
        stream: the way whose rows the masks cover.

    ``keep(slot, num_rows, width, p)`` is the bool keep mask of a slot for dropout
    probability ``p`` (drawn on first use, then kept for the epoch: the backward
    gathers its rows again);
    ``generator(slot)`` a fresh generator for a draw of another shape (the input
    projection's).

    Shapes: keep -> [num_rows, width] bool, True where the entry is kept.
    """

    def __init__(self, seed: int, epoch: int, device: torch.device | str, stream: int = 0) -> None:
        self.seed, self.epoch, self.stream = int(seed), int(epoch), int(stream)
        self.device = torch.device(device)
        self._keep: dict[int, Tensor] = {}

    def generator(self, slot: int) -> torch.Generator:
        g = torch.Generator(device=self.device)
        g.manual_seed(mask_seed(self.seed, self.epoch, slot, self.stream))
        return g

    def keep(self, slot: int, num_rows: int, width: int, p: float) -> Tensor:
        mask = self._keep.get(slot)
        if mask is None:
            mask = self._keep[slot] = draw_keep((num_rows, width), p, generator=self.generator(slot),
                                                device=self.device)
        return mask
