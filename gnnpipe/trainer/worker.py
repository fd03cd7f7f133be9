"""The body of every worker, single mode's one process included: build, train, report.

:func:`train_rank` is given a :class:`Job` (the resolved config and layout, the
dataset summary), this rank's place, device and communicator, and the graph it
trains on (the whole graph in single mode, the chunked graph otherwise). It builds
the FULL model with ``torch.manual_seed(train.seed)`` (the same parameters in every
mode and on every rank), the mode's runner, the history start, runs the one epoch
loop (:mod:`gnnpipe.trainer.loop`) and, on rank 0, builds the record. All of it runs
inside ``torch.random.fork_rng``, so the caller's random state (under torchrun, or a
library user's) is left as it was.

Seeding: single mode draws the weights and then its dropout masks from one stream
seeded with ``train.seed``; a distributed worker reseeds after building the model
(``seed * 1_000_003 + 1 + rank``) so that the workers' dropout streams differ (each
masks different rows).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from gnnpipe.engine.comm import KINDS, Comm
from gnnpipe.engine.context import WorkerContext, sync
from gnnpipe.engine.layout import Layout
from gnnpipe.engine.host_heap import heap_trimmer, tune_host_heap
from gnnpipe.engine.runners import RUNNERS
from gnnpipe.engine.trace import action_trace
from gnnpipe.huge_pages import huge_pages_state
from gnnpipe.trainer.loop import run_epochs
from gnnpipe.trainer.machine import machine_info, measure_peak_memory
from gnnpipe.trainer.record import build_record

__all__ = ["Job", "train_rank"]

logger = logging.getLogger("gnnpipe.train")


@dataclass(frozen=True)
class Job:
    """One resolved run, identical on every rank (pickled to local workers).

    Attributes:
        config: the :class:`gnnpipe.config.RunConfig`.
        layout: its :class:`~gnnpipe.engine.layout.Layout`, validated.
        dataset: the record's dataset summary of the graph as loaded.
        checkpoint_dataset: the dataset as checkpoints name it (the summary and
            ``content_sha256``, :func:`~gnnpipe.trainer.checkpoint.dataset_digest`), or None
            without checkpoints.
        self_loops_removed: how many self-loops the entry removed (layers add their own).
        t_start: wall-clock time (``time.time()``) at the entry, for ``wall_time_s``.
        resume_from: the checkpoint folder to continue from (checked against this run
            at the entry), or None.
        startup: where the time before the first epoch went so far (``load_s``,
            ``partition_s``; ``process_start_unix_s`` and ``launch_unix_s`` to measure from).
        plan: the planner's entry of the record when ``--mode``/``--chunks`` was auto.
    """

    config: Any
    layout: Layout
    dataset: dict[str, Any]
    self_loops_removed: int
    t_start: float
    checkpoint_dataset: dict[str, Any] | None = None
    resume_from: str | None = None
    startup: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] | None = None


def _checkpointing(job: Job, rank: int, device: torch.device, comm: Comm,
                   partition_digest: str | None) -> Any:
    from gnnpipe.trainer.checkpoint import Checkpointer

    tc = job.config.train
    if tc.checkpoint_dir is None:
        return None
    header = {"config": job.config.to_dict(), "layout": job.layout.as_dict(), "dataset": job.checkpoint_dataset,
              "partition_digest": partition_digest}
    return Checkpointer(tc.checkpoint_dir, tc.checkpoint_every, rank=rank, comm=comm, device=device, header=header)


def _startup(job: Job, slowest: list[float], first_epoch_unix_s: float) -> dict[str, Any]:
    """Where the time before the first epoch went (measured; the slowest rank's spawn,
    build, history start and resume). ``plan_s``: the planner's choice for ``auto``,
    its calibration included (0 without ``auto``). ``spawn_s``: from the launch to the process group
    being up (local launch; 0 otherwise); ``build_s``: model, runner and plans on the
    device; ``history_start_s``: this run's history start (0 on a resume, which restores
    it); ``resume_s``: reading, verifying and loading the checkpoint (0 without a resume);
    ``to_first_epoch_s``: from the process start to the first epoch (None where the
    process start cannot be read)."""
    t0 = job.startup.get("process_start_unix_s")
    return {"load_s": float(job.startup.get("load_s", 0.0)), "plan_s": float(job.startup.get("plan_s", 0.0)),
            "partition_s": float(job.startup.get("partition_s", 0.0)),
            "spawn_s": slowest[0], "build_s": slowest[1], "history_start_s": slowest[2], "resume_s": slowest[3],
            "to_first_epoch_s": None if t0 is None else first_epoch_unix_s - t0}


def _describe_rank(layout: Layout, rank: int) -> str:
    if layout.mode in ("pipeline", "hybrid"):
        return f"stage {layout.stage_of(rank)}" + (f" of way {layout.way_of(rank)}" if layout.ways > 1 else "")
    return "the model" if layout.mode == "single" else f"rank {rank}"


def train_rank(job: Job, *, rank: int, device: torch.device, comm: Comm, graph: Any, chunked: Any,
               local_rank: int = 0, before_epoch: Callable[[int], None] | None = None,
               partition_digest: str | None = None) -> dict[str, Any] | None:
    """Train this rank's share of ``job``; the record on rank 0, None elsewhere.

    ``graph`` is the graph to train on (self-loops removed; ``chunked.graph`` in the
    distributed modes), ``chunked`` the partitioned graph or None (single mode),
    ``partition_digest`` its digest (kept in checkpoints).
    """
    from gnnpipe.models import build_model

    cfg, layout = job.config, job.layout
    tc = cfg.train
    dtype = tc.torch_dtype
    host_heap = tune_host_heap(tc.host_heap_mib)
    host_huge_pages = huge_pages_state()
    if rank == 0 and tc.host_heap_mib:
        logger.info("host heap: %s", f"thresholds at {tc.host_heap_mib} MiB" if host_heap["applied"]
                    else f"left as it is ({host_heap['why']})")
    heap_trim, heap_trim_state = heap_trimmer(tc.host_heap_trim_mib, mode=layout.mode, device_type=device.type,
                                              host_heap_mib=tc.host_heap_mib)
    trace, trace_state = action_trace(tc.trace_dir, mode=layout.mode, rank=rank,
                                      label=f"rank {rank}: {_describe_rank(layout, rank)}", sync=lambda: sync(device))
    if rank == 0 and tc.trace_dir is not None and trace is None:
        logger.warning("train.trace_dir: %s; no trace written", trace_state["why"])
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t_joined = time.time()  # the process group is up (single mode: nothing to join)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(tc.seed)
        model = build_model(cfg.model, in_features=graph.num_features, num_classes=graph.num_classes).to(dtype=dtype)
        if layout.distributed:
            torch.manual_seed(int(tc.seed) * 1_000_003 + 1 + rank)
        ctx = WorkerContext(rank=rank, layout=layout, device=device, dtype=dtype, config=cfg, graph=graph,
                            chunked=chunked, comm=comm, model=model, local_rank=local_rank,
                            heap_trim=heap_trim, trace=trace)
        runner = RUNNERS[layout.mode](ctx)
        build_s = time.time() - t_joined
        num_params = sum(p.numel() for p in model.parameters())
        if rank == 0:
            logger.info("%s mode: %d workers, %d chunks, %s on %s, %d parameters, device %s%s",
                        layout.mode, layout.world_size, layout.num_chunks, cfg.model.model, graph, num_params,
                        device, f", backend {layout.backend}" if layout.backend else "")
        resume_state = None
        t_resume = time.time()
        if job.resume_from is not None:
            from gnnpipe.trainer.checkpoint import open_checkpoint

            resumed = open_checkpoint(job.resume_from)
            shard = resumed.shard(rank, device)
            runner.load_state_dict(shard["runner"])
            resume_state = shard["loop"]
            start = resume_state["history_start"]
            resumed.restore_rng(shard, device)
            if rank == 0:
                logger.info("resumed from %s: %d epochs done", resumed.folder, len(resume_state["epochs"]))
        else:
            start = runner.prepare()
        first_epoch_unix_s = time.time()
        resumed_s = first_epoch_unix_s - t_resume if resume_state is not None else 0.0
        result = run_epochs(runner, comm, tc, rank=rank, world_size=layout.world_size, device=device,
                            before_epoch=before_epoch,
                            checkpointer=_checkpointing(job, rank, device, comm, partition_digest),
                            resume_state=resume_state, extra_state={"history_start": start},
                            describe_rank=lambda r: _describe_rank(layout, r),
                            has_validation=bool(graph.val_mask.any()))
    # Each rank's peak memory and heap trims, in one gather.
    gathered = comm.all_gather_object((measure_peak_memory(device, rank=rank),
                                       heap_trim.trims if heap_trim is not None else None))
    memory, trims = [m for m, _ in gathered], [t for _, t in gathered]
    if heap_trim is not None:
        heap_trim_state = {**heap_trim_state, "trims": trims}  # per rank
    spawn_s = t_joined - job.startup["launch_unix_s"] if "launch_unix_s" in job.startup else 0.0
    history_s = 0.0 if resume_state is not None else float(start["time_s"])  # a resume restores the history
    slowest = comm.all_reduce_control([spawn_s, build_s, history_s, resumed_s], "max")
    start_bytes = comm.all_reduce_control([start["bytes"].get(k, 0) for k in KINDS], "sum")
    comm.barrier()
    if rank != 0:
        return None
    pc = cfg.parallel
    extra: dict[str, Any] = {"num_parameters": int(num_params), "self_loops_removed": job.self_loops_removed,
                             "startup": _startup(job, slowest, first_epoch_unix_s), "host_heap": host_heap,
                             "host_huge_pages": host_huge_pages, "host_heap_trim": heap_trim_state,
                             "trace": trace_state}
    if layout.distributed:
        extra.update({
            "stages": int(pc.stages), "ways": int(pc.ways), "chunks": int(layout.num_chunks),
            "launch": layout.launcher, "backend": layout.backend, "device": str(device),
            "bytes_predicted_note": "DESIGN.md 7 for one training epoch, total over workers; "
                                    "X replicated, so layer 1 sends no halo rows",
            "history_start": {"history_init": start.get("history_init"), "time_s": float(start["time_s"]),
                              "bytes": {k: int(round(v)) for k, v in zip(KINDS, start_bytes)}},
        })
    return build_record(
        cfg, mode=layout.mode, world_size=layout.world_size, graph_info=job.dataset, epochs=result.epochs,
        best=result.best, peak_memory=memory,
        partition_stats=None if chunked is None else chunked.stats.as_dict(), extra=extra,
        wall_time_s=time.time() - job.t_start, machine=machine_info(device.type, layout.backend),
        stopped_early=result.stopped_early, diverged=result.diverged, plan=job.plan,
    )
