"""Which rows a way holds, and which of them it exchanges with the other ways (plans).

Both are frozen data built from the chunk plans and the layout, without processes.

* :class:`WayRowSpace`: row ``r`` of a way's buffers ``B_l``, ``G_l``, ``h0`` and its
  evaluation tensors is global row ``way_rows[r]``: first the way's block of chunks
  (contiguous global rows ``r0 .. r0 + n_block``), then the rows of other ways'
  blocks that its chunks read, sorted. A way never touches any other row, so its
  buffers need no more (hybrid: about N / W + halo rows per layer instead of N).
  Pipeline mode (one way) is the identity: all N rows in order.
* :class:`WayExchangePlan` (hybrid, W > 1): ``send_rows[k][w]`` for a chunk k of this
  way are the rows of k that chunks of way w read; ``recv_rows[k]`` for a chunk k of
  another way are the rows of k that this way's chunks read; both in this way's row
  space. Summed over chunks and ways, either is ``M_W``, the rows exchanged per layer.
* :class:`GradRows`: the rows of a way's row space that a read can give a gradient:
  the halo rows of its chunks and (hybrid) the rows of its block that other ways read.
  A stage's gradient buffers ``G_l`` hold only these rows (slots), not all
  ``n_rows``: the other rows are read by no other chunk, so their ``G_l`` rows would
  stay zero. On the 200k systems graph they are 71 % of N at C = 2 and 86 % at C = 8
  (a random graph: METIS finds no good cut); on a graph with a good cut, far fewer.
* :class:`EpochGradPlan` (pipeline, one way): fewer still. In an epoch only the rows
  of a chunk that a *later* chunk of the order reads get a gradient (a read of a later
  chunk's row is stale, and its gradient is dropped), so the slots are assigned per
  epoch from the order, and a stale read's row maps to one trash slot (the stage adds
  nothing there: it skips the stale rows' gradient, which it drops). Whatever
  the order, the last chunk's rows need none: ``G_l`` holds ``boundary - min_j
  boundary_j`` slots (half the boundary at C = 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

__all__ = ["WayRowSpace", "WayExchangePlan", "GradRows", "EpochGradPlan", "build_row_space",
           "boundary_rows", "build_exchange_plan", "build_grad_rows", "build_epoch_grad_plan", "exchange_in_slots"]


@dataclass(frozen=True)
class WayRowSpace:
    """The rows one way holds (module docstring).

    Shapes: way_rows int64 [n_rows]; row_of int64 [N] (-1 for rows the way does not hold).
    """

    way: int
    r0: int
    n_block: int
    way_rows: Tensor
    row_of: Tensor
    identity: bool

    @property
    def n_rows(self) -> int:
        return int(self.way_rows.numel())

    def rows_of(self, t: Tensor) -> Tensor:
        """The way's rows of a per-vertex tensor (in global row order).

        Shapes: t [N, ...] -> [n_rows, ...]."""
        return t if self.identity else t.index_select(0, self.way_rows)


def build_row_space(plans: Sequence, blocks: Sequence[Sequence[int]], way: int, num_nodes: int) -> WayRowSpace:
    """The row space of ``way`` (``blocks`` from :meth:`Layout.way_blocks`)."""
    mine = blocks[way]
    r0, r1 = plans[mine[0]].row_start, plans[mine[-1]].row_end
    halo = torch.cat([plans[k].halo_global_nid for k in mine])
    foreign = torch.unique(halo[(halo < r0) | (halo >= r1)])  # sorted
    way_rows = torch.cat([torch.arange(r0, r1), foreign])
    row_of = torch.full((num_nodes,), -1, dtype=torch.int64)
    row_of[way_rows] = torch.arange(way_rows.numel())
    return WayRowSpace(way=way, r0=r0, n_block=r1 - r0, way_rows=way_rows, row_of=row_of,
                       identity=bool(torch.equal(way_rows, torch.arange(num_nodes))))


@dataclass(frozen=True)
class WayExchangePlan:
    """The hybrid exchange lists of one way (module docstring), on the device.

    Shapes: send_rows[k][w] int64 [n_kw]; recv_rows[k] int64 [n_k] (row-space ids).
    """

    send_rows: dict[int, dict[int, Tensor]]
    recv_rows: dict[int, Tensor]


def build_exchange_plan(plans: Sequence, blocks: Sequence[Sequence[int]], rows: WayRowSpace,
                        num_nodes: int, device: torch.device) -> WayExchangePlan:
    """The exchange lists of the way of ``rows``; RuntimeError if a row its chunks
    read lies outside its row space (cannot happen for a row space built by
    :func:`build_row_space` from the same plans: that would be a bug)."""
    num_ways = len(blocks)
    way_of = torch.empty(len(plans), dtype=torch.int64)
    for w, blk in enumerate(blocks):
        way_of[list(blk)] = w
    reads = torch.zeros(num_ways, num_nodes, dtype=torch.bool)
    for k, p in enumerate(plans):
        reads[int(way_of[k]), p.halo_global_nid] = True
    send_rows: dict[int, dict[int, Tensor]] = {}
    recv_rows: dict[int, Tensor] = {}
    for k, p in enumerate(plans):
        wk = int(way_of[k])
        own = torch.arange(p.row_start, p.row_end)
        if wk == rows.way:
            send_rows[k] = {w: rows.row_of[own[reads[w, p.row_start:p.row_end]]].to(device)
                            for w in range(num_ways) if w != wk}
        else:
            mine = rows.row_of[own[reads[rows.way, p.row_start:p.row_end]]]
            if bool((mine < 0).any()):
                raise RuntimeError(f"way {rows.way} reads rows of chunk {k} outside its row space "
                                   "(the row space and the exchange plan disagree: a bug)")
            recv_rows[k] = mine.to(device)
    return WayExchangePlan(send_rows=send_rows, recv_rows=recv_rows)


def boundary_rows(plans: Sequence, num_nodes: int) -> tuple[int, ...]:
    """Per chunk, its rows that at least one other chunk reads (the union of the other
    chunks' halos within it).

    Shapes: plans of contiguous chunks over ``num_nodes`` global rows."""
    read = torch.zeros(num_nodes, dtype=torch.bool)
    for p in plans:
        read[p.halo_global_nid] = True
    return tuple(int(read[p.row_start:p.row_end].sum()) for p in plans)


@dataclass(frozen=True)
class GradRows:
    """The gradient slots of one way (module docstring): slot ``s`` is row-space row
    ``rows[s]``, in row-space order, so the slots of a chunk's own rows (contiguous
    rows) are a contiguous range.

    Per chunk ``k`` of the way: ``halo_slot[k]`` the slot of each halo row (in the
    plan's halo order); ``own_slots[k]`` the slice of slots of k's own rows that have
    one; ``own_pos[k]`` their positions among k's own rows, or None when every own row
    has a slot (then ``own_slots[k]`` covers them all, in order).

    ``capacity``: the rows of ``G_l`` (at least ``n_slots``; one more, the trash slot
    at index ``capacity``, when ``trash``). With ``trash`` the slots are those of one
    epoch's order (:class:`EpochGradPlan`) and a stale halo row's ``halo_slot`` is the
    trash slot, so its gradient needs no zeroing; without, every halo row has a slot.

    Shapes: rows int64 [n_slots]; slot_of int64 [n_rows] (-1: no slot);
    halo_slot[k] int64 [num_halo]; own_pos[k] int64 [own rows with a slot].
    """

    rows: Tensor
    slot_of: Tensor
    halo_slot: dict[int, Tensor]
    own_slots: dict[int, slice]
    own_pos: dict[int, Tensor | None]
    capacity: int
    trash: bool = False

    @property
    def n_slots(self) -> int:
        return int(self.rows.numel())

    @property
    def buffer_rows(self) -> int:
        """Rows of a ``G_l``: the capacity, plus the trash slot."""
        return self.capacity + int(self.trash)


def _own_slot_lists(needed: Tensor, plans: Sequence, chunks: Sequence[int], r0: int,
                    device: torch.device) -> tuple[dict[int, slice], dict[int, Tensor | None]]:
    """``own_slots`` and ``own_pos`` of :class:`GradRows` for the chunks ``chunks``."""
    before = torch.cumsum(needed, 0) - needed.to(torch.int64)  # slots of the rows before each row
    own_slots, own_pos = {}, {}
    for k in chunks:
        p = plans[k]
        own_row0 = p.row_start - r0
        pos = needed[own_row0:own_row0 + p.num_own].nonzero().squeeze(1)
        first = int(before[own_row0]) if p.num_own else 0
        own_slots[k] = slice(first, first + int(pos.numel()))
        own_pos[k] = None if int(pos.numel()) == p.num_own else pos.to(device)
    return own_slots, own_pos


def build_grad_rows(plans: Sequence, blocks: Sequence[Sequence[int]], rows: WayRowSpace,
                    exchange: WayExchangePlan | None, device: torch.device) -> GradRows:
    """The gradient slots of the way of ``rows`` (``exchange``: its hybrid plan, None
    with one way)."""
    mine = blocks[rows.way]
    needed = torch.zeros(rows.n_rows, dtype=torch.bool)
    for k in mine:
        needed[rows.row_of[plans[k].halo_global_nid]] = True
    if exchange is not None:
        for per_way in exchange.send_rows.values():
            for r in per_way.values():
                needed[r.cpu()] = True
    slot_rows = needed.nonzero().squeeze(1)
    slot_of = torch.full((rows.n_rows,), -1, dtype=torch.int64)
    slot_of[slot_rows] = torch.arange(slot_rows.numel())
    halo_slot = {k: slot_of[rows.row_of[plans[k].halo_global_nid]].to(device) for k in mine}
    own_slots, own_pos = _own_slot_lists(needed, plans, mine, rows.r0, device)
    return GradRows(rows=slot_rows, slot_of=slot_of, halo_slot=halo_slot, own_slots=own_slots, own_pos=own_pos,
                    capacity=int(slot_rows.numel()))


@dataclass(frozen=True)
class EpochGradPlan:
    """The gradient slots of pipeline mode, assigned per epoch from its chunk order
    (module docstring), as data: :meth:`for_order` builds one epoch's :class:`GradRows`.

    Shapes: halo_rows, halo_src, halo_reader int64 [sum of num_halo] (each halo read:
    its row, the chunk owning the row, the chunk reading it); ``halo_offsets`` C + 1
    ints: chunk ``chunks[i]``'s reads are entries ``halo_offsets[i]:halo_offsets[i+1]``.
    """

    plans: tuple
    chunks: tuple[int, ...]
    n_rows: int
    halo_rows: Tensor
    halo_src: Tensor
    halo_reader: Tensor
    halo_offsets: tuple[int, ...]
    capacity: int
    device: torch.device

    @property
    def buffer_rows(self) -> int:
        """Rows of a ``G_l``: the capacity, plus the trash slot."""
        return self.capacity + 1

    def for_order(self, step_of: Tensor) -> GradRows:
        """The slots of an epoch whose chunk ``k`` runs at step ``step_of[k]``: a row of
        chunk j has one when a chunk at a later step reads it (a fresh read); a stale
        read's ``halo_slot`` is the trash slot ``capacity``.

        Shapes: step_of int64 [C] (any device)."""
        steps = step_of.to("cpu")
        fresh = steps[self.halo_src] <= steps[self.halo_reader]
        needed = torch.zeros(self.n_rows, dtype=torch.bool)
        needed[self.halo_rows[fresh]] = True
        slot_rows = needed.nonzero().squeeze(1)
        if slot_rows.numel() > self.capacity:
            raise RuntimeError(f"an epoch's gradient rows ({slot_rows.numel()}) exceed the capacity "
                               f"({self.capacity}): a bug")
        slot_of = torch.full((self.n_rows,), -1, dtype=torch.int64)
        slot_of[slot_rows] = torch.arange(slot_rows.numel())
        read_slot = torch.where(fresh, slot_of[self.halo_rows], self.capacity)
        o = self.halo_offsets
        halo_slot = {k: read_slot[o[i]:o[i + 1]].to(self.device) for i, k in enumerate(self.chunks)}
        own_slots, own_pos = _own_slot_lists(needed, self.plans, self.chunks, 0, self.device)
        return GradRows(rows=slot_rows, slot_of=slot_of, halo_slot=halo_slot, own_slots=own_slots,
                        own_pos=own_pos, capacity=self.capacity, trash=True)


def build_epoch_grad_plan(plans: Sequence, rows: WayRowSpace, device: torch.device) -> EpochGradPlan:
    """The per-epoch slot plan of pipeline mode (one way: ``rows`` is the identity).

    Its capacity, ``boundary - min_j boundary_j``, holds any order's slots: an order's
    slots are the rows of each chunk read by a later one, at most each chunk's boundary
    rows but the last chunk's."""
    if not rows.identity:
        raise ValueError("build_epoch_grad_plan: expected pipeline mode's identity row space (one way)")
    chunks = tuple(range(len(plans)))
    halo_rows = torch.cat([plans[k].halo_global_nid for k in chunks])
    halo_src = torch.cat([plans[k].halo_chunk for k in chunks]).to(torch.int64)
    halo_reader = torch.cat([torch.full((plans[k].num_halo,), k, dtype=torch.int64) for k in chunks])
    offsets = [0]
    for k in chunks:
        offsets.append(offsets[-1] + plans[k].num_halo)
    boundary = boundary_rows(plans, rows.n_rows)
    return EpochGradPlan(plans=tuple(plans), chunks=chunks, n_rows=rows.n_rows, halo_rows=halo_rows,
                         halo_src=halo_src, halo_reader=halo_reader, halo_offsets=tuple(offsets),
                         capacity=sum(boundary) - min(boundary), device=device)


def exchange_in_slots(plan: WayExchangePlan, grad_rows: GradRows) -> WayExchangePlan:
    """``plan`` with its row-space ids replaced by gradient slots: the lists the
    backward exchange uses on ``G_l`` (every row in them has a slot by construction)."""
    def to_slots(r: Tensor) -> Tensor:
        slots = grad_rows.slot_of.to(r.device)[r]
        if bool((slots < 0).any()):
            raise RuntimeError("an exchanged row has no gradient slot (the gradient rows and the "
                               "exchange plan disagree: a bug)")
        return slots

    return WayExchangePlan(
        send_rows={k: {w: to_slots(r) for w, r in per_way.items()} for k, per_way in plan.send_rows.items()},
        recv_rows={k: to_slots(r) for k, r in plan.recv_rows.items()})
