"""Candidate layouts of a run and the choice among them: plans as frozen data.

:func:`make_plan` lists, for a graph (:class:`~gnnpipe.plan.inputs.GraphStats`), a
model and P workers, every layout worth considering -- single; graph (W = P);
pipeline (S = P) at C = 1, 2, 4, 8 x S; hybrid at every W dividing P (S = P / W) at
C = 1, 2, 4 x P (for a stale-sensitive model, :func:`gnnpipe.config.stale_sensitive`,
only C = S x W, one chunk per stage and way, as the run's default) -- each pipelined
one with the equal stage split and the cost-balanced one (:func:`balanced_split`).
Each :class:`Candidate` carries its predicted bytes per epoch (DESIGN.md 7 through the
engine's own functions:
``predicted_graph_bytes``, ``predicted_pipeline_bytes``, ``predicted_hybrid_bytes``;
exact when the graph is at hand, from estimated halos otherwise), predicted peak
memory per worker and predicted epoch time (:mod:`gnnpipe.plan.costs`). The plan
chooses the fastest candidate that fits in memory; one that does not fit is never
chosen. Every figure here is a prediction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from gnnpipe.config import equal_layer_split as equal_split  # the split a run resolves
from gnnpipe.config import stale_sensitive
from gnnpipe.engine.comm import KINDS
from gnnpipe.errors import ConfigError
from gnnpipe.plan.costs import ModelShape, layer_costs, predict_memory, predict_time
from gnnpipe.plan.inputs import GraphStats, HardwareProfile

__all__ = ["Candidate", "Plan", "make_plan", "balanced_split", "equal_split", "predicted_bytes"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate:
    """One layout and its predicted figures (all predictions).

    Shapes/units: ``bytes_per_epoch`` kind -> bytes of one training epoch, summed over
    workers; ``peak_memory_bytes`` of the largest worker, ``memory_limit_bytes`` what
    one worker may use; times in seconds, ``epoch_s = compute_s + comm_s + bubble_s``.
    """

    mode: str
    workers: int
    ways: int
    stages: int
    chunks: int
    stage_split: tuple[int, ...]
    split: str
    bytes_per_epoch: dict[str, int]
    bytes_exact: bool
    peak_memory_bytes: int
    memory_limit_bytes: int
    epoch_s: float
    compute_s: float
    comm_s: float
    bubble_s: float
    fits: bool
    reason: str

    @property
    def total_bytes(self) -> int:
        return int(sum(self.bytes_per_epoch.values()))

    def label(self) -> str:
        if self.mode in ("single", "graph"):
            return f"{self.mode} P={self.workers}"
        w = f"W={self.ways} " if self.mode == "hybrid" else ""
        return f"{self.mode} {w}S={self.stages} C={self.chunks} [{self.split}]"

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "workers": self.workers, "ways": self.ways, "stages": self.stages,
                "chunks": self.chunks, "stage_split": list(self.stage_split), "split": self.split,
                "predicted_bytes_per_epoch": dict(self.bytes_per_epoch), "bytes_exact": self.bytes_exact,
                "predicted_peak_memory_bytes": self.peak_memory_bytes,
                "memory_limit_bytes": self.memory_limit_bytes, "predicted_epoch_s": self.epoch_s,
                "predicted_compute_s": self.compute_s, "predicted_comm_s": self.comm_s,
                "predicted_bubble_s": self.bubble_s, "fits": self.fits, "reason": self.reason}


@dataclass(frozen=True)
class Plan:
    """The candidates, sorted by predicted epoch time, and the one chosen (None when
    nothing fits); ``reason`` says why."""

    graph: dict[str, Any]
    model: dict[str, Any]
    profile_source: str
    candidates: tuple[Candidate, ...]
    chosen: Candidate | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"graph": self.graph, "model": self.model, "profile": self.profile_source,
                "chosen": None if self.chosen is None else self.chosen.as_dict(), "reason": self.reason,
                "candidates": [c.as_dict() for c in self.candidates]}


def balanced_split(layer_s: list[float], stages: int, first_extra_s: float, last_extra_s: float) -> tuple[int, ...]:
    """The contiguous split of the layers (costs ``layer_s``, seconds) into ``stages``
    runs of at least one layer that minimises the largest stage cost, stage 0 also
    paying ``first_extra_s`` (encode) and the last ``last_extra_s`` (classifier, loss).
    Exact (dynamic programme over split points); ties keep layers on later stages."""
    L, S = len(layer_s), int(stages)
    prefix = [0.0]
    for c in layer_s:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[s][i]: the least largest cost of putting layers [0, i) on stages [0, s].
    best = [[inf] * (L + 1) for _ in range(S)]
    cut = [[0] * (L + 1) for _ in range(S)]
    for i in range(1, L + 1):
        best[0][i] = prefix[i] + first_extra_s
    for s in range(1, S):
        for i in range(s + 1, L + 1):
            for j in range(s, i):
                cost = prefix[i] - prefix[j] + (last_extra_s if s == S - 1 and i == L else 0.0)
                v = max(best[s - 1][j], cost)
                if v < best[s][i] - 1e-15:
                    best[s][i], cut[s][i] = v, j
    if S == 1:
        return (L,)
    out, i = [], L
    for s in range(S - 1, 0, -1):
        j = cut[s][i]
        out.append(i - j)
        i = j
    out.append(i)
    return tuple(reversed(out))


class _StandIn:
    """What :func:`predicted_hybrid_bytes` reads of a ChunkedGraph, from statistics:
    N, C, and a pair-count table whose sum is the estimated ``M_W``."""

    def __init__(self, num_nodes: int, num_chunks: int, m_w: int) -> None:
        self.graph = type("G", (), {"num_nodes": int(num_nodes)})()
        self.num_chunks = int(num_chunks)
        self._m_w = int(m_w)

    def group_pair_counts(self, _group_of: Any, num_groups: int | None = None) -> torch.Tensor:
        return torch.tensor([self._m_w], dtype=torch.int64)


def predicted_bytes(shape: ModelShape, g: GraphStats, mode: str, workers: int, ways: int, chunks: int,
                    split: tuple[int, ...], stage_element_size: int = 4) -> tuple[dict[str, int], bool]:
    """DESIGN.md 7 bytes of one training epoch by kind, through the engine's own
    prediction functions; ``(bytes, exact)``."""
    from gnnpipe.engine.graph_mode import predicted_graph_bytes
    from gnnpipe.engine.hybrid import predicted_hybrid_bytes
    from gnnpipe.engine.pipeline import predicted_pipeline_bytes

    if mode == "single":
        return dict.fromkeys(KINDS, 0), True
    if mode == "graph":
        return predicted_graph_bytes(shape.model, g.cut(workers).M, workers), g.exact
    if mode == "pipeline":
        return predicted_pipeline_bytes(shape.model, g.num_nodes, split, stage_element_size), True
    chunked = g.chunked_of(chunks) if g.chunked_of is not None else \
        _StandIn(g.num_nodes, chunks, g.way_halo_rows(chunks, ways))
    return predicted_hybrid_bytes(shape.model, chunked, split, ways, 4, stage_element_size), g.exact


def _layouts(workers: int, layers: int, num_nodes: int, modes: tuple[str, ...],
             ways: int | None, chunks: int | None,
             fewest_stale: bool = False) -> list[tuple[str, int, int, int]]:
    """(mode, W, S, C) to consider; ``fewest_stale``: pipelined layouts only at
    C = S x W = P when ``chunks`` is not given."""
    P = int(workers)

    def counts(multiples: tuple[int, ...]) -> list[int]:
        return [chunks] if chunks else [P] if fewest_stale else [m * P for m in multiples]

    out: list[tuple[str, int, int, int]] = []
    if "single" in modes:
        out.append(("single", 1, 1, 1))
    if P < 2:
        return out
    if "graph" in modes:
        out.append(("graph", P, 1, P))
    if "pipeline" in modes and layers >= P:
        for c in counts((1, 2, 4, 8)):
            if c <= num_nodes:
                out.append(("pipeline", 1, P, c))
    if "hybrid" in modes:
        for w in ([ways] if ways else [w for w in range(2, P + 1) if P % w == 0]):
            s = P // w
            if layers < s:
                continue
            for c in counts((1, 2, 4)):
                if w <= c <= num_nodes:
                    out.append(("hybrid", w, s, c))
    return out


def make_plan(stats: GraphStats, shape: ModelShape, profile: HardwareProfile, *, workers: int,
              modes: tuple[str, ...] = ("single", "graph", "pipeline", "hybrid"), ways: int | None = None,
              chunks: int | None = None, stage_split: tuple[int, ...] | None = None,
              snapshot_period: int = 23, stage_element_size: int = 4, row_masks: bool = False,
              cross_epoch_chunks: int = 0) -> Plan:
    """Every candidate layout for ``workers`` workers (restricted to ``modes``, and to
    ``ways`` / ``chunks`` / ``stage_split`` when given), its predictions, and the
    fastest one that fits (module docstring). ``row_masks``: the pipelined modes'
    dropout draws one mask per row and layer (``--dropout-masks row``);
    ``cross_epoch_chunks``: pipeline mode's ``--cross-epoch-chunks`` K (capped at each
    candidate's C)."""
    if workers < 1:
        raise ConfigError(f"workers: expected an integer >= 1, found {workers}")
    cands: list[Candidate] = []
    L = shape.layers
    fewest_stale = chunks is None and stale_sensitive(shape.kind, L)
    for mode, w, s, c in _layouts(workers, L, stats.num_nodes, modes, ways, chunks, fewest_stale):
        p_count = 1 if mode == "single" else workers
        splits: list[tuple[str, tuple[int, ...]]] = [("equal", equal_split(L, s))]
        if stage_split is not None and mode in ("pipeline", "hybrid"):
            splits = [("given", tuple(stage_split))]
        elif s > 1:
            layer_s, enc_s, dec_s = layer_costs(profile, shape, stats, c, row_masks=row_masks)
            bal = balanced_split(layer_s, s, enc_s, dec_s)
            if bal != splits[0][1]:
                splits.append(("balanced", bal))
        m_w = stats.way_halo_rows(c, w) if mode == "hybrid" else 0
        for split_kind, split in splits:
            t = predict_time(profile, shape, stats, mode=mode, workers=p_count, ways=w, stages=s, chunks=c,
                             split=split, way_halo_rows=m_w, row_masks=row_masks,
                             cross_epoch_chunks=min(cross_epoch_chunks, c))
            mem = predict_memory(profile, shape, stats, mode=mode, workers=p_count, ways=w, stages=s,
                                 chunks=c, split=split, way_halo_rows=m_w, snapshot_period=snapshot_period,
                                 cross_epoch_chunks=min(cross_epoch_chunks, c) if mode == "pipeline" else 0)
            limit = profile.device_memory_bytes // (p_count if profile.shared_memory else 1)
            by_kind, exact = predicted_bytes(shape, stats, mode, p_count, w, c, split, stage_element_size)
            fits = mem <= limit
            why = _reason(mode, mem, limit, fits, t.bubble_s, t.epoch_s)
            cands.append(Candidate(mode=mode, workers=p_count, ways=w, stages=s, chunks=c, stage_split=split,
                                   split=split_kind if s > 1 else "-", bytes_per_epoch=by_kind,
                                   bytes_exact=exact, peak_memory_bytes=mem, memory_limit_bytes=int(limit),
                                   epoch_s=t.epoch_s, compute_s=t.compute_s, comm_s=t.comm_s,
                                   bubble_s=t.bubble_s, fits=fits, reason=why))
    cands.sort(key=lambda c: (c.epoch_s, c.total_bytes))
    fitting = [c for c in cands if c.fits]
    chosen = fitting[0] if fitting else None
    if chosen is None:
        reason = "no candidate fits in memory" if cands else "no candidate layout for these settings"
    else:
        others = [c for c in cands if c is not chosen]
        faster = [c for c in others if c.epoch_s < chosen.epoch_s]
        reason = (f"fastest predicted epoch ({chosen.epoch_s:.3g} s) of {len(fitting)} fitting candidate(s)"
                  + (f"; {len(faster)} faster one(s) do not fit in memory" if faster else "")
                  + (f"; pipelined layouts at one chunk per stage and way ({shape.kind}-{L} loses accuracy "
                     "to stale halo reads)" if fewest_stale and chosen.mode in ("pipeline", "hybrid") else ""))
    stats.release()
    return Plan(graph=stats.as_dict(), model={"model": shape.kind, "layers": L, "hidden": shape.hidden,
                                              "parameters": shape.num_params},
                profile_source=profile.source, candidates=tuple(cands), chosen=chosen, reason=reason)


def _reason(mode: str, mem: int, limit: int, fits: bool, bubble_s: float, epoch_s: float) -> str:
    gib = 2**30
    if not fits:
        what = "full-N stage buffers" if mode == "pipeline" else "its rows"
        return f"does not fit: {mem / gib:.2f} GiB > {limit / gib:.2f} GiB per worker ({what})"
    if mode in ("pipeline", "hybrid") and epoch_s > 0 and bubble_s / epoch_s > 0.2:
        return f"fits; bubble {100 * bubble_s / epoch_s:.0f} % of the epoch"
    return "fits"
