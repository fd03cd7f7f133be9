"""``--mode auto`` and ``--chunks auto``: the planner's choice, made at the entry.

:func:`resolve_auto` is called by :func:`gnnpipe.api.run` after the graph is loaded
and before the layout is resolved. It plans with the run's own graph (exact partition
figures, the run's partition method and seed), model and worker count, and returns
the config with the chosen mode, ways, chunks and stage split filled in, plus the
record's ``plan`` entry (what was asked, what was chosen, why, and the candidates).

The hardware profile is the file named by ``$GNNPIPE_PLAN_PROFILE`` (written by
``python -m gnnpipe.plan calibrate``) or a calibration on the fly (a few seconds).
Under torchrun every rank would calibrate on its own and could choose differently,
so ``auto`` is refused there: plan first, then pass the choice.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from gnnpipe.errors import ConfigError

__all__ = ["resolve_auto", "PROFILE_ENV", "needs_plan"]

logger = logging.getLogger("gnnpipe.plan")

#: Environment variable naming a profile JSON to plan with (no calibration).
PROFILE_ENV = "GNNPIPE_PLAN_PROFILE"


def needs_plan(run_config: Any) -> bool:
    """Whether the config leaves the mode or the chunk count to the planner."""
    p = run_config.parallel
    return p.mode == "auto" or p.chunks == "auto"


def _profile(run_config: Any, stats: Any, graph: Any) -> Any:
    from gnnpipe.plan.calibrate import calibrate_for
    from gnnpipe.plan.inputs import read_profile

    path = os.environ.get(PROFILE_ENV)
    if path:
        return read_profile(path)
    return calibrate_for(stats, run_config.model.model, run_config.model.hidden,
                         workers=int(run_config.parallel.workers), graph=graph,
                         device="cuda" if run_config.parallel.device == "cuda" else "cpu")


def resolve_auto(run_config: Any, graph: Any, *, torchrun: bool = False) -> tuple[Any, dict[str, Any]]:
    """``(run_config with the planner's layout, the record's plan entry)``; ConfigError
    (one line) when nothing fits or under torchrun."""
    from gnnpipe.config import MODES
    from gnnpipe.plan.costs import ModelShape
    from gnnpipe.plan.inputs import graph_stats
    from gnnpipe.plan.planner import make_plan

    p = run_config.parallel
    if torchrun:
        raise ConfigError(f"parallel.{'mode' if p.mode == 'auto' else 'chunks'}: expected a value under torchrun "
                          "(every rank would plan on its own), found 'auto'; run python -m gnnpipe.plan first")
    requested = {"mode": p.mode, "workers": int(p.workers), "ways": p.ways, "chunks": p.chunks}
    modes = tuple(MODES) if p.mode == "auto" else (p.mode,)
    if p.mode == "auto" and p.ways is not None:
        modes = ("hybrid",) if p.ways > 1 else tuple(m for m in MODES if m != "hybrid")
    stats = graph_stats(graph, method=p.partition, seed=int(run_config.train.seed))
    shape = ModelShape.of(run_config.model, stats.num_features, stats.num_classes)
    profile = _profile(run_config, stats, graph)
    plan = make_plan(stats, shape, profile, workers=int(p.workers), modes=modes,
                     ways=p.ways if (p.ways or 1) > 1 else None,
                     chunks=None if p.chunks == "auto" else p.chunks,
                     stage_split=p.stage_split, snapshot_period=int(p.snapshot_period),
                     stage_element_size=2 if p.stage_dtype == "bfloat16" else 4,
                     row_masks=p.dropout_masks == "row", cross_epoch_chunks=int(p.cross_epoch_chunks))
    c = plan.chosen
    if c is None:
        raise ConfigError(f"parallel.{'mode' if p.mode == 'auto' else 'chunks'}: expected a layout that fits in "
                          f"memory, found none of {len(plan.candidates)} candidates ({plan.reason})")
    new_p = dataclasses.replace(
        p, mode=c.mode, workers=c.workers, ways=c.ways if c.mode == "hybrid" else 1, chunks=c.chunks,
        stage_split=tuple(c.stage_split) if c.mode in ("pipeline", "hybrid") and c.split == "balanced" else None,
        stage_dtype=p.stage_dtype if c.mode in ("pipeline", "hybrid") else "same",
        dropout_masks=p.dropout_masks if c.mode in ("pipeline", "hybrid") else "chunk",
        cross_epoch_chunks=min(p.cross_epoch_chunks, c.chunks) if c.mode == "pipeline" else 0)
    logger.info("planner chose %s: %s (predicted epoch %.3g s, peak %.2f GiB per worker)", c.label(), plan.reason,
                c.epoch_s, c.peak_memory_bytes / 2**30)
    entry = {"requested": requested, "chosen": c.as_dict(), "reason": plan.reason,
             "profile": profile.source, "candidates": [x.as_dict() for x in plan.candidates]}
    return dataclasses.replace(run_config, parallel=new_p), entry
