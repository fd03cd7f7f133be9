"""The building blocks that :mod:`bench.report` and :mod:`bench.report_drift` (and
:mod:`bench.headline`) share: the table row, its statistics and the text and plotting
helpers.

A :class:`Row` is one line of the report's table, the runs of one setting over its
seeds (:func:`bench.report.build_rows` makes them from the records); :func:`mean_std`
is the mean and sample standard deviation the report shows, :func:`_pm` formats them,
:func:`_table` and :func:`_figure` are the markdown of a table and a figure, and
:func:`settings_text` names a row's varied settings. The plotting helpers
(:func:`_pyplot`, which raises :class:`MissingMatplotlib` without matplotlib,
:func:`_legend`, :func:`_save`, :func:`_series_label`, :func:`_slug`) are what every
figure of the report is drawn and saved with.

This module sits below the report modules and imports none of them, so that
:mod:`bench.report` can import :mod:`bench.report_drift` (which builds on these
blocks) at its top without an import cycle.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .suite import GROUPS, LABEL_KEYS, tokens

#: The time split of an epoch, as the record's ``epochs[].time`` has it.
SPLIT = ("compute_s", "comm_wait_s", "bubble_s")
LAYOUT_KEYS = GROUPS["layout"]


class MissingMatplotlib(RuntimeError):
    """matplotlib is not installed (it is the ``bench`` extra)."""


# -------------------------------------------------------------------- rows
def mean_std(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None for one value) of the non-null values."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else None)


@dataclass
class Row:
    """One line of the table: the runs of one setting over its seeds."""

    point: dict[str, Any]  # the settings, seed left out
    grid: str
    tags: dict[str, float]
    runs: list[dict[str, Any]] = field(default_factory=list)  # summarize() of each record
    seeds: list[int] = field(default_factory=list)
    ref: "Row | None" = None

    @property
    def dataset(self) -> str:
        return str(self.runs[0]["dataset"])

    @property
    def model(self) -> str:
        return str(self.runs[0]["model"])

    @property
    def mode(self) -> str:
        return str(self.point["mode"])

    def stat(self, key: str) -> tuple[float | None, float | None]:
        return mean_std(r[key] for r in self.runs)

    def split(self) -> dict[str, float]:
        return {k: statistics.fmean(r["split"][k] for r in self.runs) for k in SPLIT}


def settings_text(point: dict[str, Any], varied: Iterable[str]) -> str:
    """The varied settings of a row that the model, mode and layout columns do not show."""
    hidden = set(LABEL_KEYS) | set(LAYOUT_KEYS)
    wanted = [k for k in varied if k not in hidden]
    return " ".join(t for t in tokens(point) if t.partition("=")[0] in wanted)


# ---------------------------------------------------------------- markdown
def _pm(mean: float | None, std: float | None, scale: float = 1.0, decimals: int | None = None) -> str:
    """``mean ± std`` (just the mean for one seed or when every seed gave the same;
    ``-`` for nothing), both with the same decimals: ``decimals``, or enough for three
    significant digits of the mean."""
    if mean is None:
        return "-"
    mean *= scale
    if decimals is None:
        decimals = max(0, 2 - math.floor(math.log10(abs(mean)))) if mean else 0
    text = f"{mean:.{decimals}f}"
    return text if not std else f"{text} ± {std * scale:.{decimals}f}"


def _table(header: list[str], lines: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |",
            *("| " + " | ".join(line) + " |" for line in lines)]


def _figure(file: str, caption: str) -> list[str]:
    return [f"![{caption}]({file})", "", f"*{caption}*", ""]


# ------------------------------------------------------------------- plots
def _slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(p.replace("+", "plus") for p in parts))


def _series_label(row: Row, varied: Iterable[str], leave_out: str = "") -> str:
    settings = settings_text({k: v for k, v in row.point.items() if k != leave_out}, varied)
    layout = row.runs[0]["layout"] if leave_out != "chunks" else re.sub(r" ?C=\d+", "", row.runs[0]["layout"])
    return " ".join(x for x in (row.grid, row.mode, layout if row.mode != "single" else "", settings) if x)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise MissingMatplotlib("matplotlib is not installed; it is the bench extra: "
                                "pip install -e \".[bench]\" (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _legend(ax) -> None:
    """The legend outside the axes, on the right (saved with ``bbox_inches="tight"``)."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)


def _save(plt, fig, out_dir: Path, file: str, caption: str) -> tuple[str, str]:
    """Write the figure as ``out_dir/file``; returns the report's (file, caption)."""
    fig.tight_layout()
    fig.savefig(out_dir / file, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return file, caption
