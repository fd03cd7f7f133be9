"""The report's history-drift section: how far the stale halo reads of the pipeline
and hybrid modes were from the fresh values, over training and per layer.

Measured (by the workers, in the record's ``epochs[].history_drift``, schema 4): per
epoch and GNN layer, ``sqrt(sum |fresh - historical|^2 / sum |fresh|^2)`` between the
historical layer-input values that stale reads saw and the fresh values computed in
that epoch; null for layer 1 (its input is exact) and in the exact modes. Computed
here: per run and epoch the mean over the layers that have a value, then per row the
mean and sample standard deviation over the seeds whose records carry the field (a
schema 3 record has none and is left out; a row with no such seed has no line).

A row's drift epochs are the epochs every one of those seeds has, so that each mean
is over the same seeds: the table shows the first, middle and last of them, the epoch
figure all of them, the layer figure the last. Built on the rows, formatting and
plotting helpers of :mod:`bench.report_common`; :mod:`bench.report` calls
:func:`plot_drift` and :func:`drift_section`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from .report_common import Row, _figure, _legend, _pm, _save, _series_label, _slug, _table, mean_std, settings_text

#: The modes that read history (the others are exact and record null).
HISTORY_MODES = ("pipeline", "hybrid")
#: A y axis whose positive values span more than this ratio is drawn log-scale.
LOG_SPAN = 100.0

EXPLANATION = (
    "History drift: per layer with history (layer 2 on), the relative distance "
    "sqrt(Σ|fresh − historical|² / Σ|fresh|²) between the historical layer-input values that stale "
    "halo reads saw during an epoch and the fresh values computed in it (measured by the workers on a "
    "sample of rows of every chunk; 0: stale reads saw the fresh values). Computed here: the mean over "
    "the layers, then mean ± std over the seeds whose records carry it, at the first, middle and last "
    "epoch those seeds share.")


def run_curve(run: dict[str, Any]) -> dict[int, float]:
    """Epoch -> mean over the layers that have a value, of one run (``summarize()``'s
    ``drift``); epochs whose layers are all null are left out."""
    means = {epoch: mean_std(layers)[0] for epoch, layers in run["drift"].items()}
    return {epoch: m for epoch, m in means.items() if m is not None}


def drift_seeds(row: Row) -> list[tuple[int, dict[str, Any]]]:
    """(seed, run) of the runs of ``row`` whose records carry a drift value."""
    return [(seed, run) for seed, run in zip(row.seeds, row.runs) if run_curve(run)]


def drift_runs(row: Row) -> list[dict[str, Any]]:
    """The runs of ``row`` whose records carry a drift value."""
    return [run for _, run in drift_seeds(row)]


def drift_epochs(row: Row) -> list[int]:
    """The epochs for which every drift-carrying seed of ``row`` has a value, sorted
    (none when no seed has drift)."""
    curves = [set(run_curve(run)) for run in drift_runs(row)]
    return sorted(set.intersection(*curves)) if curves else []


def drift_rows(rows: Iterable[Row]) -> list[Row]:
    """The pipeline and hybrid rows with drift epochs, in order."""
    return [r for r in rows if r.mode in HISTORY_MODES and drift_epochs(r)]


def epoch_stat(row: Row, epoch: int) -> tuple[float | None, float | None]:
    """Mean and std over the drift-carrying seeds of the layer-mean drift at ``epoch``."""
    return mean_std(run_curve(run).get(epoch) for run in drift_runs(row))


def layer_means(row: Row, epoch: int) -> list[tuple[int, float]]:
    """(layer, mean over the drift-carrying seeds) at ``epoch``, layers numbered from 1,
    for the layers with a value (not layer 1)."""
    per_run = [run["drift"][epoch] for run in drift_runs(row) if epoch in run["drift"]]
    means = [(i + 1, mean_std(layers[i] if i < len(layers) else None for layers in per_run)[0])
             for i in range(max(map(len, per_run), default=0))]
    return [(layer, m) for layer, m in means if m is not None]


def marked_epochs(row: Row) -> list[int]:
    """The first, middle and last of a drift row's drift epochs (the table's columns)."""
    epochs = drift_epochs(row)
    return [epochs[0], epochs[(len(epochs) - 1) // 2], epochs[-1]]


# ---------------------------------------------------------------- markdown
def drift_table(rows: list[Row], varied: Iterable[str]) -> list[str]:
    """Per drift row: its drift-carrying seeds, the epochs shown and the drift at each."""
    varied = list(varied)
    with_settings = any(settings_text(r.point, varied) for r in rows)
    with_grid = any(r.grid for r in rows)
    header = [*(["grid"] if with_grid else []), "dataset", "model", "mode", "layout",
              *(["settings"] if with_settings else []), "seeds", "epochs (first / middle / last)",
              "drift, first", "drift, middle", "drift, last"]
    lines = []
    for r in rows:
        marks = marked_epochs(r)
        lines.append([*([r.grid] if with_grid else []), r.dataset, r.model, r.mode, r.runs[0]["layout"],
                      *([settings_text(r.point, varied)] if with_settings else []),
                      ",".join(str(seed) for seed, _ in drift_seeds(r)), " / ".join(map(str, marks)),
                      *(_pm(*epoch_stat(r, e)) for e in marks)])
    return _table(header, lines)


def drift_section(rows: list[Row], varied: Iterable[str], figures: Iterable[tuple[str, str]] = ()) -> list[str]:
    """The report's lines: heading, explanation, table and ``figures`` ((file, caption)
    pairs); nothing when no row has drift."""
    mine = drift_rows(rows)
    if not mine:
        return []
    out = ["## History drift", "", EXPLANATION, "", *drift_table(mine, varied), ""]
    for item in figures:
        out += _figure(*item)
    return out


# ------------------------------------------------------------------- plots
def _log_if_wide(ax, values: Iterable[float]) -> None:
    """Log-scale y when the positive ``values`` span more than :data:`LOG_SPAN`."""
    positive = [v for v in values if v > 0]
    if positive and max(positive) > LOG_SPAN * min(positive):
        ax.set_yscale("log")


def plot_drift(plt, rows: list[Row], varied: list[str], out_dir: Path) -> list[tuple[str, str]]:
    """Per dataset and model with drift: drift against epoch, and drift against layer
    at each row's last drift epoch; one line per mode and setting."""
    figures = []
    mine = drift_rows(rows)
    for dataset, model in dict.fromkeys((r.dataset, r.model) for r in mine):
        group = [r for r in mine if (r.dataset, r.model) == (dataset, model)]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        shown = []
        for row in group:
            epochs = drift_epochs(row)
            ys = [epoch_stat(row, e)[0] for e in epochs]
            ax.plot(epochs, ys, lw=1.2, label=_series_label(row, varied))
            shown += ys
        _log_if_wide(ax, shown)
        ax.set(xlabel="epoch", ylabel="history drift (mean over layers)", title=f"{dataset}, {model}")
        ax.grid(alpha=0.3)
        _legend(ax)
        figures.append(_save(plt, fig, out_dir, f"drift_{_slug(dataset, model)}.png",
                             f"{dataset}, {model}: history drift against epoch (measured per layer; mean over "
                             "the layers with history and over seeds, computed), one line per mode and setting"))
        fig, ax = plt.subplots(figsize=(7, 4.2))
        shown = []
        for row in group:
            last = drift_epochs(row)[-1]
            layers, ys = zip(*layer_means(row, last))
            ax.plot(layers, ys, marker="o", lw=1.2, label=f"{_series_label(row, varied)}, epoch {last}")
            shown += ys
        _log_if_wide(ax, shown)
        ax.set(xlabel="layer (layer 1 reads no history)", ylabel="history drift", title=f"{dataset}, {model}")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        _legend(ax)
        figures.append(_save(plt, fig, out_dir, f"drift_layers_{_slug(dataset, model)}.png",
                             f"{dataset}, {model}: history drift per layer at the last epoch with a value "
                             "from every seed of the setting, named in the legend (measured; mean over seeds, "
                             "computed), one line per mode and setting"))
    return figures
