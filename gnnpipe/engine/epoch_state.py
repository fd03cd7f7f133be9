"""What one pipelined epoch accumulates, made fresh at the start of every epoch.

A stage's lasting state (its layers, optimizer and historical buffers) lives in
:class:`gnnpipe.engine.stage.Stage`; everything that exists only for the length of
one epoch (the chunk order, posted receives, outstanding sends, the autograd state
saved between a chunk's forward and its backward, the loss, the encode output of
stage 0, the time split) lives here, so that nothing of one epoch can leak into the
next and no attribute appears only after a call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gnnpipe.engine.encode_groups import Encoded

__all__ = ["StageTimer", "Encoded", "EpochState"]


class StageTimer:
    """Blocked-time bookkeeping of one epoch: every wait is bubble or comm wait.

    ``bubble`` is the pipeline fill/drain (the wait for the first forward input, the
    turn from forward to backward, the wait for the last stage's loss); every other
    blocked wait is ``comm_s``.
    """

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.bubble = 0.0
        self.comm_s = 0.0

    def _book(self, dt: float, bubble: bool) -> None:
        if bubble:
            self.bubble += dt
        else:
            self.comm_s += dt

    def wait(self, handle: Any, bubble: bool = False) -> None:
        if handle is None:
            return
        t0 = time.perf_counter()
        self.comm.wait(handle)
        self._book(time.perf_counter() - t0, bubble)

    def timed(self, fn: Any, *args: Any, bubble: bool = False, **kw: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*args, **kw)
        self._book(time.perf_counter() - t0, bubble)
        return out


@dataclass
class EpochState:
    """One epoch of one stage.

    Attributes:
        orders: the chunk order of every way (``orders[way][t]``).
        step_of: int64 [C] on the device: the step at which each chunk runs.
        steps: the same on the host (a tuple), for the decisions a stage takes per
            chunk without reading the device.
        timer: this epoch's :class:`StageTimer`.
        recv_f / recv_b: chunk -> (handle, buffer) of posted forward / backward receives.
        sends: outstanding isend handles (waited by ``WaitSends``).
        forward_sends: those of them that carry this epoch's forward messages
            (waited, and the messages freed, at the stage's first backward).
        saved: chunk -> what its backward needs (per-layer outputs and gradient sinks,
            h0 rows, the loss on the last stage, then the gradient message to send).
        loss_sum: the last stage's summed chunk losses (a tensor on the device once
            a chunk has added its loss; read once, at the end of the epoch).
        logits: chunk -> detached logits (last stage).
        first_fwd_wait / first_bwd_wait: whether the next forward / backward wait is
            the first of the epoch (booked as bubble).
        h0: stage 0's :class:`Encoded` ``encode(X)`` (made by the stage's
            ``begin_epoch``; its rows are projected group by group as chunks first
            read them: :mod:`gnnpipe.engine.encode_groups`).
        drift: 1-based layer -> [sum of squared (fresh - historical), sum of squared
            fresh] over the sampled rows (:meth:`add_drift`, called by the stage's forward),
            a tensor [2] on the device, read once at the end of the epoch.
        epoch: the epoch's index (the chunk orders' and the dropout masks' key).
        masks: the epoch's dropout masks (:class:`gnnpipe.models.masks.EpochMasks`),
            made by the stage's ``begin_epoch`` with ``dropout_masks = row`` (else
            None: each layer call draws its own); the backward reads them too.

    Cross-epoch overlap (``parallel.cross_epoch_chunks``; :mod:`gnnpipe.engine.cross_epoch`):
        next: the next epoch's state, made by the runner when this epoch's turn runs
            the next epoch's first chunks ahead (their saved autograd state, sends and
            encode go there).
        refresh_snapshot: whether the snapshot is refreshed from ``B`` after this
            epoch's forward (every R-th epoch); done at the turn when it runs ahead.
        begun: the stage's ``begin_next`` has set this epoch up at the previous turn.
        ahead: this epoch's chunks that ran ahead at the previous turn, in order.
        stash: the weights they used, as leaves whose gradients this epoch's step adds
            to the parameters'; None if none.
        h0_ahead: stage 0's encode with the stash, which the ahead chunks read (the
            others read ``h0``, encoded after the step).
        history: where this epoch's stale reads come from while its start values are
            not yet in ``B`` (R > 1, at the previous turn: the snapshot); None: ``B``.
        backward_begun: the stage's ``begin_backward`` has run (once per epoch).
    """

    orders: tuple[tuple[int, ...], ...]
    step_of: Tensor
    timer: StageTimer
    recv_f: dict[int, tuple[Any, Tensor]] = field(default_factory=dict)
    recv_b: dict[int, tuple[Any, Tensor]] = field(default_factory=dict)
    sends: list[Any] = field(default_factory=list)
    forward_sends: list[Any] = field(default_factory=list)
    saved: dict[int, dict[str, Any]] = field(default_factory=dict)
    loss_sum: float | Tensor = 0.0
    logits: dict[int, Tensor] = field(default_factory=dict)
    first_fwd_wait: bool = True
    first_bwd_wait: bool = True
    h0: Encoded | None = None
    drift: dict[int, Tensor] = field(default_factory=dict)
    epoch: int = 0
    masks: Any = None
    next: "EpochState | None" = None
    refresh_snapshot: bool = False
    begun: bool = False
    ahead: tuple[int, ...] = ()
    stash: dict[str, Tensor] | None = None
    h0_ahead: Encoded | None = None
    history: dict[int, Tensor] | None = None
    backward_begun: bool = False
    steps: tuple[int, ...] = ()

    def add_drift(self, l: int, fresh: Tensor, old: Tensor) -> None:
        """Add layer ``l``'s drift terms of some rows: ``fresh`` the values a chunk
        writes now, ``old`` what the buffer held for those rows, which every stale read
        of them this epoch saw (a measure of how far stale reads are from fresh ones,
        reported per layer and epoch as ``history_drift``).

        Shapes: fresh, old [m, d_l]."""
        sums = torch.stack([(fresh - old).square().sum(), fresh.square().sum()])
        self.drift[l] = self.drift[l] + sums if l in self.drift else sums

    def drift_sums(self, num_layers: int) -> tuple[float, ...]:
        """``(num_1, den_1, ..., num_L, den_L)``: the epoch's drift sums for every layer
        of the model (zeros for layers without any), one device read."""
        out = [0.0] * (2 * num_layers)
        if self.drift:
            layers = sorted(self.drift)
            for l, (num, den) in zip(layers, torch.stack([self.drift[l] for l in layers]).tolist()):
                out[2 * (l - 1)], out[2 * (l - 1) + 1] = num, den
        return tuple(out)
