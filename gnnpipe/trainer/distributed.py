"""The distributed modes' launch: partition once, start or join the workers.

:func:`run_distributed` is what the entry (:func:`gnnpipe.api.run`) calls for graph,
pipeline and hybrid mode, with a :class:`~gnnpipe.trainer.worker.Job` that it has
already validated and the graph with its self-loops removed:

* **local launch** (``layout.launcher == "local"``): the graph is partitioned ONCE in
  this process through the partition cache, then :func:`gnnpipe.engine.launch.launch_local`
  starts the P workers, each running :func:`_local_worker`; rank 0's record comes back.
* **torchrun** (``"torchrun"``): this process is one worker. Every rank partitions
  the graph (through the same cache), and all ranks check that they hold the same
  partition.

Inside a worker: join the process group, make the communicator, and hand over to
:func:`gnnpipe.trainer.worker.train_rank`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import sys
import time
from typing import Any

from gnnpipe.engine import environment, fault_hooks, launch
from gnnpipe.engine.comm import Comm
from gnnpipe.errors import GnnpipeInputError, WorkerFailedError
from gnnpipe.trainer.worker import Job, train_rank

__all__ = ["run_distributed"]

logger = logging.getLogger("gnnpipe.engine")


def _chunk(job: Job, graph: Any) -> Any:
    from gnnpipe.partition import chunk_graph

    p = job.config.parallel
    return chunk_graph(graph, job.layout.num_chunks, method=p.partition, seed=int(job.config.train.seed))


def _partition_digest(chunked: Any) -> str:
    return hashlib.sha256(chunked.partition.parts.numpy().tobytes()).hexdigest()


def run_distributed(job: Job, graph: Any) -> dict[str, Any] | None:
    """Train ``job`` in its distributed mode; the record on rank 0 (and in the local
    launcher), None on the other ranks of a torchrun launch. Raises
    WorkerFailedError when a worker raised or died (the message names its rank)."""
    if job.layout.launcher == "torchrun":
        return _torchrun_worker(job, graph)
    t0 = time.time()
    chunked = _chunk(job, graph)
    digest = _partition_digest(chunked)
    _check_resume_partition(job, digest)
    logger.info("launching %d %s workers", job.layout.world_size, job.layout.mode)
    job = dataclasses.replace(job, startup={**job.startup, "partition_s": time.time() - t0,
                                            "launch_unix_s": time.time()})
    return launch.launch_local(_local_worker, job.layout.world_size, (job, chunked, digest),
                               log_level=job.config.train.log_level)


def _check_resume_partition(job: Job, digest: str) -> None:
    if job.resume_from is not None:
        from gnnpipe.trainer.checkpoint import check_partition, open_checkpoint

        check_partition(open_checkpoint(job.resume_from), digest)


def _join(job: Job) -> tuple[int, int, Any, Comm]:
    rank, world, local_rank, device = environment.join_process_group(job.layout)
    return rank, local_rank, device, Comm(rank, world, device, timeout_s=environment.dist_timeout_s())


def _local_worker(job: Job, chunked: Any, digest: str) -> dict[str, Any] | None:
    """One worker of a local launch (a module-level function: it is pickled)."""
    rank, local_rank, device, comm = _join(job)
    return train_rank(job, rank=rank, device=device, comm=comm, graph=chunked.graph, chunked=chunked,
                      local_rank=local_rank, before_epoch=lambda e: fault_hooks.maybe_inject_failure(rank, e),
                      partition_digest=digest)


def _torchrun_worker(job: Job, graph: Any) -> dict[str, Any] | None:
    """One torchrun worker: the same body as a local one. A failure is logged with its
    traceback, printed as one line naming the rank, and ends this process at once with
    exit code 1 (no interpreter teardown: destroying a group whose peers are gone can
    block); torchrun then stops the others and names the first failure."""
    try:
        rank, local_rank, device, comm = _join(job)
        # Every rank partitions (METIS is deterministic for the seed; the cache writes
        # are atomic, so ranks that build the same entry at once cannot tear it). No
        # rank waits for another here: a barrier would be bounded by the process-group
        # timeout, which is short, while partitioning a large graph is not.
        t0 = time.time()
        chunked = _chunk(job, graph)
        job = dataclasses.replace(job, startup={**job.startup, "partition_s": time.time() - t0})
        digest = _partition_digest(chunked)
        if len(set(comm.all_gather_object(digest))) != 1:
            raise RuntimeError("the ranks computed different partitions: put the partition cache "
                               "($GNNPIPE_CACHE_DIR) on a filesystem that every node shares")
        _check_resume_partition(job, digest)
        record = train_rank(job, rank=rank, device=device, comm=comm, graph=chunked.graph, chunked=chunked,
                            local_rank=local_rank, before_epoch=lambda e: fault_hooks.maybe_inject_failure(rank, e),
                            partition_digest=digest)
        environment.leave_process_group()
        return record
    except GnnpipeInputError:
        raise
    except Exception as exc:
        env = environment.torchrun_env()
        rank = env.rank if env is not None else -1
        logger.error("rank %d failed: %s: %s", rank, type(exc).__name__, exc, exc_info=True)
        print(f"error: {WorkerFailedError(rank, f'{type(exc).__name__}: {exc}')}".replace("\n", " "),
              file=sys.stderr, flush=True)
        logging.shutdown()
        os._exit(1)
