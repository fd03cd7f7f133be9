"""A stage's timeline: every action of its schedule in every training epoch, as Chrome
trace events (``train.trace_dir``; pipeline and hybrid mode).

An epoch's time split (compute, comm wait, bubble) says how much time went where; a
timeline says when, and which chunk. On the 200,000-vertex GCN-32 at C = 8 it showed
stage 0's long bubble to be its wait at the turn for stage 1's first backward, which
took tens of thousands of page faults in every epoch where most other chunks took none
(bench/results/trace_200k/).

Each worker appends its events to ``trace-rank{R}.json`` after every epoch (flushed,
so a dead run keeps the epochs it finished), in Chrome's JSON array format, whose
closing bracket is optional: open a file in https://ui.perfetto.dev or
``chrome://tracing``, or all of a run's at once after :func:`merge_traces`. An event
is one action (:mod:`gnnpipe.engine.schedule`), or the loss all-reduce that ends the
epoch (``LossAllReduce``: the last stage's total, where the other stages wait for the
pipeline to drain): ``name`` its kind, ``ts``/``dur`` in
microseconds of the wall clock (so that the ranks of one host line up), ``pid`` the
rank, ``args`` the epoch (1-based, as in the record), chunk, step, whether it ran
ahead at a turn and the minor page faults the worker took meanwhile (where the OS
counts them). A new run in the same folder starts the files afresh.

On a GPU each action is followed by a device synchronisation, so that its duration is
the device's, not the host's enqueue time; that removes the overlap of consecutive
actions, so a traced epoch there is slower than an untraced one.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator

try:
    import resource
except ImportError:  # pragma: no cover - not on Windows
    resource = None  # type: ignore[assignment]

__all__ = ["ActionTrace", "action_trace", "merge_traces", "TRACED_MODES", "FILE_PATTERN"]

#: The modes whose workers run a schedule of actions.
TRACED_MODES = ("pipeline", "hybrid")
#: A worker's file in ``train.trace_dir``.
FILE_PATTERN = "trace-rank{rank}.json"


def _minor_faults() -> int | None:
    return None if resource is None else int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


class ActionTrace:
    """One worker's timeline (module docstring). ``sync`` waits for the device (after
    each action); ``clock`` and ``faults`` replace the timer and the page-fault count
    (tests)."""

    def __init__(self, path: Path, rank: int, label: str, sync: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.perf_counter,
                 faults: Callable[[], int | None] = _minor_faults) -> None:
        self.path, self.rank = Path(path), int(rank)
        self._sync, self._clock, self._faults = sync, clock, faults
        # Wall-clock microseconds of clock() = 0: ranks on one host share the wall clock.
        self._wall_us = time.time() * 1e6 - clock() * 1e6
        self._pending: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": self.rank, "tid": 0, "args": {"name": label}}]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("[\n")

    @contextlib.contextmanager
    def span(self, action: Any, epoch: int, name: str | None = None) -> Iterator[None]:
        """Time the action run inside (one event, kept until :meth:`flush`); ``epoch``
        0-based (the runner's), recorded 1-based; ``name`` (default: the action's
        kind) for work that is not a schedule action, such as the loss all-reduce that
        ends an epoch."""
        f0, t0 = self._faults(), self._clock()
        yield
        self._sync()
        t1, f1 = self._clock(), self._faults()
        args: dict[str, Any] = {"epoch": int(epoch) + 1}
        for key in ("chunk", "step"):
            if getattr(action, key, None) is not None:
                args[key] = int(getattr(action, key))
        if getattr(action, "ahead", False):
            args["ahead"] = True
        if f0 is not None and f1 is not None:
            args["minor_faults"] = f1 - f0
        self._pending.append({"name": name or type(action).__name__, "ph": "X", "pid": self.rank, "tid": 0,
                              "ts": round(self._wall_us + t0 * 1e6, 1), "dur": round((t1 - t0) * 1e6, 1),
                              "args": args})

    def flush(self) -> None:
        """Append the events since the last flush to the file (after each epoch)."""
        if not self._pending:
            return
        text = "".join(json.dumps(e, separators=(",", ":")) + ",\n" for e in self._pending)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
        self._pending = []


def action_trace(trace_dir: str | None, *, mode: str, rank: int, label: str,
                 sync: Callable[[], None] = lambda: None) -> tuple[ActionTrace | None, dict[str, Any]]:
    """This worker's :class:`ActionTrace` for ``train.trace_dir`` (None when unset or
    the mode has no schedule), and ``{"dir", "written", "why"}`` for the record."""
    state: dict[str, Any] = {"dir": trace_dir, "written": False}
    if trace_dir is None:
        return None, {**state, "why": "off (train.trace_dir unset)"}
    if mode not in TRACED_MODES:
        return None, {**state, "why": f"{mode} mode runs no schedule of actions (pipeline and hybrid only)"}
    path = Path(trace_dir) / FILE_PATTERN.format(rank=rank)
    return ActionTrace(path, rank, label, sync=sync), {
        **state, "written": True, "files": FILE_PATTERN.format(rank="R"),
        "why": "every schedule action of every training epoch, per rank"}


def merge_traces(trace_dir: str | Path, out: str | Path) -> int:
    """All ranks' files in ``trace_dir`` as one Chrome trace at ``out`` (a complete JSON
    array, written atomically); returns the number of events. A file cut short by a
    dead worker contributes its complete lines."""
    from gnnpipe.atomic import atomic_open

    events: list[Any] = []
    for path in sorted(Path(trace_dir).glob(FILE_PATTERN.format(rank="*"))):
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            try:
                events.append(json.loads(line.rstrip().rstrip(",")))
            except json.JSONDecodeError:
                break  # a line the worker did not finish
    with atomic_open(out, "w", encoding="utf-8") as fh:
        json.dump(events, fh)
    return len(events)
