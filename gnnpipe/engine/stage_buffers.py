"""A stage's rows and buffers: which rows of the graph it reads, in which ids, and the
historical buffers ``B_l`` (with their snapshot) and gradient buffers ``G_l`` over them
(DESIGN.md 5; hybrid: 6).

:class:`~gnnpipe.engine.stage.Stage` runs a chunk through its layers; what that chunk
reads and writes is set up once here, from the chunking's plans and the layout, without
any compute:

* the way's **row space** (:mod:`gnnpipe.engine.row_space`: all N rows in pipeline mode;
  in hybrid the way's block, then the rows its chunks read from other ways), and per
  chunk its local rows (own, then halo) and own range in it;
* ``B_l`` [rows, d_{l-1}] for each buffered layer ``l >= 2`` of the stage, and the
  snapshot ``S_l`` (technique 2; with R = 1 the snapshot *is* ``B_l``);
* ``G_l`` over the rows a read can give a gradient (:class:`GradBuffers`);
* in hybrid, the halo exchange with the other ways (:class:`WayExchange`).

With one chunk per way (C = W) a row of another way is read only at the step it
arrives (every read is fresh): ``B_l`` keeps the way's block, and the rows received from
other ways land in one buffer per width shared by the layers (on the 200k-vertex
GCN-32 hybrid default, one instead of 31 layers' worth).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from gnnpipe.engine.grad_buffers import GradBuffers, lendable
from gnnpipe.engine.layout import Layout
from gnnpipe.engine.row_space import (build_epoch_grad_plan, build_exchange_plan, build_grad_rows, build_row_space,
                                      exchange_in_slots)
from gnnpipe.engine.way_exchange import WayExchange

__all__ = ["StageBuffers"]


class StageBuffers:
    """The row space, the per-chunk row ids and the buffers of one (way, stage).

    Attributes (``k`` ranges over the way's chunks; ids are row-space ids unless named):
        rows: the way's :class:`~gnnpipe.engine.row_space.RowSpace`.
        local_ids[k]: chunk k's local rows, own then halo. Shapes: [n_local].
        own[k]: chunk k's own rows, as a slice of the row space.
        halo_chunk[k]: the chunk owning each halo row of k. Shapes: [n_halo].
        B[l], snap[l]: layer l's input over the kept rows (``snap is B`` when R = 1).
            Shapes: [n_kept, d_{l-1}] (n_kept: the block with one chunk per way, else
            every row of the row space).
        foreign[l]: with one chunk per way, the other ways' rows (shared by the layers
            of one width; else empty). Shapes: [n_rows - n_block, d_{l-1}].
        own_ids[k], foreign_ids[k]: with one chunk per way, chunk k's own rows in ``B``
            and its halo rows in ``foreign``.
        grads, G: the gradient buffers (``G is grads.G``, their own buffers); with
            ``lend_grads`` (pipeline mode, synchronous schedule) and chunks whose own rows
            hold a ``G_l``, each ``G_l`` borrows a saved slot per epoch
            (:mod:`gnnpipe.engine.grad_buffers`).
        exchange: hybrid's :class:`WayExchange`; None in pipeline mode.
    """

    def __init__(self, plans: Sequence[Any], layout: Layout, rank: int, comm: Any, *, num_nodes: int,
                 widths: dict[int, int], snapshot_period: int, device: torch.device, dtype: torch.dtype,
                 lend_grads: bool = False) -> None:
        self.device = device
        blocks = layout.way_blocks()
        way = layout.way_of(rank)
        my_chunks = blocks[way]
        self.rows = build_row_space(plans, blocks, way, num_nodes)
        row_of, r0 = self.rows.row_of, self.rows.r0
        self.local_ids = {k: row_of[plans[k].local_global_nid].to(device) for k in my_chunks}
        self.own = {k: slice(plans[k].row_start - r0, plans[k].row_end - r0) for k in my_chunks}
        self.halo_chunk = {k: plans[k].halo_chunk.to(device) for k in my_chunks}
        # The rows of G_l: per epoch from the order in pipeline mode, fixed in hybrid
        # (where a row's gradient may come from another way at the same step).
        self.exchange: WayExchange | None = None
        grad_static = grad_plan = None
        if layout.ways > 1:
            plan = build_exchange_plan(plans, blocks, self.rows, num_nodes, device)
            grad_static = build_grad_rows(plans, blocks, self.rows, plan, device)
            self.exchange = WayExchange(plan, layout, rank, comm, grad_plan=exchange_in_slots(plan, grad_static),
                                        n_block=self.rows.n_block)
        else:
            grad_plan = build_epoch_grad_plan(plans, self.rows, device)

        self.one_chunk_per_way = layout.ways > 1 and all(len(b) == 1 for b in blocks)
        n_rows, nb = self.rows.n_rows, self.rows.n_block
        n_kept = nb if self.one_chunk_per_way else n_rows
        self.B: dict[int, Tensor] = {l: torch.zeros(n_kept, d, device=device, dtype=dtype) for l, d in widths.items()}
        self.foreign: dict[int, Tensor] = {}
        self.own_ids: dict[int, Tensor] = {}
        self.foreign_ids: dict[int, Tensor] = {}
        if self.one_chunk_per_way:
            by_width = {d: torch.zeros(n_rows - nb, d, device=device, dtype=dtype) for d in set(widths.values())}
            self.foreign = {l: by_width[d] for l, d in widths.items()}
            # A chunk's local rows: its own (the whole block), then its halo, all foreign.
            self.foreign_ids = {k: self.local_ids[k][plans[k].num_own:] - nb for k in my_chunks}
            self.own_ids = {k: self.local_ids[k][:plans[k].num_own] for k in my_chunks}
        self.period = int(snapshot_period)
        self.snap = self.B if self.period == 1 else {l: b.clone() for l, b in self.B.items()}
        # Lend only where a slot can hold G_l (grad_buffers.lendable); elsewhere G_l is
        # made here, as before, not in the middle of the first backward's temporaries.
        lend_grads = bool(lend_grads and grad_plan is not None and widths) and lendable(
            min(plans[k].num_own for k in my_chunks), grad_plan.buffer_rows, min(widths.values()),
            dtype.itemsize)
        self.grads = GradBuffers(widths, grad_static, grad_plan, shared=self.one_chunk_per_way,
                                 device=device, dtype=dtype, lend=lend_grads)
        self.G = self.grads.G

    def restore(self, keep_chunks: Sequence[int] = ()) -> None:
        """Start an epoch's ``B_l`` from the snapshot (nothing to do when R = 1), but
        for the own rows of ``keep_chunks``, which keep the values written already (the
        chunks run ahead at a cross-epoch turn)."""
        if self.period == 1:
            return
        keep_rows = None
        if keep_chunks:
            keep_rows = torch.cat([torch.arange(self.own[k].start, self.own[k].stop, device=self.device)
                                   for k in keep_chunks])
        for l, b in self.B.items():
            kept = None if keep_rows is None else b.index_select(0, keep_rows)
            b.copy_(self.snap[l])
            if kept is not None:
                b.index_copy_(0, keep_rows, kept)

    def refresh_snapshot(self) -> None:
        """Technique 2: the snapshot from ``B_l``, after every R-th epoch's forward
        (R = 1: ``B_l`` is the snapshot, nothing to copy)."""
        if self.period != 1:
            for l, b in self.B.items():
                self.snap[l].copy_(b)
