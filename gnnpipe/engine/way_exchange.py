"""The hybrid halo exchange between the ways of one stage (DESIGN.md 6).

Every way pipelines its own block of chunks, all ways at the same step. At every
layer ``l >= 2`` of step ``t``, before the layer runs, a stage sends the rows of its
current chunk that chunks of other ways read to the peers of its stage (kind
``halo_rows``), and writes the rows it receives into its ``B_l``: fresh from this step
on, the older values are history. In backward, at the same step and layer, the
gradient that a way's fresh reads gave to those rows goes back to the owner way
(``halo_gradients``). For exact inference every layer's whole block is exchanged at
once (kind ``evaluation``). Pipeline mode (one way) never builds a :class:`WayExchange`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from gnnpipe.engine.layout import Layout
from gnnpipe.engine.row_space import WayExchangePlan

__all__ = ["WayExchange"]


class WayExchange:
    """One rank's side of the exchange with the same stage of the other ways.

    ``timed(fn, *args)`` runs a blocking transfer and books its time (the executor's
    timer): every exchange is a wait on other ranks.
    """

    def __init__(self, plan: WayExchangePlan, layout: Layout, rank: int, comm: Any,
                 grad_plan: WayExchangePlan | None = None, n_block: int = 0) -> None:
        self.plan = plan
        # The same lists in the ids of the gradient buffers (``G_l`` holds only the
        # rows a read can give a gradient: row_space.GradRows); default: row space.
        self.grad_plan = plan if grad_plan is None else grad_plan
        # The received rows' ids in a buffer of the other ways' rows only (row r of the
        # row space at r - n_block), for ``rows(..., foreign=)``.
        self.recv_foreign = {k: r - n_block for k, r in plan.recv_rows.items()}
        self.comm = comm
        self.way = layout.way_of(rank)
        self.blocks = layout.way_blocks()
        self.peers = {w: layout.way_peer(rank, w) for w in range(layout.ways) if w != self.way}

    @staticmethod
    def _chunk_at(orders: Sequence[Sequence[int]], way: int, t: int) -> int | None:
        o = orders[way]
        return o[t] if t < len(o) else None

    def rows(self, buf: Tensor, orders: Sequence[Sequence[int]], t: int, my_chunk: int | None,
             kind: str, timed: Callable[..., Any], foreign: Tensor | None = None) -> None:
        """Forward exchange at step ``t``: send the rows of ``my_chunk`` (None on an
        idle step) that each other way reads, receive theirs into ``buf``, or into
        ``foreign``, a buffer of the other ways' rows only (row ``r`` of the row space
        at ``r - n_block``).

        Shapes: buf [n_rows, d] (B_l, in the way's row space; [n_block, d] with
        ``foreign``); foreign [n_rows - n_block, d]."""
        sends, recvs, places = {}, {}, []
        for w, peer in self.peers.items():
            if my_chunk is not None:
                sends[peer] = buf.index_select(0, self.plan.send_rows[my_chunk][w])
            k2 = self._chunk_at(orders, w, t)
            if k2 is not None:
                rows = self.plan.recv_rows[k2]
                r = torch.empty(rows.numel(), buf.shape[1], device=buf.device, dtype=buf.dtype)
                recvs[peer] = r
                places.append((k2, r))
        timed(self.comm.exchange, sends, recvs, kind)
        for k2, r in places:
            if foreign is None:
                buf.index_copy_(0, self.plan.recv_rows[k2], r)
            else:
                foreign.index_copy_(0, self.recv_foreign[k2], r)

    def grads(self, G: Tensor, orders: Sequence[Sequence[int]], t: int, my_chunk: int | None,
              timed: Callable[..., Any]) -> None:
        """Backward exchange at step ``t``: send to each other way the gradient that my
        fresh reads gave to the rows of its chunk at step t (complete: my reads at later
        steps were back-propagated already, reads at step t just now); add what the
        other ways send for my chunk's rows.

        Shapes: G [n_slots, d] (G_l, in the ids of ``grad_plan``)."""
        plan = self.grad_plan
        sends, recvs = {}, {}
        for w, peer in self.peers.items():
            k2 = self._chunk_at(orders, w, t)
            if k2 is not None:
                sends[peer] = G.index_select(0, plan.recv_rows[k2])
            if my_chunk is not None:
                rows = plan.send_rows[my_chunk][w]
                recvs[peer] = torch.empty(rows.numel(), G.shape[1], device=G.device, dtype=G.dtype)
        timed(self.comm.exchange, sends, recvs, "halo_gradients")
        if my_chunk is not None:
            for w, peer in self.peers.items():
                G.index_add_(0, plan.send_rows[my_chunk][w], recvs[peer])

    def block(self, h: Tensor, timed: Callable[..., Any]) -> None:
        """Exact inference: every row of the way's block that other ways read, at once
        (kind ``evaluation``), written into ``h``.

        Shapes: h [n_rows, d]."""
        sends, recvs, places = {}, {}, []
        for w, peer in self.peers.items():
            mine = [self.plan.send_rows[k][w] for k in self.blocks[self.way]]
            sends[peer] = h.index_select(0, torch.cat(mine))
            theirs = torch.cat([self.plan.recv_rows[k] for k in self.blocks[w]])
            r = torch.empty(theirs.numel(), h.shape[1], device=h.device, dtype=h.dtype)
            recvs[peer] = r
            places.append((theirs, r))
        timed(self.comm.exchange, sends, recvs, "evaluation")
        for rows, r in places:
            h.index_copy_(0, rows, r)
