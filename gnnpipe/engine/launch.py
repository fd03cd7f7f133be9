"""Start P workers on this machine, watch them, and end the run when one fails.

**local** (:func:`launch_local`): ``python -m gnnpipe.train --mode graph --workers
2`` starts P processes on this machine (``spawn`` start method). The launcher hosts
the rendezvous store itself on a port the OS picks (so two runs can never race for
a port), exactly as torchrun's agent does, and each worker
(:mod:`~gnnpipe.engine.launch_worker`) sets the same variables torchrun sets, so it
joins the process group as a torchrun worker does (:mod:`~gnnpipe.engine.environment`).
The launcher watches the children: a worker that raises or dies (killed, OOM,
segfault) ends the run, the others are killed, and
:class:`~gnnpipe.errors.WorkerFailedError` names the rank that failed first. Each
worker also runs a heartbeat thread; a rank whose heartbeat stops for the stall
timeout (``GNNPIPE_STALL_TIMEOUT_S``, default 60 s) is *stuck* (stopped by a signal,
frozen in a call that holds the interpreter): the run ends and the error names that
rank, not the peers waiting for it. A rank blocked in a transfer or busy in torch
keeps beating. Rank 0's result comes back through a pipe. SIGTERM at the launcher
stops every worker and raises :class:`~gnnpipe.errors.RunTerminated` (the CLI exits
143), as Ctrl-C raises KeyboardInterrupt (130). Because the workers are spawned and
re-import the main module, a script must start the run under ``if __name__ ==
"__main__":``; one that does not is refused at once (ConfigError,
:mod:`~gnnpipe.engine.main_guard`) instead of starting training again in every worker.

Under **torchrun** none of this runs: torchrun starts and watches the workers
(:func:`~gnnpipe.engine.environment.torchrun_env` is not None there).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import wait as mp_wait
from typing import Any, Callable, Iterator, NoReturn, Sequence

from gnnpipe.engine.environment import dist_timeout_s, stall_timeout_s
from gnnpipe.engine.launch_worker import _child_main
from gnnpipe.engine.main_guard import check_main_module_guard
from gnnpipe.errors import GnnpipeInputError, RunTerminated, WorkerFailedError

__all__ = ["launch_local"]

logger = logging.getLogger(__name__)

# After the first failure, how long to collect the other workers' reports before
# choosing whom to blame: a rank that dies makes its peers' transfers fail a moment
# later, and the error to report is the cause, not the echo.
_GRACE_S = 2.0
# When the run ends for another reason (a peer's transfer timed out), a rank whose
# heartbeat is older than this (or than the stall timeout, if shorter) is the one that
# stopped answering: a beating rank is never this late.
_LATE_BEAT_S = 5.0
# A pause longer than this between two looks of the launcher at the heartbeats means
# that the launcher was not running (it looks every 0.2 s): it restarts their clocks.
_LOOK_GAP_S = 3.0
# After a successful run, how long the workers get to leave the process group and exit
# on their own before they are killed.
_EXIT_GRACE_S = 5.0


# Whom to blame, first to last: a rank whose heartbeat stopped (its peers' errors are
# the consequence), one that died without a word, one that raised, one that never
# started, and last a transfer error that another rank's failure probably caused.
_BLAME_ORDER = ("stuck", "crash", "error", "unstarted", "echo")


@dataclass
class _Failure:
    rank: int
    summary: str
    kind: str          # one of _BLAME_ORDER
    when: float
    exc: BaseException | None = None


def launch_local(target: Callable[..., Any], world_size: int, args: Sequence[Any], *,
                 log_level: str = "INFO") -> Any:
    """Run ``target(*args)`` in ``world_size`` local worker processes; return rank 0's
    result.

    ``target`` must be a module-level function; ``args`` are pickled once. A worker
    that raises or dies ends the run within seconds, one whose heartbeat stops ends it
    after :func:`stall_timeout_s`: the others are killed and
    :class:`WorkerFailedError` names that rank (a :class:`GnnpipeInputError` raised in
    a worker is re-raised as itself). SIGTERM (in the main thread) stops the workers
    and raises :class:`RunTerminated`. ConfigError, before any process starts, when
    the main module's unguarded top level started this (module docstring) or a timeout
    variable is malformed.
    """
    import torch.distributed as dist
    import torch.multiprocessing as tmp

    check_main_module_guard()
    stall_s = stall_timeout_s()
    payload = pickle.dumps(tuple(args))
    # The store server lives in the launcher, on a port the OS chose: no port race.
    store = dist.TCPStore("127.0.0.1", 0, world_size, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=dist_timeout_s()))
    ctx = tmp.get_context("spawn")
    beats = ctx.RawArray("q", world_size)      # heartbeat counters, one per rank
    stopping = ctx.RawValue("b", 0)            # set before the launcher kills the workers
    procs: list[Any] = []
    conns: list[Any] = []
    feeds: list[Any] = []
    senders: list[threading.Thread] = []
    with _sigterm_raises() as term:
        try:
            for rank in range(world_size):
                recv_end, send_end = ctx.Pipe(duplex=False)
                feed_r, feed_w = ctx.Pipe(duplex=False)
                conns.append(recv_end)
                feeds.append(feed_w)
                p = ctx.Process(target=_child_main, name=f"gnnpipe-rank{rank}", daemon=False,
                                args=(rank, world_size, int(store.port), target, log_level, feed_r, send_end,
                                      os.getpid(), beats, stopping))
                procs.append(p)
                try:
                    p.start()
                finally:
                    send_end.close()  # the child holds its ends now: EOF/EPIPE when it dies
                    feed_r.close()
            for rank, feed in enumerate(feeds):
                t = threading.Thread(target=_feed, args=(rank, feed, payload), name=f"gnnpipe-feed{rank}",
                                     daemon=True)
                t.start()
                senders.append(t)
            results = _watch(procs, conns, beats, stall_s)
            _await_exit(procs, _EXIT_GRACE_S)  # let them leave the group; the finally kills the rest
            return results[0]
        finally:
            term.armed = False  # a SIGTERM now must not interrupt the cleanup
            stopping.value = 1
            _stop(procs)
            for t in senders:
                t.join(timeout=10.0)
            for c in conns + feeds:
                c.close()
            del store


class _Terminate:
    """The SIGTERM handler of a launch: raises :class:`RunTerminated` once, while
    ``armed``; the launcher disarms it before it stops the workers, and a SIGTERM
    after that is kept in ``pending`` (raised once the cleanup is over)."""

    def __init__(self) -> None:
        self.armed = True
        self.pending: int | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        if self.armed:
            self.armed = False
            raise RunTerminated(signum)
        self.pending = signum


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[_Terminate]:
    """While the workers run, SIGTERM raises :class:`RunTerminated` in this (main)
    thread, so that the launcher's ``finally`` stops them; the previous handler is
    restored afterwards. Off the main thread (where Python cannot install handlers)
    nothing changes."""
    term = _Terminate()
    if threading.current_thread() is not threading.main_thread():
        yield term
        return
    previous = signal.signal(signal.SIGTERM, term)
    try:
        yield term
    finally:
        # None: a handler installed outside Python, which cannot be put back.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    if term.pending is not None:  # arrived during the cleanup of a run that had succeeded
        raise RunTerminated(term.pending)


def _feed(rank: int, feed: Any, payload: bytes) -> None:
    """Send the pickled arguments to one worker (a thread per worker: a large payload
    blocks until that worker reads it, and a worker that died or stopped must not hold
    up the others or the watch)."""
    try:
        feed.send_bytes(payload)
    except OSError as exc:  # the worker is gone (the watch reports that) or the run ended
        logger.debug("rank %d: arguments not delivered: %s: %s", rank, type(exc).__name__, exc)


def _load_exception(blob: bytes | None, unsendable: str | None) -> tuple[BaseException | None, str | None]:
    """A worker's exception object, or None and the reason it did not arrive."""
    if blob is None:
        return None, unsendable
    try:
        return pickle.loads(blob), None
    except Exception as err:  # the worker checked the round trip; report it anyway
        logger.warning("a worker's exception could not be unpickled in the launcher: %s: %s",
                       type(err).__name__, err)
        return None, f"{type(err).__name__}: {err}"


def _watch(procs: list[Any], conns: list[Any], beats: Any, stall_s: float) -> list[Any]:
    """Every worker's result once all have reported; raises (:func:`_raise_blame`)
    once one failed, died or stopped beating, after a short grace for the reports
    of the others."""
    n = len(procs)
    t_launch = time.monotonic()
    results: list[Any] = [None] * n
    finished: set[int] = set()
    closed: set[int] = set()    # pipes that ended without a message: watch the process only
    failures: list[_Failure] = []
    first_failure: float | None = None
    seen = [0] * n
    last_beat: list[float | None] = [None] * n   # launcher clock of each rank's last tick
    last_look = t_launch

    def read(rank: int) -> None:
        try:
            msg = pickle.loads(conns[rank].recv_bytes())
        except (EOFError, OSError) as exc:
            closed.add(rank)
            logger.debug("rank %d: its pipe closed without a report (%s); watching the process",
                         rank, type(exc).__name__)
            return
        finished.add(rank)
        if msg[0] == "ok":
            results[rank] = msg[1]
            return
        _, summary, is_echo, blob, unsendable = msg
        exc, why = _load_exception(blob, unsendable)
        if why is not None:
            summary += f" (the exception object could not be sent to the launcher: {why})"
        failures.append(_Failure(rank, summary, "echo" if is_echo else "error", time.monotonic(), exc))

    def update_beats() -> float:
        nonlocal last_look
        now = time.monotonic()
        if now - last_look > _LOOK_GAP_S:
            # The launcher itself did not run (Ctrl-Z stops the whole job, or the machine
            # starved it): silence over that time says nothing about the workers.
            last_beat[:] = [None if t is None else now for t in last_beat]
        last_look = now
        for r in range(n):
            b = beats[r]
            if b != seen[r]:
                seen[r], last_beat[r] = b, now
        return now

    def stuck(r: int, now: float) -> _Failure:
        return _Failure(r, f"stopped answering (no heartbeat for {now - last_beat[r]:.0f} s)", "stuck", now)

    while len(finished) < n:
        now = update_beats()
        if first_failure is not None and now - first_failure > _GRACE_S:
            break
        if first_failure is None:
            silent = [r for r in range(n) if r not in finished and last_beat[r] is not None
                      and now - last_beat[r] > stall_s]
            if silent:  # its peers wait for it and will not fail soon: no grace period
                failures.extend(stuck(r, now) for r in silent)
                break
        waitables: dict[Any, tuple[str, int]] = {}
        for r in range(n):
            if r not in finished:
                if r not in closed:
                    waitables[conns[r]] = ("conn", r)
                waitables[procs[r].sentinel] = ("proc", r)
        for obj in mp_wait(list(waitables), timeout=0.2):
            what, r = waitables[obj]
            if r in finished:
                continue
            if what == "conn":
                read(r)
                continue
            if r not in closed and conns[r].poll():  # exited: a message may still sit in the pipe
                read(r)
            if r not in finished:
                procs[r].join(timeout=1)
                code = procs[r].exitcode
                how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                when = "" if last_beat[r] is not None else ", while starting: its own error, if any, is above"
                finished.add(r)
                failures.append(_Failure(r, f"process died ({how}) without reporting{when}", "crash",
                                         time.monotonic()))
        if failures and first_failure is None:
            first_failure = time.monotonic()

    if not failures:
        return results
    # A peer's transfer that timed out is the echo of the rank it waited for: a rank
    # that stopped beating (or, when nothing else explains the failures, never began).
    now = update_beats()
    late = min(stall_s, _LATE_BEAT_S)
    only_echoes = all(f.kind == "echo" for f in failures)
    blamed = {f.rank for f in failures}
    for r in range(n):
        if r in finished or r in blamed:
            continue
        if last_beat[r] is not None and now - last_beat[r] > late:
            failures.append(stuck(r, now))
        elif last_beat[r] is None and only_echoes:
            failures.append(_Failure(r, f"never started (no heartbeat in the {now - t_launch:.0f} s since the "
                                        "launch)", "unstarted", now))
    _raise_blame(failures)


def _raise_blame(failures: list[_Failure]) -> NoReturn:
    """Raise for the cause among ``failures``: the first in :data:`_BLAME_ORDER`, as
    itself when it is bad input, else as WorkerFailedError naming its rank (the other
    reports follow in the message)."""
    failures = sorted(failures, key=lambda f: (_BLAME_ORDER.index(f.kind), f.when))
    blame = failures[0]
    logger.error("worker rank %d failed: %s", blame.rank, blame.summary)
    if isinstance(blame.exc, GnnpipeInputError):
        raise blame.exc
    others = [f"rank {f.rank}: {f.summary}" for f in failures[1:]]
    message = blame.summary + (f" (then {'; '.join(others)})" if others else "")
    raise WorkerFailedError(blame.rank, message)


def _await_exit(procs: list[Any], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    late = [rank for rank, p in enumerate(procs) if p.exitcode is None]
    if late:
        logger.debug("ranks %s still leaving the process group %.0f s after the run; killing them", late, timeout_s)


def _stop(procs: list[Any]) -> None:
    """Kill every worker still running (stopped ones too: SIGKILL ends them) and reap it."""
    for p in procs:
        if p.pid is not None and p.is_alive():
            p.kill()
    for rank, p in enumerate(procs):
        if p.pid is None:
            continue
        p.join(timeout=10.0)
        if p.exitcode is None:
            logger.warning("rank %d (pid %d) has not exited 10 s after SIGKILL", rank, p.pid)
