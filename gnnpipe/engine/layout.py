"""The parallel layout of a run, resolved and validated once (DESIGN.md 1, 4-6).

A :class:`Layout` is to gnnpipe what torchtitan's ``ParallelDims`` is to a training
job: the degrees (P workers = W ways x S stages, C chunks, the layers per stage),
the device and backend the run uses, and ALL the rank arithmetic derived from them
(``rank = way * S + stage``, the neighbouring stage of a rank, the ranks of one
stage across the ways, the chunk block of each way). It is built by
:func:`resolve_layout` at the entry of a run, from the config, the graph's size and
the machine, and every check that can refuse a run before a process starts lives
there; code that is given a ``Layout`` trusts it.

The layout is frozen data: it is pickled to every local worker, and under torchrun
every rank resolves the same one from the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gnnpipe.engine.schedule import way_blocks
from gnnpipe.errors import ConfigError

__all__ = ["Layout", "resolve_layout", "stage_layer_ranges"]


def stage_layer_ranges(split: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """``((a, b), ...)`` per stage: stage s runs ``model.layers[a:b]`` (0-based)."""
    out, a = [], 0
    for n in split:
        out.append((a, a + int(n)))
        a += int(n)
    return tuple(out)


@dataclass(frozen=True)
class Layout:
    """Degrees, device and rank arithmetic of one run; built by :func:`resolve_layout`.

    Attributes:
        mode: ``single``, ``graph``, ``pipeline`` or ``hybrid``.
        world_size: P, the number of worker processes (1 for single).
        ways: W; stages: S; ``world_size == ways * stages``. Graph mode is W = P,
            S = 1 over its own runner; pipeline is W = 1.
        num_chunks: C.
        stage_split: layers per stage (S entries summing to the model's L).
        device_type: ``cpu`` or ``cuda`` (a worker uses ``cuda:LOCAL_RANK``).
        backend: ``gloo`` or ``nccl`` (None in single mode: no process group).
        launcher: ``inprocess`` (single), ``local`` (gnnpipe's launcher) or
            ``torchrun`` (an external env:// launcher).
    """

    mode: str
    world_size: int
    ways: int
    stages: int
    num_chunks: int
    stage_split: tuple[int, ...]
    device_type: str
    backend: str | None
    launcher: str

    # ------------------------------------------------------------ rank arithmetic
    def way_of(self, rank: int) -> int:
        """The way of ``rank`` (its pipeline replica)."""
        return int(rank) // self.stages

    def stage_of(self, rank: int) -> int:
        """The stage of ``rank``: which run of consecutive layers it owns."""
        return int(rank) % self.stages

    def rank_of(self, way: int, stage: int) -> int:
        """``way * S + stage``."""
        return int(way) * self.stages + int(stage)

    def prev_stage_rank(self, rank: int) -> int | None:
        """The rank of the previous stage of the same way, None on stage 0."""
        return None if self.stage_of(rank) == 0 else int(rank) - 1

    def next_stage_rank(self, rank: int) -> int | None:
        """The rank of the next stage of the same way, None on the last stage."""
        return None if self.stage_of(rank) == self.stages - 1 else int(rank) + 1

    def stage_group(self, stage: int) -> tuple[int, ...]:
        """The ranks of ``stage`` in every way, by way: the group whose weight
        gradients are summed before the step (hybrid)."""
        return tuple(self.rank_of(w, stage) for w in range(self.ways))

    def way_peer(self, rank: int, way: int) -> int:
        """The rank of ``rank``'s stage in ``way`` (its halo-exchange peer)."""
        return self.rank_of(way, self.stage_of(rank))

    def layer_range(self, stage: int) -> tuple[int, int]:
        """``(a, b)``: stage ``stage`` runs ``model.layers[a:b]``."""
        return stage_layer_ranges(self.stage_split)[int(stage)]

    def way_blocks(self) -> tuple[tuple[int, ...], ...]:
        """The chunk ids of each way (:func:`gnnpipe.engine.schedule.way_blocks`)."""
        return way_blocks(self.num_chunks, self.ways)

    @property
    def distributed(self) -> bool:
        return self.mode != "single"

    def as_dict(self) -> dict[str, Any]:
        """For the record and the logs."""
        return {"mode": self.mode, "world_size": self.world_size, "ways": self.ways, "stages": self.stages,
                "chunks": self.num_chunks, "stage_split": list(self.stage_split),
                "device": self.device_type, "backend": self.backend, "launcher": self.launcher}


def _cuda() -> tuple[bool, int]:
    import torch

    available = bool(torch.cuda.is_available())
    return available, (torch.cuda.device_count() if available else 0)


def resolve_layout(config: Any, num_nodes: int, *, launcher_world_size: int | None = None,
                   local_world_size: int | None = None,
                   cuda: tuple[bool, int] | None = None) -> Layout:
    """The :class:`Layout` of ``config`` (a :class:`gnnpipe.config.RunConfig`) on a
    graph of ``num_nodes`` vertices on this machine; ConfigError (one line) for
    anything that cannot run.

    ``launcher_world_size`` is WORLD_SIZE when an external launcher (torchrun) started
    this process, else None; ``local_world_size`` the number of its workers on this
    node. ``cuda`` = ``(available, device_count)`` (default: asked of torch).

    The config already refused what it can see alone (workers % ways, one layer per
    stage, the stage split's sum, chunks vs workers in graph mode); this adds what
    needs the graph (no more chunks than vertices), the launcher (WORLD_SIZE equals
    workers; single mode is not a torchrun mode) and the machine (CUDA present when
    asked for, NCCL only with CUDA, gloo has no CUDA point-to-point, at most one
    worker per GPU).
    """
    p, m = config.parallel, config.model
    mode = p.mode
    if launcher_world_size is not None:
        if mode == "single":
            raise ConfigError(f"parallel.mode: expected graph, pipeline or hybrid under torchrun "
                              f"(WORLD_SIZE={launcher_world_size}), found 'single'")
        if int(p.workers) != int(launcher_world_size):
            raise ConfigError(f"parallel.workers: expected WORLD_SIZE={launcher_world_size} under torchrun, "
                              f"found {p.workers}")
    if int(p.chunks) > int(num_nodes):
        raise ConfigError(f"parallel.chunks: expected at most N={num_nodes} (the number of vertices), "
                          f"found {p.chunks}")
    available, count = _cuda() if cuda is None else cuda
    if p.device == "cuda" and not available:
        raise ConfigError("parallel.device: expected a usable device, found 'cuda' but CUDA is not available")
    device_type = "cuda" if (p.device == "cuda" or (p.device == "auto" and available)) else "cpu"
    backend: str | None = None
    if mode != "single":
        backend = p.backend or ("nccl" if device_type == "cuda" else "gloo")
        if backend == "nccl" and device_type != "cuda":
            raise ConfigError("parallel.backend: expected gloo without CUDA, found 'nccl' but "
                              + ("device is cpu" if p.device == "cpu" else "CUDA is not available"))
        if device_type == "cuda":
            local = int(p.workers) if local_world_size is None else int(local_world_size)
            if local > count:
                raise ConfigError(f"parallel.workers: expected at most {count} workers on this node "
                                  f"(one GPU each), found {local}")
            if backend == "gloo" and int(p.workers) > 1:
                raise ConfigError("parallel.backend: expected nccl with device cuda "
                                  "(gloo has no CUDA point-to-point), found 'gloo'")
    launcher = "inprocess" if mode == "single" else ("local" if launcher_world_size is None else "torchrun")
    ways = int(p.ways) if mode == "hybrid" else (int(p.workers) if mode == "graph" else 1)
    stages = int(p.stages)
    return Layout(mode=mode, world_size=int(p.workers), ways=ways, stages=stages, num_chunks=int(p.chunks),
                  stage_split=tuple(int(x) for x in p.layer_split(int(m.layers))),
                  device_type=device_type, backend=backend, launcher=launcher)
