"""Exact full-graph inference through the stages (no stale reads).

Used for evaluation and for the exact history start (technique: ``history_init =
exact``). Stage s receives the way's layer input from s-1, computes its layers over
the way's chunks layer by layer (hybrid: exchanging the rows other ways read before
every layer >= 2), and sends on. Every transfer is kind ``evaluation``. With
``capture`` the exact layer inputs are stored as the snapshots ``S_l``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnpipe.engine.epoch_state import StageTimer
from gnnpipe.engine.stage import TAG_FWD, Stage

__all__ = ["exact_forward"]


@torch.no_grad()
def exact_forward(stage: Stage, timer: StageTimer, capture: bool) -> Tensor | None:
    """The logits of the way's block on the last stage, None on the others.

    Shapes: -> [n_block, num_classes] (rows ``r0 .. r0 + n_block`` of the graph)."""
    model = stage.model
    was = model.training
    model.eval()
    try:
        nb, n_rows = stage.rows.n_block, stage.rows.n_rows
        d_in = stage.dims[stage.a]
        dev, dt = stage.device, stage.dtype
        if stage.first:
            h0 = model.encode(stage.x)
            h = h0.clone()
        else:
            buf = torch.empty(nb, stage.boundary_width(stage.a), device=dev, dtype=dt)
            if buf.numel():
                timer.wait(stage.comm.irecv(buf, stage.prev_rank, "evaluation", TAG_FWD))
            h = torch.zeros(n_rows, d_in, device=dev, dtype=dt)
            h[:nb] = buf[:, :d_in]
            h0 = None
            if stage.needs_h0:
                h0 = torch.zeros(n_rows, stage.h0_dim, device=dev, dtype=dt)
                h0[:nb] = buf[:, d_in:]
        for i in range(stage.a, stage.b):
            l = i + 1
            layer = model.layers[i]
            if l >= 2 and stage.exchange is not None:
                # All rows of the way's block that other ways read, at once.
                stage.exchange.block(h, timer.timed)
            if capture and l >= 2:
                stage.snap[l].copy_(h[: stage.snap[l].shape[0]])  # one chunk per way: the block
            out = torch.zeros(n_rows, stage.dims[l], device=dev, dtype=dt)
            for k in stage.my_chunks:
                own = stage.own[k]
                out[own] = layer(h.index_select(0, stage.local_ids[k]), stage.ops[k],
                                 h0[own] if layer.needs_h0 else None)  # type: ignore[index]
            h = out
        if not stage.last:
            msg = h[:nb]
            if stage.needs_h0:
                msg = torch.cat([msg, h0[:nb]], dim=1)  # type: ignore[index]
            if msg.numel():
                timer.wait(stage.comm.isend(msg, stage.next_rank, "evaluation", TAG_FWD))
            return None
        return model.decode(h[:nb])
    finally:
        model.train(was)
