"""The distributed training loop shared by every mode, and ``run_distributed``.

:func:`run_distributed` is what ``gnnpipe.train`` / ``python -m gnnpipe.train`` call
for the modes other than ``single``:

1. validate the layout against the config, the graph and the machine (ConfigError,
   before any process starts);
2. remove the graph's self-loops (layers add their own) and partition it ONCE through
   the partition cache: in the launcher for a local run; under torchrun rank 0 builds
   the cache entry, the others read it after a barrier, and all ranks check that they
   hold the same partition;
3. start the workers (:func:`gnnpipe.engine.launch.launch_local`) or, under
   torchrun, be one of them;
4. in each worker (:func:`worker_main`): join the process group, build the FULL model
   with ``torch.manual_seed(train.seed)`` (the same parameters as ``single``), build
   the mode's runner (:data:`RUNNERS`) and run the loop below;
5. return rank 0's record (built by :mod:`gnnpipe.trainer.record`), None elsewhere.

Per epoch ``e`` (0-based for the runner, 1-based in the record):
``stats = runner.train_epoch(e)``; every ``eval_every`` epochs and at the last one
``runner.evaluate()``; then one uncounted control all-reduce sums the payload bytes
over the ranks (training kinds from ``stats``, ``evaluation`` from the counters) and
takes the slowest rank's times. The record carries, per epoch, the bytes by kind
beside ``runner.predicted_bytes()`` (DESIGN.md 7, training kinds), the time split and
every worker's peak memory.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import sys
import time
from typing import Any

import torch

from gnnpipe.engine import launch
from gnnpipe.engine.comm import KINDS, Comm
from gnnpipe.engine.context import WorkerContext
from gnnpipe.errors import ConfigError, GnnpipeInputError, WorkerFailedError
from gnnpipe.trainer.record import measure_peak_memory

__all__ = ["RUNNERS", "get_runner", "validate_layout", "run_distributed", "worker_main"]

logger = logging.getLogger("gnnpipe.engine")

#: Mode -> ``"module:Class"`` of its :class:`~gnnpipe.engine.context.ModeRunner`
#: (imported on use, so a mode whose module is missing fails as a ConfigError).
RUNNERS: dict[str, str] = {
    "graph": "gnnpipe.engine.graph_mode:GraphRunner",
    "pipeline": "gnnpipe.engine.pipeline:PipelineRunner",
    "hybrid": "gnnpipe.engine.hybrid:HybridRunner",
}


def get_runner(mode: str) -> type:
    """The runner class of ``mode``; ConfigError when unknown or not installed."""
    if mode not in RUNNERS:
        raise ConfigError(f"parallel.mode: expected one of {', '.join(RUNNERS)} for a distributed run, "
                          f"found {mode!r}")
    module, _, name = RUNNERS[mode].partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise ConfigError(f"parallel.mode: expected an available mode, found {mode!r} "
                          f"(module {module} is not installed)") from None
    cls = getattr(mod, name, None)
    if cls is None:
        raise ConfigError(f"parallel.mode: expected an available mode, found {mode!r} "
                          f"({module} has no {name})")
    return cls


def validate_layout(cfg: Any, num_nodes: int, *, local_world_size: int | None = None) -> None:
    """Everything that can be refused before a process starts (ConfigError, one line).

    The config refused most impossible layouts when it was built (workers % ways,
    fewer layers than stages, stage split sum, chunks vs workers in graph mode,
    unknown backend, NCCL without CUDA); this adds the checks that need the graph
    (no more chunks than vertices) and the machine (GPUs per node, gloo with CUDA),
    and that the mode's runner exists.
    """
    from gnnpipe.config import RunConfig

    if not isinstance(cfg, RunConfig):
        raise ConfigError(f"run_config: expected a RunConfig, found {type(cfg).__name__}")
    p = cfg.parallel
    if p.mode == "single":
        raise ConfigError("parallel.mode: expected graph, pipeline or hybrid for run_distributed, found 'single'")
    cfg.check_against_graph(num_nodes)
    launch.check_layout_resources(p, local_world_size)
    get_runner(p.mode)


def _chunk(cfg: Any, graph: Any) -> Any:
    from gnnpipe.partition import chunk_graph

    p = cfg.parallel
    return chunk_graph(graph, int(p.chunks), method=p.partition, seed=int(cfg.train.seed))


def _partition_digest(chunked: Any) -> str:
    return hashlib.sha1(chunked.partition.parts.numpy().tobytes()).hexdigest()


def run_distributed(run_config: Any, graph: Any = None) -> dict[str, Any] | None:
    """Train ``run_config`` in its distributed mode; the record on rank 0 (and in the
    local launcher), None on the other ranks of a torchrun launch.

    ``graph`` defaults to the dataset that ``run_config.data`` names. Raises
    ConfigError (bad layout, before any process starts) or WorkerFailedError (a
    worker raised or died; the message names its rank).
    """
    t_start = time.time()
    if graph is None:
        from gnnpipe.api import load_graph

        graph = load_graph(run_config.data)
    graph.validate()
    torchrun = launch.in_torchrun()
    local_world = None
    if torchrun:
        _, world, _, local_world = launch.env_ranks()
        if world != run_config.parallel.workers:
            raise ConfigError(f"parallel.workers: expected WORLD_SIZE={world} under torchrun, "
                              f"found {run_config.parallel.workers}")
    validate_layout(run_config, graph.num_nodes, local_world_size=local_world)
    g = graph.remove_self_loops()
    info = _graph_info(graph, g)
    if torchrun:
        return _torchrun_worker(run_config, g, info, t_start)
    chunked = _chunk(run_config, g)
    logger.info("launching %d %s workers", run_config.parallel.workers, run_config.parallel.mode)
    return launch.launch_local(worker_main, int(run_config.parallel.workers),
                               (run_config, chunked, info, t_start, None),
                               log_level=run_config.train.log_level)


def _graph_info(graph: Any, g: Any) -> dict[str, Any]:
    from gnnpipe.trainer.record import graph_summary

    return {"summary": graph_summary(graph), "self_loops_removed": int(graph.num_edges - g.num_edges)}


def _torchrun_worker(cfg: Any, g: Any, info: dict[str, Any], t_start: float) -> dict[str, Any] | None:
    """One torchrun worker: the same body as a local one; a failure ends this process
    non-zero at once (torchrun then stops the others and names the first failure)."""
    try:
        return worker_main(cfg, None, info, t_start, g)
    except GnnpipeInputError:
        raise
    except BaseException as exc:
        rank = int(os.environ.get("RANK", "-1"))
        logger.error("rank %d failed: %s: %s", rank, type(exc).__name__, exc, exc_info=True)
        print(f"error: {WorkerFailedError(rank, f'{type(exc).__name__}: {exc}')}".replace("\n", " "),
              file=sys.stderr, flush=True)
        logging.shutdown()
        os._exit(1)  # no interpreter teardown: destroying a group with dead peers can block


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def worker_main(cfg: Any, chunked: Any, info: dict[str, Any], t_start: float,
                graph: Any = None) -> dict[str, Any] | None:
    """The body of every worker, local or torchrun: join, build, train, report.

    ``chunked`` is the partitioned graph (local launch) or None, in which case it is
    built here from ``graph`` through the partition cache (torchrun). Returns the
    record on rank 0, None elsewhere.
    """
    from gnnpipe.models import build_model
    from gnnpipe.trainer.progress import Progress
    from gnnpipe.trainer.record import (
        EpochRecord,
        build_record,
        machine_info,
        select_best,
    )
    from gnnpipe.trainer.single import EarlyStopping

    rank, world, local_rank, device = launch.join_process_group(cfg.parallel)
    comm = Comm(rank, world, device, timeout_s=launch.dist_timeout_s())
    tc, pc = cfg.train, cfg.parallel
    if chunked is None:
        # Rank 0 builds the cache entry; the others read it after the barrier.
        if rank == 0:
            chunked = _chunk(cfg, graph)
        comm.barrier()
        if rank != 0:
            chunked = _chunk(cfg, graph)
        digests = comm.all_gather_object(_partition_digest(chunked))
        if len(set(digests)) != 1:
            raise RuntimeError("the ranks computed different partitions: put the partition cache "
                               "($GNNPIPE_CACHE_DIR) on a filesystem that every node shares")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    g = chunked.graph
    dtype = tc.torch_dtype
    # The FULL model, seeded as in single mode, so its parameters equal single's.
    torch.manual_seed(tc.seed)
    model = build_model(cfg.model, in_features=g.num_features, num_classes=g.num_classes).to(dtype=dtype)
    # Dropout streams then differ per worker (each masks different rows).
    torch.manual_seed(int(tc.seed) * 1_000_003 + 1 + rank)
    ctx = WorkerContext(rank=rank, world_size=world, device=device, dtype=dtype, config=cfg,
                        chunked=chunked, comm=comm, model=model, local_rank=local_rank)
    runner = get_runner(pc.mode)(ctx)
    predicted = {k: int(v) for k, v in runner.predicted_bytes().items()}
    num_params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        logger.info("%s mode: %d workers, %d chunks, %s on %s, %d parameters, device %s, backend %s",
                    pc.mode, world, chunked.num_chunks, cfg.model.model, g, num_params, device,
                    pc.resolved_backend())
    progress = Progress(tc.epochs, log_every=tc.log_every, rank=rank, enabled=None if rank == 0 else False)
    stopper = EarlyStopping(tc.patience, tc.monitor)
    epochs: list[EpochRecord] = []
    stopped_early = False
    comm.take_counters()
    comm.take_wait_time()
    for e in range(tc.epochs):
        epoch = e + 1
        launch.maybe_inject_failure(rank, epoch)
        _sync(device)
        t0 = time.perf_counter()
        stats = runner.train_epoch(e)
        _sync(device)
        dt = time.perf_counter() - t0
        evaluated = epoch % tc.eval_every == 0 or epoch == tc.epochs
        acc: dict[str, float | None] | None = None
        eval_dt = 0.0
        if evaluated:
            t1 = time.perf_counter()
            acc = runner.evaluate()
            _sync(device)
            eval_dt = time.perf_counter() - t1
        mine = dict(stats.bytes_sent)
        for k, v in comm.take_counters().items():  # evaluation (and anything after the epoch)
            mine[k] = mine.get(k, 0) + v
        comm.take_wait_time()
        summed = comm.all_reduce_control([mine.get(k, 0) for k in KINDS], "sum")
        slowest = comm.all_reduce_control([dt, stats.compute_s, stats.comm_wait_s, stats.bubble_s, eval_dt], "max")
        rec = EpochRecord(epoch=epoch, loss=float(stats.loss), epoch_time_s=slowest[0],
                          compute_s=slowest[1], comm_wait_s=slowest[2], bubble_s=slowest[3],
                          bytes={k: int(round(v)) for k, v in zip(KINDS, summed)},
                          bytes_predicted=dict(predicted))
        stop = False
        if acc is not None:
            rec.set_evaluation(acc)
            rec.eval_time_s = slowest[4]
            stop = stopper.update(acc)
        epochs.append(rec)
        if rank == 0:
            progress.update(epoch, rec.loss, rec.epoch_time_s, rec.val_acc)
        # The loss and the accuracies are identical on every rank, so every rank takes
        # the same decision here and none is left waiting.
        if not torch.isfinite(torch.tensor(rec.loss)):
            logger.warning("epoch %d: loss is not finite (%s); stopping", epoch, rec.loss)
            break
        if stop:
            stopped_early = epoch < tc.epochs
            break
    progress.close()
    memory = comm.all_gather_object(measure_peak_memory(device, rank=rank))
    comm.barrier()
    if rank != 0:
        if launch.in_torchrun():
            launch.leave_process_group()
        return None
    record = build_record(
        cfg, mode=pc.mode, world_size=world, graph_info=info["summary"], epochs=epochs,
        best=select_best(epochs, tc.monitor), peak_memory=memory, partition_stats=chunked.stats.as_dict(),
        extra={"num_parameters": int(num_params), "self_loops_removed": info["self_loops_removed"],
               "stages": int(pc.stages), "ways": int(pc.ways), "chunks": int(chunked.num_chunks),
               "launch": "torchrun" if launch.in_torchrun() else "local",
               "backend": pc.resolved_backend(), "device": str(device),
               "bytes_predicted_note": "DESIGN.md 7 for one training epoch, total over workers; "
                                       "X replicated, so layer 1 sends no halo rows"},
        wall_time_s=time.time() - t_start, machine=machine_info(device.type, pc.resolved_backend()),
        stopped_early=stopped_early,
    )
    if launch.in_torchrun():
        launch.leave_process_group()
    return record
