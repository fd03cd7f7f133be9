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


def arena_threshold(case: dict) -> "Any":
    """A context in which a worker's stages move every saved tensor into their arena
    (``case["arena_all"]``: the tiny test graphs' tensors are all below
    ``saved_arena.MIN_BYTES``), or leave the threshold as it is."""
    import contextlib

    from gnnpipe.engine import saved_arena

    @contextlib.contextmanager
    def ctx():
        before = saved_arena.MIN_BYTES
        if case.get("arena_all"):
            saved_arena.MIN_BYTES = 0
        try:
            yield
        finally:
            saved_arena.MIN_BYTES = before
    return ctx()
