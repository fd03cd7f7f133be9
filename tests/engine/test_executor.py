"""The executor maps every schedule action kind to one stage operation, refuses
anything else, and calls its ``after_compute`` after each chunk's forward and backward
and nowhere else."""

from __future__ import annotations

import typing

import pytest

from gnnpipe.engine import schedule as sch
from gnnpipe.engine.executor import _HANDLERS, execute


def test_every_action_kind_has_a_handler():
    assert set(_HANDLERS) == set(typing.get_args(sch.Action))


def test_an_unknown_action_is_refused():
    with pytest.raises(TypeError, match="schedule action: expected one of the kinds"):
        execute(None, [object()], None)  # type: ignore[arg-type]


class _LoggingStage:
    """A stage whose every operation appends its name to ``log``."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __getattr__(self, name: str):
        return lambda *args: self.log.append(name)


def test_after_compute_runs_after_each_forward_and_backward_only():
    log: list[str] = []
    program = [sch.PostRecvBackward(stage=0, chunk=1, step=0), sch.Forward(stage=0, chunk=0, step=0),
               sch.SendForward(stage=0, chunk=0, step=0), sch.Forward(stage=0, chunk=1, step=1),
               sch.IdleForward(stage=0, step=2), sch.Backward(stage=0, chunk=1, step=0),
               sch.SendBackward(stage=0, chunk=1, step=0), sch.Step(stage=0)]
    execute(_LoggingStage(log), program, None, after_compute=lambda: log.append("trim"))  # type: ignore[arg-type]
    assert log == ["post_recv_backward", "forward", "trim", "send_forward", "forward", "trim", "idle_forward",
                   "backward", "trim", "send_backward", "step"]
    log.clear()
    execute(_LoggingStage(log), program, None)  # type: ignore[arg-type]
    assert "trim" not in log and len(log) == len(program)


def test_the_first_backward_wait_sets_up_the_backward_before_it_waits():
    """At the turn a stage waits for its first gradient: the executor has the stage set
    up its backward (``begin_backward``) first, so that the set-up fills the wait, and
    books only the wait itself, as the turn's bubble; later waits set up nothing."""
    from types import SimpleNamespace

    log: list[str] = []

    class Timer:
        def wait(self, handle, bubble=False):
            log.append(f"wait {handle} bubble={bubble}")

    st = SimpleNamespace(recv_b={1: ("h1", None), 0: ("h0", None)}, first_bwd_wait=True, timer=Timer())
    program = [sch.WaitRecvBackward(stage=0, chunk=1, step=1), sch.Backward(stage=0, chunk=1, step=1),
               sch.WaitRecvBackward(stage=0, chunk=0, step=0), sch.Backward(stage=0, chunk=0, step=0)]
    execute(_LoggingStage(log), program, st)  # type: ignore[arg-type]
    assert log == ["begin_backward", "wait h1 bubble=True", "backward", "wait h0 bubble=False", "backward"]
