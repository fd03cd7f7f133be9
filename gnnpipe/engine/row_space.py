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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

__all__ = ["WayRowSpace", "WayExchangePlan", "build_row_space", "build_exchange_plan"]


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
