"""The runtime that executes one stage's program of a pipeline schedule.

A :class:`~gnnpipe.engine.schedule.PipelineSchedule` is data (a tuple of actions per
stage); a :class:`~gnnpipe.engine.stage.Stage` owns buffers, transfers and the chunk
compute. :func:`execute` walks the stage's actions in order and calls the stage for
each, booking the blocked time of every wait in the epoch's timer: nothing else. It
is the only place that knows which action kind maps to which stage operation, as
``torch.distributed.pipelining`` keeps its schedule runtime apart from its stage.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from gnnpipe.engine import schedule as sch
from gnnpipe.engine.epoch_state import EpochState
from gnnpipe.engine.stage import Stage
from gnnpipe.engine.trace import ActionTrace

__all__ = ["execute"]


def _for(st: EpochState, a: Any) -> EpochState:
    """The epoch an action is of: this one, or the next (an ``ahead`` action at the
    turn, whose state the runner made and passed as ``st.next``)."""
    return st.next if getattr(a, "ahead", False) else st  # type: ignore[return-value]


def _wait_forward(stage: Stage, st: EpochState, a: sch.WaitRecvForward) -> None:
    if a.ahead:  # at the turn: the rest of the turn's wait (booked as this epoch's bubble)
        st.timer.wait(st.next.recv_f[a.chunk][0], bubble=True)  # type: ignore[union-attr]
        return
    st.timer.wait(st.recv_f[a.chunk][0], bubble=st.first_fwd_wait)  # the first: pipeline fill
    st.first_fwd_wait = False


def _wait_backward(stage: Stage, st: EpochState, a: sch.WaitRecvBackward) -> None:
    if st.first_bwd_wait:  # the turn: the backward's set-up fills the wait (compute, not bubble)
        stage.begin_backward(st)
    st.timer.wait(st.recv_b[a.chunk][0], bubble=st.first_bwd_wait)  # the first: the turn
    st.first_bwd_wait = False


def _wait_sends(stage: Stage, st: EpochState, a: sch.WaitSends) -> None:
    for h in st.sends:
        st.timer.wait(h)
    st.sends = []


#: Action kind -> what the stage does for it.
_HANDLERS: dict[type, Callable[[Stage, EpochState, Any], None]] = {
    sch.PostRecvForward: lambda stage, st, a: stage.post_recv_forward(_for(st, a), a.chunk),
    sch.WaitRecvForward: _wait_forward,
    sch.Forward: lambda stage, st, a: stage.forward(_for(st, a), a.chunk, a.step),
    sch.SendForward: lambda stage, st, a: stage.send_forward(_for(st, a), a.chunk),
    sch.PostRecvBackward: lambda stage, st, a: stage.post_recv_backward(st, a.chunk),
    sch.WaitRecvBackward: _wait_backward,
    sch.Backward: lambda stage, st, a: stage.backward(st, a.chunk, a.step),
    sch.SendBackward: lambda stage, st, a: stage.send_backward(st, a.chunk),
    sch.IdleForward: lambda stage, st, a: stage.idle_forward(st, a.step),
    sch.IdleBackward: lambda stage, st, a: stage.idle_backward(st, a.step),
    sch.BeginNext: lambda stage, st, a: stage.begin_next(st, st.next),
    sch.WaitSends: _wait_sends,
    sch.Step: lambda stage, st, a: stage.step(st),
}


#: The actions after which ``execute`` calls its ``after_compute``.
COMPUTE_ACTIONS = (sch.Forward, sch.Backward)


def execute(stage: Stage, program: Iterable[sch.Action], st: EpochState,
            after_compute: Callable[[], None] | None = None, trace: ActionTrace | None = None) -> None:
    """Run ``program`` (``schedule.for_stage(stage_idx)``) on ``stage`` for epoch ``st``;
    ``after_compute`` (if given) after each chunk's forward and backward: the worker's
    heap trim (:func:`gnnpipe.engine.host_heap.heap_trimmer`), its time the stage's;
    ``trace`` (if given) records every action (:mod:`gnnpipe.engine.trace`)."""
    for a in program:
        handler = _HANDLERS.get(type(a))
        if handler is None:
            raise TypeError(f"schedule action: expected one of the kinds of gnnpipe.engine.schedule, found {a!r}")
        if trace is None:
            handler(stage, st, a)
        else:
            with trace.span(a, _for(st, a).epoch):
                handler(stage, st, a)
        if after_compute is not None and isinstance(a, COMPUTE_ACTIONS):
            after_compute()
