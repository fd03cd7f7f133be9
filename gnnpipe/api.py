"""The library entry points: ``gnnpipe.train`` and ``train_from_config``.

``train(graph, model_config, train_config, parallel_config)`` trains on a graph you
already hold and returns the result record (a dict, schema in README.md). Mode
``single`` runs in this process; the distributed modes go to
``gnnpipe.engine.run_distributed``, which starts (or, under torchrun, joins) the
worker processes. ``train_from_config(run_config)`` first loads the dataset that
``run_config.data`` names. When ``train.json_out`` is set the record is also written
there, atomically, by the process that holds it (rank 0).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gnnpipe.config import DataConfig, ModelConfig, ParallelConfig, RunConfig, TrainConfig
from gnnpipe.errors import ConfigError

__all__ = ["train", "train_from_config", "load_graph", "run", "check_writable"]


def _engine_entry() -> Any:
    try:
        from gnnpipe.engine import run_distributed  # type: ignore[attr-defined]
    except ImportError as exc:
        # Only "the engine has no run_distributed" means the mode is missing; any
        # other import failure inside the engine is a bug and must surface.
        if "run_distributed" not in str(exc):
            raise
        return None
    return run_distributed


def _reports() -> bool:
    """Whether this process writes the record: always, except on the ranks other than
    0 of a torchrun launch (whose nodes need not see rank 0's path)."""
    return os.environ.get("RANK", "0") == "0"


def check_writable(path: str) -> None:
    """Refuse, before training, a ``json_out`` that could not be written at the end:
    an existing directory, or a location whose nearest existing folder is not a
    writable directory. Creates nothing."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise ConfigError(f"train.json_out: expected a file path, found the directory {str(p)!r}")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"train.json_out: expected a writable location, found {str(p)!r} "
                          f"({str(parent)!r} is not a writable directory)")


def run(run_config: RunConfig, graph: Any) -> dict[str, Any] | None:
    """Train ``graph`` as ``run_config`` says; the record (None on ranks other than 0
    of a distributed run). Writes ``train.json_out`` when set."""
    if not isinstance(run_config, RunConfig):
        raise ConfigError(f"run_config: expected a RunConfig, found {type(run_config).__name__}")
    run_config.check_against_graph(graph.num_nodes)
    if run_config.train.json_out and _reports():
        check_writable(run_config.train.json_out)
    mode = run_config.parallel.mode
    if mode == "single":
        from gnnpipe.trainer.single import train_single

        record = train_single(run_config, graph)
    else:
        entry = _engine_entry()
        if entry is None:
            raise ConfigError(f"parallel.mode: mode {mode} is not available yet, found no distributed engine")
        record = entry(run_config, graph)
    if record is not None and run_config.train.json_out:
        from gnnpipe.trainer.record import write_json_atomic

        try:
            write_json_atomic(record, run_config.train.json_out)
        except OSError as exc:
            raise ConfigError(f"train.json_out: expected a writable path, found {run_config.train.json_out!r} "
                              f"({exc.strerror or exc})") from None
    return record


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


def load_graph(data_config: DataConfig) -> Any:
    """The graph that ``data_config`` names, via ``gnnpipe.data.load_dataset``."""
    from gnnpipe import data

    return data.load_dataset(data_config.dataset, root=data_config.resolved_root(), **data_config.options)


def train_from_config(run_config: RunConfig) -> dict[str, Any] | None:
    """Load ``run_config.data`` and train on it; the record (rank 0) or None."""
    if not isinstance(run_config, RunConfig):
        raise ConfigError(f"run_config: expected a RunConfig, found {type(run_config).__name__}")
    if run_config.train.json_out and _reports():
        check_writable(run_config.train.json_out)  # before the (maybe long) load
    return run(run_config, load_graph(run_config.data))
