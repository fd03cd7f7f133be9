"""The report's paired comparison of each pipelined row with exact training, seed by
seed, and how many seeds the comparison can resolve.

A pipelined run and the exact (single-mode) run of the same seed share the initial
weights, the data split and the dropout stream's seed, so their difference is less
noisy than the difference of two means; still, on a graph whose test accuracy moves
by several points from seed to seed, three seeds cannot tell a 1-point gap from none.
The section says, per row: the mean difference, each seed's, the half width of its
95 % t-interval, and the number of seeds at which that half width would be 1 point
if the differences kept their spread (computed, not measured).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from .report_common import Row, _table

__all__ = ["T975", "paired_rows", "paired_section"]

#: Two-sided 95 % quantiles of Student's t by degrees of freedom (1..30); 1.96 beyond.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)

EXPLANATION = (
    "Each pipelined row against the exact (single-mode) row of the same dataset, model and settings, "
    "seed by seed (the seeds both have): test accuracy at the best validation epoch, pipelined minus "
    "exact, in points. Computed from the records: the mean difference, each seed's, the half width of "
    "the 95 % t-interval of the mean, and the seeds at which that half width would be 1 point if the "
    "differences kept their standard deviation (a planning figure, not a measurement).")


def _t(df: int) -> float:
    return T975[df - 1] if 1 <= df <= len(T975) else 1.96


def paired(row: Row) -> dict[str, Any] | None:
    """The paired figures of ``row`` against its exact reference, or None where it has
    none, or fewer than two shared seeds with an accuracy."""
    ref = row.ref
    if ref is None or ref is row or ref.mode != "single" or row.mode not in ("pipeline", "hybrid"):
        return None
    mine = {s: r["test_acc"] for s, r in zip(row.seeds, row.runs) if r["test_acc"] is not None}
    exact = {s: r["test_acc"] for s, r in zip(ref.seeds, ref.runs) if r["test_acc"] is not None}
    seeds = sorted(set(mine) & set(exact))
    if len(seeds) < 2:
        return None
    diffs = [100 * (mine[s] - exact[s]) for s in seeds]
    sd = statistics.stdev(diffs)
    half = _t(len(diffs) - 1) * sd / math.sqrt(len(diffs))
    return {"seeds": seeds, "diffs": diffs, "mean": statistics.fmean(diffs), "half_width": half,
            "seeds_for_1_point": max(2, math.ceil((1.96 * sd) ** 2)) if sd > 0 else len(diffs)}


def paired_rows(rows: list[Row]) -> list[tuple[Row, dict[str, Any]]]:
    return [(r, p) for r in rows if (p := paired(r)) is not None]


def paired_section(rows: list[Row], settings: Any) -> list[str]:
    """The report's lines (nothing when no row pairs with an exact one); ``settings``
    gives a row's varied settings as text."""
    pairs = paired_rows(rows)
    if not pairs:
        return []
    with_grid = any(r.grid for r, _ in pairs)  # the block's name tells blocks apart
    header = [*(["grid"] if with_grid else []), "dataset", "model", "mode", "layout", "settings", "seeds",
              "mean (points)", "per seed", "95 % half width", "seeds for ±1 point"]
    lines = [[*([r.grid] if with_grid else []), r.dataset, r.model, r.mode, r.runs[0]["layout"],
              settings(r) or "-", ",".join(map(str, p["seeds"])), f"{p['mean']:+.2f}",
              " ".join(f"{d:+.1f}" for d in p["diffs"]), f"±{p['half_width']:.1f}", str(p["seeds_for_1_point"])]
             for r, p in pairs]
    return ["## Paired with exact training", "", EXPLANATION, "", *_table(header, lines), ""]
