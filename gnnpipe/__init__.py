"""gnnpipe: distributed full-graph training of deep GNNs.

Three ways to spread one model over many workers: ``graph`` (exact graph
parallelism), ``pipeline`` (GNNPipe: layer-level model parallelism over METIS chunks
with historical halo embeddings) and ``hybrid``. ``single`` is the exact
single-process reference.

Heavy submodules are imported lazily so that ``import gnnpipe`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Graph": ("gnnpipe.data", "Graph"),
    "load_dataset": ("gnnpipe.data", "load_dataset"),
    "list_datasets": ("gnnpipe.data", "list_datasets"),
    "train": ("gnnpipe.api", "train"),
    "ModelConfig": ("gnnpipe.config", "ModelConfig"),
    "TrainConfig": ("gnnpipe.config", "TrainConfig"),
    "ParallelConfig": ("gnnpipe.config", "ParallelConfig"),
    "DataConfig": ("gnnpipe.config", "DataConfig"),
    "RunConfig": ("gnnpipe.config", "RunConfig"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'gnnpipe' has no attribute {name!r}")
