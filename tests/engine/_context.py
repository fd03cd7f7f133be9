"""A :class:`WorkerContext` for a runner under test: the layout resolved from the
config exactly as the entry resolves it (CPU, gloo, a local launch)."""

from __future__ import annotations

from typing import Any

import torch


def make_context(rank: int, cfg: Any, chunked: Any, comm: Any, model: Any, dtype: torch.dtype = torch.float64):
    from gnnpipe.engine.context import WorkerContext
    from gnnpipe.engine.layout import resolve_layout

    layout = resolve_layout(cfg, chunked.graph.num_nodes, cuda=(False, 0))
    return WorkerContext(rank=rank, layout=layout, device=torch.device("cpu"), dtype=dtype, config=cfg,
                         graph=chunked.graph, chunked=chunked, comm=comm, model=model)
