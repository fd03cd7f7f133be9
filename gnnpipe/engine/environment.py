"""This process's place in a run, and its process group.

Two ways to get P workers, ONE code path inside them (:func:`join_process_group`
reads ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT`` and
initialises with ``env://``):

* **local** (:func:`gnnpipe.engine.launch.launch_local`): gnnpipe's launcher starts
  P processes on this machine and sets in each the same variables torchrun sets,
  plus a marker that makes :func:`torchrun_env` None there.
* **torchrun** (:func:`torchrun_env` is not None): each process of ``torchrun
  --nproc-per-node P [--nnodes N ...] -m gnnpipe.train ...`` (or of any launcher
  that sets the ``env://`` variables) is one worker; torchrun watches them.

Device and backend: ``cuda:LOCAL_RANK`` with NCCL where CUDA is present (or when
``parallel.device`` says so), else the CPU with gloo; ``parallel.backend`` overrides
the backend. The process-group timeout (``GNNPIPE_DIST_TIMEOUT_S``) bounds every
blocking transfer, so a worker whose peer vanished without closing its sockets still
ends instead of hanging. Under torchrun, where no heartbeat is watched, it is also what
ends a run with a stuck rank: 60 s by default. A local launcher's worker defaults to 30
minutes, because the launcher's heartbeat names a stuck rank first and a healthy peer
may keep it waiting for minutes (evaluation, checkpoint writes on a large graph). The
local launcher's stall timeout (``GNNPIPE_STALL_TIMEOUT_S``, default 60 s) is read here
too, by the same rule.

This is what every worker needs however it was started, and all a torchrun worker
needs: the local launcher (:mod:`~gnnpipe.engine.launch`) is not part of it.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn

import torch

from gnnpipe.errors import ConfigError

__all__ = [
    "TorchrunEnv",
    "torchrun_env",
    "join_process_group",
    "leave_process_group",
    "exit_now",
    "set_worker_threads",
    "dist_timeout_s",
    "stall_timeout_s",
    "DIST_TIMEOUT",
    "STALL_TIMEOUT",
]

logger = logging.getLogger(__name__)

DIST_TIMEOUT = "GNNPIPE_DIST_TIMEOUT_S"
STALL_TIMEOUT = "GNNPIPE_STALL_TIMEOUT_S"
# Set by the local launcher in its workers (gnnpipe.engine.launch_worker): not torchrun.
_LOCAL_CHILD = "GNNPIPE_LOCAL_WORKER"


@dataclass(frozen=True)
class TorchrunEnv:
    """This process's place in a launch by torchrun (or another ``env://`` launcher)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int


def torchrun_env() -> TorchrunEnv | None:
    """The ONE rule for "started by torchrun": the ranks when an external launcher
    (torchrun, or anything that sets the ``env://`` variables ``RANK``,
    ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``) started this process as one
    worker; None when none of them is set, and None in a worker of our own local
    launcher (which sets the same variables, plus a marker).

    ``LOCAL_RANK`` defaults to ``RANK`` and ``LOCAL_WORLD_SIZE`` to ``WORLD_SIZE``
    (one node). ConfigError (one line) when the variables are incomplete, not
    integers, or out of range.
    """
    if os.environ.get(_LOCAL_CHILD) == "1":
        return None
    return _read_env()


def _read_env() -> TorchrunEnv | None:
    """The ``env://`` variables of this process, whoever set them (torchrun or our
    local launcher); None when none of them is set."""
    required = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    present = [k for k in required if k in os.environ]
    if not present:
        return None
    if len(present) < len(required):
        missing = ", ".join(k for k in required if k not in os.environ)
        raise ConfigError(f"environment: expected all of {', '.join(required)} (a torchrun / env:// launch) "
                          f"or none, found {', '.join(present)} set but {missing} unset")
    raw = {k: os.environ[k] for k in ("RANK", "WORLD_SIZE", "MASTER_PORT")}
    raw["LOCAL_RANK"] = os.environ.get("LOCAL_RANK", raw["RANK"])
    raw["LOCAL_WORLD_SIZE"] = os.environ.get("LOCAL_WORLD_SIZE", raw["WORLD_SIZE"])
    v: dict[str, int] = {}
    bad = []
    for k, text in raw.items():
        try:
            v[k] = int(text)
        except ValueError:
            bad.append(f"{k}={text!r}")
    if bad:
        raise ConfigError(f"environment: expected integer {', '.join(raw)}, found {', '.join(bad)}")
    if not (v["WORLD_SIZE"] >= 1 and 0 <= v["RANK"] < v["WORLD_SIZE"] and 1 <= v["LOCAL_WORLD_SIZE"]
            and 0 <= v["LOCAL_RANK"] < v["LOCAL_WORLD_SIZE"] and 0 < v["MASTER_PORT"] < 65536):
        raise ConfigError("environment: expected 0 <= RANK < WORLD_SIZE, 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE "
                          "and 0 < MASTER_PORT < 65536, found "
                          + ", ".join(f"{k}={n}" for k, n in v.items()))
    return TorchrunEnv(v["RANK"], v["WORLD_SIZE"], v["LOCAL_RANK"], v["LOCAL_WORLD_SIZE"])


def _require_env() -> TorchrunEnv:
    env = _read_env()
    if env is None:
        raise ConfigError("environment: expected RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (set by torchrun "
                          "or the local launcher) to join the process group, found none of them")
    return env


def _env_seconds(name: str, default: float) -> float:
    """A positive, finite number of seconds from the environment variable ``name``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected a number of seconds, found {raw!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{name}: expected a finite value > 0, found {raw!r}")
    return value


#: The process-group timeout of a worker that no heartbeat watches (torchrun): it is
#: what ends a run with a stuck rank there.
UNWATCHED_DIST_TIMEOUT_S = 60.0
#: The process-group timeout of a local launcher's worker. The launcher already names a
#: dead rank within about a second and a stuck one after the stall timeout (60 s), so
#: the transfer timeout only has to outlast the longest healthy wait: a peer's
#: evaluation, exact history start or checkpoint write on a large graph can take
#: minutes, and a 60 s timeout there ended healthy runs.
WATCHED_DIST_TIMEOUT_S = 1800.0


def dist_timeout_s() -> float:
    """The process-group timeout in seconds: ``GNNPIPE_DIST_TIMEOUT_S`` where set, else
    :data:`WATCHED_DIST_TIMEOUT_S` in a worker of the local launcher (whose heartbeat
    names a stuck rank first) and :data:`UNWATCHED_DIST_TIMEOUT_S` anywhere else."""
    watched = os.environ.get(_LOCAL_CHILD) == "1"
    return _env_seconds(DIST_TIMEOUT, WATCHED_DIST_TIMEOUT_S if watched else UNWATCHED_DIST_TIMEOUT_S)


def stall_timeout_s() -> float:
    """How long a local worker's heartbeat may be silent before the launcher declares
    that rank stuck and ends the run (``GNNPIPE_STALL_TIMEOUT_S``, default 60)."""
    return _env_seconds(STALL_TIMEOUT, 60.0)


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


def join_process_group(layout: Any) -> tuple[int, int, int, torch.device]:
    """Join the default process group from the ``env://`` variables, on this rank's
    device (``cuda:LOCAL_RANK`` when ``layout.device_type`` is cuda, else the CPU) with
    ``layout.backend``; returns ``(rank, world_size, local_rank, device)``.

    Under NCCL the GPU is made current first (``torch.cuda.set_device``), as batched
    p2p and object collectives require.
    """
    import torch.distributed as dist

    env = _require_env()
    set_worker_threads()
    device = torch.device("cuda", env.local_rank) if layout.device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = layout.backend
    # NCCL communicators are created lazily, on first use (torch's default): the
    # communicator makes the per-direction groups up front, which then cost nothing
    # until used.
    timeout = timedelta(seconds=dist_timeout_s())
    store = _attempt_store(env, timeout)
    if store is None:
        dist.init_process_group(backend, init_method="env://", rank=env.rank, world_size=env.world_size,
                                timeout=timeout)
    else:
        dist.init_process_group(backend, store=store, rank=env.rank, world_size=env.world_size, timeout=timeout)
    logger.debug("joined %s process group as rank %d/%d on %s", backend, env.rank, env.world_size, device)
    return env.rank, env.world_size, env.local_rank, device


def _attempt_store(env: TorchrunEnv, timeout: timedelta) -> Any:
    """Under a torchrun restart (``TORCHELASTIC_RESTART_COUNT`` > 0), the rendezvous
    store of ``env://`` with this attempt's prefix; None otherwise (plain ``env://``).

    torchrun's agent hosts the store (``TORCHELASTIC_USE_AGENT_STORE``) and keeps it
    across the restarts of its worker group, and ``env://`` adds no per-attempt prefix
    (torch 2.13's ``_create_c10d_store`` assumes a new store per attempt). So a
    restarted rank could read the previous attempt's gloo addresses before the new
    peers had written theirs, and fail with ``connectFullMesh ... Connection refused``
    or wait on a peer that is gone. With ``attempt_<n>/`` before every key each
    attempt rendezvouses among its own processes. The store is made as ``env://``
    makes it: a client of the agent's, or hosted by rank 0 without an agent store.
    """
    import torch.distributed as dist

    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0").strip()
    if attempt in ("", "0"):
        return None
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), env.world_size,
                          is_master=(not agent and env.rank == 0), timeout=timeout,
                          multi_tenant=not agent)
    logger.info("rank %d: torchrun restart %s, rendezvous under the prefix attempt_%s/", env.rank, attempt, attempt)
    return dist.PrefixStore(f"attempt_{attempt}/", store)


def leave_process_group() -> None:
    """Destroy the default process group (after a successful run only: tearing down a
    group whose peers are gone can block)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def exit_now(code: int) -> NoReturn:
    """End this worker process with ``code`` at once: flush the standard streams and
    the log handlers, then ``os._exit`` (no interpreter teardown).

    Used after a run is complete and its process group destroyed: gloo's worker
    threads may still be releasing the last collective's work, whose tensors hold
    Python objects, and if the interpreter finalizes meanwhile the process aborts
    (SIGABRT) although the run succeeded (the same abort pytorch/pytorch#179291
    describes for a group never destroyed). Also used on a failure, where tearing
    down a group whose peers are gone can block.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more to say on it
            pass
    logging.shutdown()
    os._exit(code)
