"""The worker side of a local launch: the body of each process that
:func:`gnnpipe.engine.launch.launch_local` spawns.

:func:`_child_main` sets the ``env://`` variables torchrun would set (plus the marker
that makes :func:`~gnnpipe.engine.environment.torchrun_env` None in our own workers),
starts a heartbeat thread, reads its arguments from a pipe, runs the target and
reports to the launcher through another pipe: ``("ok", result)`` (rank 0's result,
None on the others) or ``("error", summary, is_echo, pickled exception or None, why
not)``, where ``is_echo`` marks a transfer that a peer's failure probably broke, so
that the launcher blames the cause and not the echo. A failed worker ends at once,
with no teardown that could block on dead peers. The heartbeat lets the launcher tell
a stuck worker from a busy or waiting one, and ends this worker if the launcher
disappears.

This code runs in the workers and the launcher's in the parent; they share only the
pipes and that message format.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import threading
import time
import traceback
from typing import Any, Callable, NoReturn

from gnnpipe.engine.environment import _LOCAL_CHILD, exit_now, leave_process_group

__all__: list[str] = []

# Every worker's heartbeat thread ticks this often.
_BEAT_S = 1.0


def _looks_like_comm_error(exc: BaseException) -> bool:
    """A transfer that failed because a peer went away (an echo of another failure)."""
    import torch.distributed as dist

    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("gloo", "nccl", "connection closed", "connection reset",
                                   "broken pipe", "timed out", "socket", "peer"))


def _child_main(rank: int, world_size: int, port: int, target: Callable[..., Any], log_level: str,
                feed: Any, conn: Any, launcher_pid: int, beats: Any, stopping: Any) -> None:
    """Body of one locally launched worker: set torchrun's variables, beat, read the
    arguments from ``feed``, run ``target``, report to the launcher through ``conn``."""
    os.environ.update({
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
        "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world_size),
        # The launcher hosts the store: every rank connects as a client, as under torchrun.
        "TORCHELASTIC_USE_AGENT_STORE": "True", _LOCAL_CHILD: "1",
    })
    # Ctrl-C reaches the whole process group: the launcher handles it and ends us, so
    # a worker has nothing to add (no KeyboardInterrupt traceback per rank).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from gnnpipe.logs import setup_logging

    setup_logging(log_level, rank=rank)
    _start_heartbeat(rank, launcher_pid, beats)
    try:
        # The arguments come through their own pipe, not the spawn arguments: the
        # launcher would block forever writing those to a child that died starting.
        args = pickle.loads(feed.recv_bytes())
        feed.close()
        result = target(*args)
        blob = pickle.dumps(("ok", result if rank == 0 else None))
    except BaseException as exc:
        _report_failure(rank, exc, conn, stopping)
    try:
        conn.send_bytes(blob)
        conn.close()
    except OSError as exc:
        if not stopping.value:  # else the launcher is ending the run and does not need it
            logging.getLogger("gnnpipe.engine").error("rank %d: could not send the result to the launcher: %s",
                                                      rank, exc)
        logging.shutdown()
        os._exit(1)
    try:
        leave_process_group()
    except Exception as exc:  # the run is complete and reported: say so, end normally
        logging.getLogger("gnnpipe.engine").warning("rank %d: leaving the process group after the run "
                                                    "failed: %s: %s", rank, type(exc).__name__, exc)
    # No interpreter teardown: gloo's threads may still hold the last work (see exit_now).
    exit_now(0)


def _report_failure(rank: int, exc: BaseException, conn: Any, stopping: Any) -> NoReturn:
    """Log ``exc``, send it to the launcher (the object itself when it survives a
    pickle round trip, else its text and the reason), and end this process at once:
    no teardown, which could block on dead peers. Silent when the launcher is already
    stopping the run (it kills us; the error is an echo of that)."""
    log = logging.getLogger("gnnpipe.engine")
    try:
        if stopping.value:
            return
        log.error("rank %d failed: %s: %s\n%s", rank, type(exc).__name__, exc, traceback.format_exc())
        blob, unsendable = _pickle_exception(exc)
        if unsendable is not None:
            log.warning("rank %d: the %s cannot be sent to the launcher (%s); it gets the message only",
                        rank, type(exc).__name__, unsendable)
        msg = ("error", f"{type(exc).__name__}: {exc}", _looks_like_comm_error(exc), blob, unsendable)
        try:
            conn.send_bytes(pickle.dumps(msg))
            conn.close()
        except OSError as send_exc:
            log.error("rank %d: could not report the failure to the launcher: %s", rank, send_exc)
    finally:
        logging.shutdown()
        os._exit(1)


def _pickle_exception(exc: BaseException) -> tuple[bytes | None, str | None]:
    """``(pickled exc, None)`` when ``exc`` survives a pickle round trip, else
    ``(None, why not)``: an exception class whose constructor differs from its args,
    or that holds a lock, a socket or a lambda, cannot cross to the launcher."""
    try:
        blob = pickle.dumps(exc)
        pickle.loads(blob)
    except Exception as err:  # any failure of the round trip: send the text instead
        return None, f"{type(err).__name__}: {err}"
    return blob, None


def _start_heartbeat(rank: int, parent: int, beats: Any) -> None:
    """Tick ``beats[rank]`` every second from a daemon thread, so the launcher can tell
    a stuck worker (stopped, or frozen in a call that holds the interpreter: the
    thread stops too) from a busy or waiting one (torch and the transfers release the
    interpreter; the thread goes on). The same thread ends this worker if the launcher
    (pid ``parent``) disappears: an orphan would train on alone, or wait for peers
    that the launcher's death left behind."""

    def beat() -> None:
        n = 0
        while True:
            n += 1
            beats[rank] = n
            if os.getppid() != parent:
                logging.getLogger("gnnpipe.engine").error("rank %d: the launcher (pid %d) is gone; exiting",
                                                          rank, parent)
                logging.shutdown()
                os._exit(1)
            time.sleep(_BEAT_S)

    threading.Thread(target=beat, name="gnnpipe-heartbeat", daemon=True).start()
