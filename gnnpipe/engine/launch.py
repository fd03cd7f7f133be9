"""Start the workers, join the process group, and end the run when a worker fails.

Two ways to get P workers, ONE code path inside them (:func:`join_process_group`
reads ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT`` and
initialises with ``env://``):

* **local** (:func:`launch_local`): ``python -m gnnpipe.train --mode graph --workers
  2`` starts P processes on this machine (``spawn`` start method). The launcher hosts
  the rendezvous store itself on a port the OS picks (so two runs can never race for
  a port), exactly as torchrun's agent does, and sets the same variables torchrun
  sets. It watches the children: a worker that raises or dies (killed, OOM, segfault)
  ends the run, the others are killed, and :class:`~gnnpipe.errors.WorkerFailedError`
  names the rank that failed first. Rank 0's result comes back through a pipe.
* **torchrun** (:func:`in_torchrun`): each process of ``torchrun --nproc-per-node P
  [--nnodes N ...] -m gnnpipe.train ...`` is one worker; torchrun watches them.

Device and backend: ``cuda:LOCAL_RANK`` with NCCL where CUDA is present (or when
``parallel.device`` says so), else the CPU with gloo; ``parallel.backend`` overrides
the backend. The process-group timeout (``GNNPIPE_DIST_TIMEOUT_S``, default 300 s)
bounds every blocking transfer, so a worker whose peer vanished without closing its
sockets still ends instead of hanging.

Test hooks (used only by tests, read by the driver at the start of each epoch):
``GNNPIPE_TEST_FAIL_RANK=r`` and ``GNNPIPE_TEST_FAIL_EPOCH=e`` (1-based) make rank r
fail at epoch e; ``GNNPIPE_TEST_FAIL_HOW`` is ``raise`` (default) or ``kill``
(SIGKILL itself, no report); ``GNNPIPE_TEST_FAIL_MARK=path`` makes the failing rank
write the wall-clock time of the failure there first (tests measure from it).
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import wait as mp_wait
from typing import Any, Callable, Sequence

import torch

from gnnpipe.errors import ConfigError, GnnpipeInputError, WorkerFailedError

__all__ = [
    "in_torchrun",
    "env_ranks",
    "resolve_device",
    "resolve_backend",
    "check_layout_resources",
    "join_process_group",
    "leave_process_group",
    "launch_local",
    "dist_timeout_s",
    "maybe_inject_failure",
    "TEST_FAIL_RANK",
    "TEST_FAIL_EPOCH",
    "TEST_FAIL_HOW",
    "TEST_FAIL_MARK",
]

logger = logging.getLogger("gnnpipe.engine.launch")

TEST_FAIL_RANK = "GNNPIPE_TEST_FAIL_RANK"
TEST_FAIL_EPOCH = "GNNPIPE_TEST_FAIL_EPOCH"
TEST_FAIL_HOW = "GNNPIPE_TEST_FAIL_HOW"
TEST_FAIL_MARK = "GNNPIPE_TEST_FAIL_MARK"
_LOCAL_CHILD = "GNNPIPE_LOCAL_WORKER"
# After the first failure, how long to collect the other workers' reports before
# choosing whom to blame: a rank that dies makes its peers' transfers fail a moment
# later, and the error to report is the cause, not the echo.
_GRACE_S = 2.0


# ----------------------------------------------------------------------- environment
def in_torchrun() -> bool:
    """True when an external launcher (torchrun, or anything setting the ``env://``
    variables) started this process as one worker."""
    if os.environ.get(_LOCAL_CHILD) == "1":
        return False
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def env_ranks() -> tuple[int, int, int, int]:
    """``(rank, world_size, local_rank, local_world_size)`` from the environment."""
    try:
        rank = int(os.environ["RANK"])
        world = int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", rank))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"environment: expected integer RANK, WORLD_SIZE and LOCAL_RANK, found {exc}") from None
    return rank, world, local, local_world


def dist_timeout_s() -> float:
    """The process-group timeout in seconds (``GNNPIPE_DIST_TIMEOUT_S``, default 300)."""
    raw = os.environ.get("GNNPIPE_DIST_TIMEOUT_S", "300")
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"GNNPIPE_DIST_TIMEOUT_S: expected a number of seconds, found {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"GNNPIPE_DIST_TIMEOUT_S: expected a value > 0, found {raw!r}")
    return value


def resolve_device(parallel: Any, local_rank: int = 0) -> torch.device:
    """``cuda:LOCAL_RANK`` when the config resolves to CUDA, else the CPU."""
    if parallel.resolved_device() == "cuda":
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def resolve_backend(parallel: Any) -> str:
    """``parallel.backend``, else NCCL on CUDA and gloo on the CPU."""
    return parallel.resolved_backend()


def check_layout_resources(parallel: Any, local_world_size: int | None = None) -> None:
    """Refuse, before any process starts, what the machine cannot run (ConfigError):
    more workers on this node than GPUs, or gloo with CUDA tensors (gloo has no CUDA
    point-to-point). The config itself already refused NCCL without CUDA."""
    dev = parallel.resolved_device()
    backend = parallel.resolved_backend()
    local = int(parallel.workers) if local_world_size is None else int(local_world_size)
    if dev == "cuda":
        n = torch.cuda.device_count()
        if local > n:
            raise ConfigError(
                f"parallel.workers: expected at most {n} workers on this node (one GPU each), found {local}"
            )
        if backend == "gloo" and int(parallel.workers) > 1:
            raise ConfigError(
                "parallel.backend: expected nccl with device cuda (gloo has no CUDA point-to-point), found 'gloo'"
            )


# ----------------------------------------------------------------------- worker side
def set_worker_threads() -> int:
    """Give each worker on this node an equal share of the cores for intra-op work.

    P workers each running torch's default (one thread per core) oversubscribe the
    node P times over, and on a CPU node that is many times slower, not a little.
    torchrun avoids it by exporting OMP_NUM_THREADS=1; an explicit OMP_NUM_THREADS
    (the user's or torchrun's) is respected here, otherwise the share is
    ``cores // LOCAL_WORLD_SIZE`` (at least 1). Returns the thread count in force.
    """
    if os.environ.get("OMP_NUM_THREADS"):
        return torch.get_num_threads()
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    threads = max(1, cores // max(local_world, 1))
    torch.set_num_threads(threads)
    return threads


def join_process_group(parallel: Any) -> tuple[int, int, int, torch.device]:
    """Join the default process group from the ``env://`` variables, on this rank's
    device; returns ``(rank, world_size, local_rank, device)``.

    Under NCCL the GPU is made current first (``torch.cuda.set_device``), as batched
    p2p and object collectives require.
    """
    import torch.distributed as dist

    rank, world, local_rank, _ = env_ranks()
    set_worker_threads()
    device = resolve_device(parallel, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = resolve_backend(parallel)
    # NCCL communicators are created lazily, on first use (torch's default): the
    # communicator makes the per-direction groups up front, which then cost nothing
    # until used.
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                            timeout=timedelta(seconds=dist_timeout_s()))
    logger.debug("joined %s process group as rank %d/%d on %s", backend, rank, world, device)
    return rank, world, local_rank, device


def leave_process_group() -> None:
    """Destroy the default process group (after a successful run only: tearing down a
    group whose peers are gone can block)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def maybe_inject_failure(rank: int, epoch: int) -> None:
    """The test hook of the module docstring: fail here if told to."""
    want = os.environ.get(TEST_FAIL_RANK)
    if want is None or int(want) != rank:
        return
    at = int(os.environ.get(TEST_FAIL_EPOCH, "1"))
    if epoch != at:
        return
    how = os.environ.get(TEST_FAIL_HOW, "raise")
    mark = os.environ.get(TEST_FAIL_MARK)
    if mark:
        with open(mark, "w") as fh:
            fh.write(repr(time.time()))
    if how == "kill":
        logger.error("test hook: rank %d kills itself (SIGKILL) at epoch %d", rank, epoch)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"test hook: injected failure on rank {rank} at epoch {epoch}")


def _looks_like_comm_error(exc: BaseException) -> bool:
    """A transfer that failed because a peer went away (an echo of another failure)."""
    import torch.distributed as dist

    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("gloo", "nccl", "connection closed", "connection reset",
                                   "broken pipe", "timed out", "socket", "peer"))


def _child_main(rank: int, world_size: int, port: int, local_world: int, target: Callable[..., Any],
                payload: bytes, log_level: str, conn: Any, launcher_pid: int) -> None:
    """Body of one locally launched worker: set torchrun's variables, run ``target``,
    report to the launcher through ``conn``."""
    os.environ.update({
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
        "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(local_world),
        # The launcher hosts the store: every rank connects as a client, as under torchrun.
        "TORCHELASTIC_USE_AGENT_STORE": "True", _LOCAL_CHILD: "1",
    })
    from gnnpipe.trainer.progress import setup_logging

    setup_logging(log_level, rank=rank)
    _watch_parent(rank, launcher_pid)
    try:
        args = pickle.loads(payload)
        result = target(*args)
        blob = pickle.dumps(("ok", result if rank == 0 else None))
    except BaseException as exc:
        logging.getLogger("gnnpipe.engine").error("rank %d failed: %s: %s\n%s", rank, type(exc).__name__,
                                                   exc, traceback.format_exc())
        try:
            try:
                exc_blob: bytes | None = pickle.dumps(exc)
            except Exception:
                exc_blob = None
            conn.send(pickle.dumps(("error", f"{type(exc).__name__}: {exc}", _looks_like_comm_error(exc),
                                    exc_blob)))
            conn.close()
        finally:
            logging.shutdown()
            os._exit(1)  # no teardown: it could block on dead peers
    conn.send(blob)
    conn.close()
    try:
        leave_process_group()
    except Exception:  # pragma: no cover - the run is complete either way
        pass


def _watch_parent(rank: int, parent: int, interval_s: float = 1.0) -> None:
    """End this worker if the launcher (pid ``parent``) disappears (killed, or stopped
    by a signal it cannot catch): an orphaned worker would otherwise train on alone,
    or wait for peers that the launcher's death left behind."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                logging.getLogger("gnnpipe.engine").error("rank %d: the launcher (pid %d) is gone; exiting",
                                                          rank, parent)
                logging.shutdown()
                os._exit(1)

    threading.Thread(target=watch, name="gnnpipe-parent-watch", daemon=True).start()


# ----------------------------------------------------------------------- launcher side
@dataclass
class _Failure:
    rank: int
    summary: str
    is_echo: bool      # a comm error that another rank's failure probably caused
    crashed: bool      # died without a word (signal, os._exit, OOM killer)
    when: float
    exc: BaseException | None = None


def launch_local(target: Callable[..., Any], world_size: int, args: Sequence[Any], *,
                 log_level: str = "INFO") -> Any:
    """Run ``target(*args)`` in ``world_size`` local worker processes; return rank 0's
    result.

    ``target`` must be a module-level function; ``args`` are pickled once. A worker
    that raises or dies ends the run within seconds: the others are killed and
    :class:`WorkerFailedError` names the rank that failed first (a
    :class:`GnnpipeInputError` raised in a worker is re-raised as itself).
    """
    import torch.distributed as dist
    import torch.multiprocessing as tmp

    # The store server lives in the launcher, on a port the OS chose: no port race.
    store = dist.TCPStore("127.0.0.1", 0, world_size, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=dist_timeout_s()))
    port = int(store.port)
    payload = pickle.dumps(tuple(args))
    ctx = tmp.get_context("spawn")
    procs, conns = [], []
    try:
        for rank in range(world_size):
            recv_end, send_end = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_child_main, name=f"gnnpipe-rank{rank}", daemon=False,
                            args=(rank, world_size, port, world_size, target, payload, log_level, send_end,
                                  os.getpid()))
            p.start()
            send_end.close()
            procs.append(p)
            conns.append(recv_end)
        return _watch(procs, conns)[0]
    finally:
        _stop(procs)
        for c in conns:
            c.close()
        del store


def _watch(procs: list[Any], conns: list[Any]) -> list[Any]:
    n = len(procs)
    results: list[Any] = [None] * n
    finished: set[int] = set()
    failures: list[_Failure] = []
    first_failure: float | None = None

    def read(rank: int) -> None:
        try:
            msg = pickle.loads(conns[rank].recv())
        except (EOFError, OSError):
            return
        finished.add(rank)
        if msg[0] == "ok":
            results[rank] = msg[1]
        else:
            _, summary, is_echo, blob = msg
            exc = None
            if blob is not None:
                try:
                    exc = pickle.loads(blob)
                except Exception:
                    exc = None
            failures.append(_Failure(rank, summary, is_echo, False, time.monotonic(), exc))

    while len(finished) < n:
        if first_failure is not None and time.monotonic() - first_failure > _GRACE_S:
            break
        waitables: dict[Any, tuple[str, int]] = {}
        for r in range(n):
            if r not in finished:
                waitables[conns[r]] = ("conn", r)
                waitables[procs[r].sentinel] = ("proc", r)
        for obj in mp_wait(list(waitables), timeout=0.2):
            what, r = waitables[obj]
            if r in finished:
                continue
            if what == "conn":
                read(r)
                continue
            if conns[r].poll():  # exited: a message may still sit in the pipe
                read(r)
            if r not in finished:
                procs[r].join(timeout=1)
                code = procs[r].exitcode
                how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                finished.add(r)
                failures.append(_Failure(r, f"process died ({how}) without reporting",
                                         False, True, time.monotonic()))
        if failures and first_failure is None:
            first_failure = time.monotonic()

    if not failures:
        return results
    # Blame the cause: a crash, else a non-communication error, else the earliest.
    failures.sort(key=lambda f: (not f.crashed, f.is_echo, f.when))
    blame = failures[0]
    logger.error("worker rank %d failed: %s", blame.rank, blame.summary)
    if isinstance(blame.exc, GnnpipeInputError):
        raise blame.exc
    others = [f"rank {f.rank}: {f.summary}" for f in failures[1:]]
    message = blame.summary + (f" (then {'; '.join(others)})" if others else "")
    raise WorkerFailedError(blame.rank, message)


def _stop(procs: list[Any]) -> None:
    """Kill every worker still running and reap it."""
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(timeout=10.0)
