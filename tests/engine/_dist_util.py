"""Run a function on N real gloo worker processes (test helper, shared by the engine tests).

``run_workers(fn, world_size, *args)`` starts ``world_size`` processes with the
``spawn`` method, each joins a gloo process group on 127.0.0.1, sets one CPU thread,
and calls ``fn(rank, world_size, *args)``. The rendezvous store is hosted by the
calling process on a port the OS picks (as gnnpipe's launcher does), so concurrent
test runs never race for a port. The
return values come back by rank (pickled by value). If any worker raises or dies the
others are killed and :class:`WorkerError` names the failed rank with its traceback;
nothing waits longer than ``timeout`` seconds.

``fn`` must be a module-level function of an importable module *or* of a test file:
test files are imported in the child by their path, because pytest's
``--import-mode=importlib`` gives them names that a fresh interpreter cannot import.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import pickle
import socket
import sys
import time
import traceback
from datetime import timedelta
from multiprocessing.connection import wait as mp_wait
from typing import Any, Callable

import torch.multiprocessing as tmp

__all__ = ["run_workers", "free_port", "WorkerError"]


class WorkerError(AssertionError):
    """A worker process raised or died; ``rank`` is the failed rank."""

    def __init__(self, rank: int, message: str) -> None:
        super().__init__(f"worker rank {rank} failed: {message}")
        self.rank = rank


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _resolve(module: str, qualname: str, path: str | None) -> Callable[..., Any]:
    try:
        mod = importlib.import_module(module)
    except Exception:
        if path is None:
            raise
        name = f"_gnnpipe_test_{abs(hash(path))}"
        mod = sys.modules.get(name)
        if mod is None:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
    obj: Any = mod
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _child(rank: int, world_size: int, port: int, target: tuple[str, str, str | None], args: tuple,
           env: dict[str, str], timeout_s: float, conn: Any) -> None:
    os.environ.update(env)
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
                       "OMP_NUM_THREADS": "1", "TORCHELASTIC_USE_AGENT_STORE": "True"})
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        fn = _resolve(*target)
        dist.init_process_group("gloo", rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s))
        result = fn(rank, world_size, *args)
        blob = pickle.dumps(("ok", result))
    except BaseException as exc:  # report and leave without a teardown that could block
        try:
            conn.send(pickle.dumps(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")))
        finally:
            os._exit(1)
    conn.send(blob)
    conn.close()
    try:
        dist.destroy_process_group()
    except Exception as exc:  # the result is already sent: say so, and end normally
        logging.getLogger(__name__).warning("rank %d: leaving the process group after the run failed: %s: %s",
                                            rank, type(exc).__name__, exc)


def run_workers(fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 120.0,
                env: dict[str, str] | None = None) -> list[Any]:
    """``[fn(0, P, *args), ..., fn(P-1, P, *args)]`` computed by P gloo processes.

    ``env`` is added to each worker's environment. Raises :class:`WorkerError` naming
    the first rank that raised or died, or the ranks still running at ``timeout``.
    """
    module = fn.__module__
    try:
        path: str | None = inspect.getfile(fn)
    except TypeError:
        path = None
    target = (module, fn.__qualname__, path)
    import torch.distributed as dist

    ctx = tmp.get_context("spawn")
    # The parent hosts the store (every worker connects as a client): no port race.
    store = dist.TCPStore("127.0.0.1", 0, world_size, is_master=True, wait_for_workers=False)
    port = int(store.port)
    procs, conns = [], []
    for rank in range(world_size):
        recv_end, send_end = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(rank, world_size, port, target, tuple(args), dict(env or {}),
                                             max(5.0, timeout / 2), send_end), daemon=True)
        p.start()
        send_end.close()
        procs.append(p)
        conns.append(recv_end)
    results: list[Any] = [None] * world_size
    done: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(done) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerError(min(set(range(world_size)) - done),
                                  f"still running after {timeout:.0f} s (ranks "
                                  f"{sorted(set(range(world_size)) - done)})")
            waitables = {}
            for r in range(world_size):
                if r not in done:
                    waitables[conns[r]] = r
                    waitables[procs[r].sentinel] = r
            for obj in mp_wait(list(waitables), timeout=min(left, 0.5)):
                r = waitables[obj]
                if r in done:
                    continue
                if conns[r].poll():
                    try:
                        status, payload = pickle.loads(conns[r].recv())
                    except (EOFError, OSError):
                        status, payload = "died", None
                else:
                    status, payload = "died", None
                if status == "ok":
                    results[r] = payload
                    done.add(r)
                elif status == "error":
                    raise WorkerError(r, payload)
                else:
                    procs[r].join(timeout=2)
                    raise WorkerError(r, f"process died with exit code {procs[r].exitcode}")
        return results
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(timeout=5)
        for c in conns:
            c.close()
        del store
