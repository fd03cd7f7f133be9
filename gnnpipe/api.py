"""The library entry points: ``gnnpipe.train``, ``train_from_config`` and ``run``.

``train(graph, model_config, train_config, parallel_config)`` trains on a graph you
already hold and returns the result record (a dict, schema in README.md);
``train_from_config(run_config)`` first loads the dataset that ``run_config.data``
names. Both go through :func:`run`, the ONE gate of a run: it checks the outputs
(``train.json_out`` writable) before anything long happens, validates the graph,
resolves the :class:`~gnnpipe.engine.layout.Layout` against the graph and the
machine (every refusal is a :class:`~gnnpipe.errors.ConfigError` before a process
starts), then trains: ``single`` in this process, the distributed modes through
:func:`gnnpipe.trainer.distributed.run_distributed`, which starts (or, under
torchrun, joins) the worker processes. When ``train.json_out`` is set the record is
written there, atomically, by the process that holds it (rank 0).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable

from gnnpipe.config import DataConfig, ModelConfig, ParallelConfig, RunConfig, TrainConfig, stale_sensitive
from gnnpipe.errors import ConfigError
from gnnpipe.trainer.machine import process_start_unix_s

__all__ = ["train", "train_from_config", "run", "check_writable", "stale_read_warning"]


def check_writable(path: str, what: str = "train.json_out") -> None:
    """Refuse, before training, an output file that could not be written at the end:
    an existing directory, or a location whose nearest existing folder is not a
    directory in which a file can be created. That is tried, not guessed from the
    permission bits (which say yes to root even under /proc): a temporary file is made
    there and removed at once, so nothing is left. ``what`` names the setting."""
    import tempfile

    p = Path(path).expanduser()
    if p.is_dir():
        raise ConfigError(f"{what}: expected a file path, found the directory {str(p)!r}")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    reason = f"{str(parent)!r} is not a directory"
    if parent.is_dir():
        try:
            with tempfile.TemporaryFile(dir=parent):
                return
        except OSError as exc:
            reason = f"a file cannot be created in {str(parent)!r}: {exc.strerror or exc}"
    raise ConfigError(f"{what}: expected a writable location, found {str(p)!r} ({reason})")


def run(run_config: RunConfig, graph: Any | Callable[[], Any]) -> dict[str, Any] | None:
    """Train ``graph`` (a :class:`gnnpipe.Graph`, or a function that loads it, called
    after the cheap checks) as ``run_config`` says; the record (None on ranks other
    than 0 of a torchrun launch). Writes ``train.json_out`` when set."""
    from gnnpipe.engine import environment
    from gnnpipe.engine.layout import resolve_layout
    from gnnpipe.trainer.worker import Job

    if not isinstance(run_config, RunConfig):
        raise ConfigError(f"run_config: expected a RunConfig, found {type(run_config).__name__}")
    env = environment.torchrun_env()
    reports = env is None or env.rank == 0
    # Before the graph's first large allocation; the local launcher's workers inherit it.
    from gnnpipe.huge_pages import request_huge_pages

    request_huge_pages(run_config.train.host_huge_pages)
    if run_config.train.json_out and reports:
        check_writable(run_config.train.json_out)  # before the (maybe long) load
    tc = run_config.train
    if tc.checkpoint_dir:
        check_writable(str(Path(tc.checkpoint_dir) / "manifest.json"), "train.checkpoint_dir")
    if reports and tc.metrics_jsonl:
        check_writable(tc.metrics_jsonl, "train.metrics_jsonl")
    if reports and tc.tensorboard:
        from gnnpipe.trainer.sinks import check_tensorboard

        check_tensorboard()
        check_writable(str(Path(tc.tensorboard) / "events"), "train.tensorboard")
    t_load = time.time()
    if callable(graph):
        graph = graph()
    graph.validate()
    load_s = time.time() - t_load
    if reports and not bool(graph.val_mask.any()):
        logging.getLogger("gnnpipe.train").warning(
            "%s has no validation vertices: the best epoch is the last evaluated one and patience does not apply",
            graph.name or "the graph")
    plan, plan_s = None, 0.0
    from gnnpipe.plan.auto import needs_plan, resolve_auto

    if needs_plan(run_config):  # --mode auto / --chunks auto: the planner's choice on this graph
        t_plan = time.time()
        run_config, plan = resolve_auto(run_config, graph, torchrun=env is not None)
        plan_s = time.time() - t_plan
    layout = resolve_layout(run_config, graph.num_nodes,
                            launcher_world_size=None if env is None else env.world_size,
                            local_world_size=None if env is None else env.local_world_size)
    warning = stale_read_warning(run_config, layout)
    if reports and warning:
        logging.getLogger("gnnpipe.train").warning("%s", warning)
    from gnnpipe.trainer.record import graph_summary

    g = graph.remove_self_loops()
    dataset = graph_summary(graph)
    checkpoint_dataset = None
    if tc.checkpoint_dir:  # checkpoints name the dataset by its summary and a digest of its content
        from gnnpipe.trainer.checkpoint import dataset_digest

        checkpoint_dataset = {**dataset, "content_sha256": dataset_digest(graph)}
    job = Job(config=run_config, layout=layout, dataset=dataset, checkpoint_dataset=checkpoint_dataset,
              self_loops_removed=int(graph.num_edges - g.num_edges), t_start=time.time(),
              resume_from=_resume_point(run_config, layout, checkpoint_dataset),
              startup={"process_start_unix_s": process_start_unix_s(), "load_s": load_s, "plan_s": plan_s})
    if plan is not None:
        from dataclasses import replace

        job = replace(job, plan=plan)
    if layout.mode == "single":
        record = _train_in_process(job, g)
    else:
        from gnnpipe.trainer.distributed import run_distributed

        record = run_distributed(job, g)
    if record is not None and run_config.train.json_out:
        from gnnpipe.trainer.record import write_json_atomic

        try:
            write_json_atomic(record, run_config.train.json_out)
        except OSError as exc:
            raise ConfigError(f"train.json_out: expected a writable path, found {run_config.train.json_out!r} "
                              f"({exc.strerror or exc})") from None
    return record


def _resume_point(run_config: RunConfig, layout: Any, dataset: dict[str, Any] | None) -> str | None:
    """With ``train.resume``: the newest complete checkpoint, checked against this run
    (ConfigError naming what differs); None to start afresh."""
    from gnnpipe.trainer.checkpoint import check_compatible, find_latest

    tc = run_config.train
    if not tc.resume:
        return None
    found = find_latest(tc.checkpoint_dir)  # type: ignore[arg-type]
    if found is None:
        logging.getLogger("gnnpipe.train").info("no complete checkpoint in %s: starting afresh", tc.checkpoint_dir)
        return None
    check_compatible(found, run_config.to_dict(), layout.as_dict(), dataset)
    return str(found.folder)


def _train_in_process(job: Any, graph: Any) -> dict[str, Any] | None:
    """Single mode: this process is the one worker, with a one-rank communicator."""
    import torch

    from gnnpipe.engine.comm import Comm
    from gnnpipe.trainer.worker import train_rank

    from gnnpipe.engine.fault_hooks import maybe_inject_failure

    device = torch.device(job.layout.device_type)
    return train_rank(job, rank=0, device=device, comm=Comm(0, 1, device), graph=graph, chunked=None,
                      before_epoch=lambda e: maybe_inject_failure(0, e))


def train(graph: Any, model_config: ModelConfig | None = None, train_config: TrainConfig | None = None,
          parallel_config: ParallelConfig | None = None) -> dict[str, Any] | None:
    """Train a model on ``graph`` (a :class:`gnnpipe.Graph`) and return the record.

    Unset configs take their defaults (``gnnpipe.config``); the default parallel
    layout is ``gnnpipe.config.DEFAULT_LAYOUT`` (pipeline, 2 worker processes), so pass
    ``ParallelConfig(mode="single")`` to stay in this process. The record's
    ``config.data.dataset`` is the graph's name.
    """
    for what, value, cls in (("model_config", model_config, ModelConfig),
                             ("train_config", train_config, TrainConfig),
                             ("parallel_config", parallel_config, ParallelConfig)):
        if value is not None and not isinstance(value, cls):
            raise ConfigError(f"{what}: expected a gnnpipe.{cls.__name__}, found {type(value).__name__}")
    from gnnpipe.data import Graph

    if not isinstance(graph, Graph):
        raise ConfigError(f"graph: expected a gnnpipe.Graph, found {type(graph).__name__}")
    cfg = RunConfig(
        data=DataConfig(dataset=graph.name or "graph"),
        model=model_config or ModelConfig(),
        train=train_config or TrainConfig(),
        parallel=parallel_config or ParallelConfig(),
    )
    return run(cfg, graph)


def train_from_config(run_config: RunConfig) -> dict[str, Any] | None:
    """Load ``run_config.data`` and train on it; the record (rank 0) or None."""
    from gnnpipe.data import load_from_config

    return run(run_config, lambda: load_from_config(run_config.data))


def stale_read_warning(run_config: RunConfig, layout: Any) -> str | None:
    """The warning for a stale-sensitive model (:func:`gnnpipe.config.stale_sensitive`)
    pipelined over more chunks than stages x ways of the resolved ``layout``
    (:class:`gnnpipe.engine.layout.Layout`), else None. Such a count is never a default
    (the config narrows it), so it was asked for: ``--chunks`` or the planner given a
    count. Such a stack with dropout collapses in the pipelined modes as the reference
    system's does (measured, ``bench/results/gcn-long``: GCN-32 on Amazon Photo, 100
    epochs, S = 2: 20.34 points below exact training at C = 8, 3 seeds; 1.44 above at
    C = S = 2 with R = 1, the default, 6 seeds); fewer chunks mean fewer stale reads."""
    m, mode = run_config.model, run_config.parallel.mode
    if mode not in ("pipeline", "hybrid") or not stale_sensitive(m.model, m.layers):
        return None
    if layout.num_chunks <= layout.stages * layout.ways:
        return None
    return (f"{m.model}-{m.layers} in {mode} mode at C = {layout.num_chunks} chunks: deep residual-free models lose "
            f"accuracy to stale halo reads (GCN-32 on Amazon Photo, S = 2: -20.3 points against exact "
            f"training at C = 8, +1.4 at C = S with --snapshot-period 1, the default; "
            f"bench/results/gcn-long); leave --chunks unset (one chunk per stage and way), or use "
            f"gcnii / resgcn+")
