"""Turn a suite's result records into ``report.md`` and PNG plots.

Everything shown comes from the records the trainer wrote (``NAME.json``) and the
runner's sidecars: epoch time (``summary.mean_epoch_time_s``, warm-up epochs left
out as the trainer defines it), payload bytes per epoch (training kinds, summed over
workers, as counted by the communicator), the time split (compute, comm wait,
bubble), test accuracy at the best validation epoch (``best.test_acc``) and the
validation accuracy of every evaluated epoch. What the report computes from them,
the mean and sample standard deviation over seeds and the ratios between modes, is
labelled as computed.

The table has the form of DESIGN.md 8: per dataset x model x mode (and whatever else
the suite varies), epoch time, GB per epoch, both as a ratio to graph mode (to single
mode where the suite has no graph run) and the test accuracy. Figures: validation
accuracy against epoch per mode (one per dataset and model), epoch time and bytes
against depth or chunk count (when the suite varies them), the time split per mode,
and the technique ablation (when the suite varies the pipeline techniques). The
history drift of the pipeline and hybrid runs (``epochs[].history_drift``, where the
records have it) is :mod:`bench.report_drift`'s section.

The pure part (:func:`summarize`, :func:`build_rows`, :func:`markdown`) takes plain
dicts; matplotlib is imported only in :func:`write_report`'s plotting. The row, the
formatting and the plotting helpers this module shares with :mod:`bench.report_drift`
and :mod:`bench.headline` are :mod:`bench.report_common`'s.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Iterable

from .report_common import (LAYOUT_KEYS, SPLIT, Row, _figure, _legend, _pm, _pyplot, _save, _series_label, _slug,
                            _table, settings_text)
from .report_drift import drift_section, plot_drift
from .report_paired import paired_section
from . import resolved
from .runner import RunFiles, fmt_duration, group_key, read_json
from .suite import GROUPS

TRAINING_KINDS = ("stage_activations", "stage_gradients", "halo_rows", "halo_gradients", "weight_allreduce")
TECHNIQUES = GROUPS["techniques"]
#: Keys a ratio's reference run may differ in: the mode and everything of its layout.
REFERENCE_FREE = ("mode", *LAYOUT_KEYS, *TECHNIQUES, "partition", "backend")


# --------------------------------------------------------------- one record
def summarize(record: dict[str, Any]) -> dict[str, Any]:
    """The measured figures of one record."""
    epochs = record["epochs"]
    summary = record["summary"]
    skip = int(summary.get("mean_epoch_time_skipped_epochs", 0))
    steady = epochs[skip:] or epochs
    n = len(epochs)
    training_bytes = sum(e["bytes"].get(k, 0) for e in epochs for k in TRAINING_KINDS)
    par = record["config"]["parallel"]
    return {
        "dataset": record["config"]["data"]["dataset"],
        "model": record["config"]["model"]["model"],
        "graph": record.get("dataset", {}),
        "epoch_time_s": summary["mean_epoch_time_s"],
        "gb_per_epoch": training_bytes / n / 1e9 if n else 0.0,
        "test_acc": record["best"]["test_acc"],
        "best_epoch": record["best"]["epoch"],
        "epochs_run": summary["epochs_run"],
        "stopped_early": summary.get("stopped_early"),
        "split": {k: statistics.fmean(e["time"][k] for e in steady) for k in SPLIT},
        "val_curve": [(e["epoch"], e["val_acc"]) for e in epochs if e.get("val_acc") is not None],
        "drift": {e["epoch"]: e["history_drift"] for e in epochs if e.get("history_drift")},  # schema 4
        "peak_memory_gib": max((m["bytes"] for m in record.get("peak_memory_bytes", [])), default=0) / 2**30,
        "layout": layout_text(record["mode"], par, record.get("extra", {})),
        "techniques": {k: par.get(k) for k in TECHNIQUES},
        "chunks": par.get("chunks"),
        "wall_time_s": record.get("wall_time_s"),
    }


def layout_text(mode: str, parallel: dict[str, Any], extra: dict[str, Any]) -> str:
    """P workers, W ways, S stages, C chunks as the mode has them."""
    p, w, c = parallel.get("workers"), parallel.get("ways"), parallel.get("chunks")
    s = extra.get("stages") or {"pipeline": p, "hybrid": (p // w if p and w else None)}.get(mode, 1)
    return {"single": "1 process", "graph": f"P={p}", "pipeline": f"S={s} C={c}",
            "hybrid": f"W={w} S={s} C={c}"}.get(mode, "?")


# -------------------------------------------------------------------- rows
def _reference_key(point: dict[str, Any]) -> str:
    return group_key({k: v for k, v in point.items() if k not in REFERENCE_FREE})


def build_rows(entries: list[dict[str, Any]], records: dict[str, dict[str, Any]],
               grid_names: Iterable[str] = ()) -> list[Row]:
    """Rows from the manifest's run entries and the records by run name, in suite
    order; each row's ``ref`` is the graph-mode row of the same dataset, model and
    settings, or the single-mode row where there is no graph row. A row's ``grid``
    is its block's name where ``grid_names`` shows it, else empty."""
    shown = set(grid_names)
    rows: dict[str, Row] = {}
    for entry in entries:
        record = records.get(entry["name"])
        if record is None:
            continue
        point = {k: v for k, v in entry["point"].items() if k != "seed"}
        grid = entry.get("grid", "") if entry.get("grid") in shown else ""
        row = rows.setdefault(group_key(point), Row(point, grid, entry.get("tags", {})))
        row.runs.append(summarize(record))
        row.seeds.append(entry["point"].get("seed", 0))
    out = list(rows.values())
    for wanted in ("single", "graph"):  # graph last, so that it wins
        by_ref = {_reference_key(r.point): r for r in reversed(out) if r.mode == wanted}
        for row in out:
            row.ref = by_ref.get(_reference_key(row.point), row.ref)
    return out


# ---------------------------------------------------------------- markdown
def _ratio(row: Row, key: str) -> str:
    if row.ref is None or row.ref is row:
        return "-" if row.ref is None else "1.00"
    mine, ref = row.stat(key)[0], row.ref.stat(key)[0]
    if mine is None or not ref:
        return "-"
    return f"{mine / ref:.2f}"


def results_table(rows: list[Row], varied: Iterable[str]) -> list[str]:
    """The DESIGN.md 8 table of one dataset's rows."""
    varied = list(varied)
    ref_modes = {r.ref.mode for r in rows if r.ref is not None}
    ref = "graph" if ref_modes == {"graph"} else "single" if ref_modes == {"single"} else "ref"
    tagged = any(r.tags for r in rows)
    with_settings = any(settings_text(r.point, varied) for r in rows)
    with_grid = any(r.grid for r in rows)
    header = [*(["grid"] if with_grid else []), "model", "mode", "layout", *(["settings"] if with_settings else []), "seeds",
              "epoch time (s)", f"time / {ref}", "GB / epoch", f"GB / {ref}", "test acc (%)",
              "best epoch", "epochs run", *(["published (%)", "target met"] if tagged else [])]
    lines = []
    for r in rows:
        test_mean = r.stat("test_acc")[0]
        line = [*([r.grid] if with_grid else []), r.model, r.mode, r.runs[0]["layout"], *([settings_text(r.point, varied)] if with_settings else []),
                ",".join(map(str, r.seeds)), _pm(*r.stat("epoch_time_s")), _ratio(r, "epoch_time_s"),
                _pm(*r.stat("gb_per_epoch")), _ratio(r, "gb_per_epoch"),
                _pm(*r.stat("test_acc"), scale=100, decimals=2), _pm(*r.stat("best_epoch"), decimals=0),
                _pm(*r.stat("epochs_run"), decimals=0)]
        if tagged:
            pub, target = r.tags.get("published"), r.tags.get("target")
            met = "-" if target is None or test_mean is None else ("yes" if test_mean >= target else "NO")
            line += ["-" if pub is None else f"{100 * pub:.1f}", met]
        lines.append(line)
    return _table(header, lines)


def ablation_groups(rows: list[Row]) -> list[tuple[list[Row], Row | None]]:
    """Rows that differ only in the pipeline techniques (two or more combinations),
    each group with the single-mode row of the same settings (the exact reference)."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.mode in ("pipeline", "hybrid"):
            key = group_key({k: v for k, v in r.point.items() if k not in TECHNIQUES})
            groups.setdefault(key, []).append(r)
    exact = {_reference_key(r.point): r for r in rows if r.mode == "single"}
    return [(g, exact.get(_reference_key(g[0].point))) for g in groups.values() if len(g) > 1]


def technique_text(techniques: dict[str, Any]) -> str:
    """The four techniques always; the later settings where a record has them off their
    default (a record from before a setting existed had its default)."""
    t = techniques
    text = (f"shuffle {'on' if t['shuffle'] else 'off'}, R={t['snapshot_period']}, "
            f"unbiased {'x2' if t['unbiased_scale'] else 'off'}, history {t['history_init']}")
    extra = [form.format(t[key]) for key, form, default in (
        ("stage_dtype", "stage dtype {}", "same"), ("dropout_masks", "masks {}", "chunk"),
        ("cross_epoch_chunks", "cross-epoch K={}", 0)) if t.get(key) not in (None, default)]
    return ", ".join([text, *extra])


def ablation_table(group: list[Row], exact: Row | None) -> list[str]:
    lines = [[technique_text(r.runs[0]["techniques"]), ",".join(map(str, r.seeds)),
              _pm(*r.stat("test_acc"), scale=100, decimals=2), _pm(*r.stat("best_epoch"), decimals=0),
              _pm(*r.stat("epoch_time_s"))] for r in group]
    if exact is not None:
        lines.append(["single mode (exact, no history)", ",".join(map(str, exact.seeds)),
                      _pm(*exact.stat("test_acc"), scale=100, decimals=2), _pm(*exact.stat("best_epoch"), decimals=0),
                      _pm(*exact.stat("epoch_time_s"))])
    return _table(["techniques (from the record's config)", "seeds", "test acc (%)", "best epoch",
                   "epoch time (s)"], lines)


def _graph_text(graph: dict[str, Any]) -> str:
    """`` (N vertices, E edges, F features, C classes)`` from the record's ``dataset``."""
    parts = [(graph.get(k), word) for k, word in (("num_nodes", "vertices"), ("num_edges", "edges"),
                                                  ("num_features", "features"), ("num_classes", "classes"))]
    text = ", ".join(f"{n:,} {word}" for n, word in parts if n is not None)
    return f" ({text})" if text else ""


def _load_range(entries: list[dict[str, Any]]) -> str:
    loads = [e[k][0] for e in entries for k in ("load_average_before", "load_average_after") if e.get(k)]
    return f"{min(loads):.2f} to {max(loads):.2f}" if loads else "not recorded"


def markdown(manifest: dict[str, Any], rows: list[Row], figures: dict[str, list[tuple[str, str]]],
             failed: list[dict[str, Any]], pending: list[dict[str, Any]]) -> str:
    """The report text. ``figures`` maps a section to its (file, caption) pairs; the
    pairs under ``"ablation"`` go with the ablation tables, one per group, in order;
    those under ``"drift"`` with the history-drift table."""
    figures = dict(figures)
    ablation = figures.pop("ablation", [])
    drift = figures.pop("drift", [])
    m = manifest["machine"]
    entries = manifest["runs"]
    varied = manifest.get("varied", [])
    walls = [e["wall_s"] for e in entries if e.get("wall_s") is not None]
    out = [f"# Benchmark suite `{manifest['suite']}`", "", manifest["description"], ""]
    if manifest.get("notes"):
        out += [manifest["notes"], ""]
    out += [f"Suite file `{manifest['file']}`; {len(entries)} runs: {len(entries) - len(failed) - len(pending)} "
            f"with a current record, {len(failed)} failed, {len(pending)} without one. Machine: {m['hostname']}, "
            f"{m['cpu_cores']['usable']} usable cores, torch {m['torch']}, gnnpipe {m['gnnpipe']}, python "
            f"{m['python']}. Run wall time, summed: {fmt_duration(sum(walls)) if walls else '-'}; 1-minute load "
            f"average before/after the runs: {_load_range(entries)} (other jobs share the machine, so times are "
            "upper bounds).", "",
            "Measured (from the records): epoch time (mean over the epochs after warm-up, evaluation "
            "excluded), payload bytes of the training kinds per epoch summed over workers, the time split, "
            "test accuracy at the best validation epoch and validation accuracy per epoch. Computed here: "
            "mean ± sample standard deviation over the seeds, and the ratios to the reference mode "
            "(graph mode of the same dataset, model and settings; single mode where there is no graph run). "
            "A figure without ± is the same for every seed (or there is one seed). Published figures and "
            "targets are given in the suite file, not measured.", "", "## Results", ""]
    for dataset in dict.fromkeys(r.dataset for r in rows):
        mine = [r for r in rows if r.dataset == dataset]
        out += [f"### {dataset}{_graph_text(mine[0].runs[0]['graph'])}", ""] + results_table(mine, varied) + [""]
    groups = ablation_groups(rows)
    if groups:
        out += ["## Technique ablation", "",
                "Test accuracy at the best validation epoch per combination of the pipeline techniques "
                "(mean ± std over seeds, computed); the single-mode row, where present, is the exact reference.",
                ""]
        for i, (group, exact) in enumerate(groups):
            r = group[0]
            rest = settings_text({k: v for k, v in r.point.items() if k not in TECHNIQUES}, varied)
            out += [f"### {r.dataset} {r.model} {r.mode} {r.runs[0]['layout']} {rest}".rstrip(), ""]
            out += ablation_table(group, exact) + [""]
            out += _figure(*ablation[i]) if i < len(ablation) else []
    out += paired_section(rows, lambda r: settings_text(r.point, varied))
    out += drift_section(rows, varied, drift)
    for section, items in figures.items():
        if items:
            out += [f"## {section}", ""]
            for item in items:
                out += _figure(*item)
    if failed:
        out += ["## Failed runs", ""]
        out += [f"- `{f['name']}` {f['label']}: exit {f['returncode']}: {f['last_line']}" for f in failed] + [""]
    if pending:
        out += ["## Runs without a current record", ""]
        out += [f"- `{e['name']}` {e['label']}" + (f" (stale record, run with: {'; '.join(e['stale'])})"
                                                   if e.get("stale") else "") for e in pending] + [""]
    return "\n".join(out)


# ------------------------------------------------------------------- plots
def plot_val_curves(plt, rows: list[Row], varied: list[str], out_dir: Path) -> list[tuple[str, str]]:
    """Validation accuracy against epoch, one figure per dataset and model."""
    figures = []
    for dataset, model in dict.fromkeys((r.dataset, r.model) for r in rows):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, row in enumerate(r for r in rows if (r.dataset, r.model) == (dataset, model)):
            for j, run in enumerate(row.runs):
                xs, ys = zip(*run["val_curve"]) if run["val_curve"] else ((), ())
                ax.plot(xs, [100 * y for y in ys], color=colors[i % len(colors)], lw=1, alpha=0.8,
                        label=_series_label(row, varied) if j == 0 else None)
        ax.set(xlabel="epoch", ylabel="validation accuracy (%)", title=f"{dataset}, {model}")
        ax.grid(alpha=0.3)
        _legend(ax)
        figures.append(_save(plt, fig, out_dir, f"val_{_slug(dataset, model)}.png",
                             f"{dataset}, {model}: validation accuracy at every evaluated epoch (measured), "
                             "one line per seed, one colour per mode and setting"))
    return figures


def plot_sweeps(plt, rows: list[Row], varied: list[str], out_dir: Path) -> list[tuple[str, str]]:
    """Epoch time and GB/epoch against ``layers`` or ``chunks`` when the suite varies them."""
    figures = []
    for axis in ("layers", "chunks"):
        if axis not in varied:
            continue
        for dataset, model in dict.fromkeys((r.dataset, r.model) for r in rows):
            mine = [r for r in rows if (r.dataset, r.model) == (dataset, model)]
            series: dict[str, list[Row]] = {}
            for r in mine:
                series.setdefault(_series_label(r, varied, leave_out=axis), []).append(r)
            if not any(len({r.point.get(axis) for r in s}) > 1 for s in series.values()):
                continue
            fig, axes = plt.subplots(1, 2, figsize=(10, 4))
            for name, members in series.items():
                for ax, key in zip(axes, ("epoch_time_s", "gb_per_epoch")):
                    pts = sorted((r.point.get(axis, r.runs[0].get(axis)), *r.stat(key)) for r in members)
                    if len(pts) == 1:  # a mode without this axis (single, graph): a reference line
                        ax.axhline(pts[0][1], ls="--", lw=1, label=name, color="gray")
                        continue
                    xs, ms, ss = zip(*pts)
                    ax.errorbar(xs, ms, yerr=[s or 0 for s in ss], marker="o", capsize=3, label=name)
            ticks = sorted({r.point[axis] for r in mine if axis in r.point})
            for ax, ylabel in zip(axes, ("epoch time (s)", "GB sent per epoch (training)")):
                ax.set_xscale("log", base=2)
                ax.set(xlabel=axis, ylabel=ylabel, title=f"{dataset}, {model}")
                ax.set_xticks(ticks, [str(t) for t in ticks])
                ax.minorticks_off()
                ax.grid(alpha=0.3)
            _legend(axes[1])
            figures.append(_save(plt, fig, out_dir, f"{axis}_{_slug(dataset, model)}.png",
                                 f"{dataset}, {model}: epoch time and bytes per epoch against {axis} (measured; "
                                 "points are means over seeds, bars the standard deviation, computed)"))
    return figures


def plot_time_split(plt, rows: list[Row], varied: list[str], out_dir: Path) -> list[tuple[str, str]]:
    """Compute / comm wait / bubble per row, one figure per dataset."""
    figures = []
    for dataset in dict.fromkeys(r.dataset for r in rows):
        mine = [r for r in rows if r.dataset == dataset]
        fig, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * len(mine)))
        names = [f"{r.model} {_series_label(r, varied)}" for r in mine]
        left = [0.0] * len(mine)
        for key, color in zip(SPLIT, ("tab:blue", "tab:orange", "tab:red")):
            vals = [r.split()[key] for r in mine]
            ax.barh(names, vals, left=left, color=color, label=key.removesuffix("_s").replace("_", " "))
            left = [a + b for a, b in zip(left, vals)]
        ax.scatter([r.stat("epoch_time_s")[0] for r in mine], names, marker="|", s=200, color="black",
                   label="epoch time", zorder=3)
        ax.invert_yaxis()
        ax.set(xlabel="seconds per epoch (after warm-up)", title=f"{dataset}: time split per epoch")
        ax.tick_params(axis="y", labelsize=7)
        _legend(ax)
        figures.append(_save(plt, fig, out_dir, f"time_split_{_slug(dataset)}.png",
                             f"{dataset}: compute, comm wait and bubble per epoch as the workers measured them "
                             "(mean over the epochs after warm-up and over seeds, computed), epoch time marked"))
    return figures


def plot_ablation(plt, rows: list[Row], out_dir: Path) -> list[tuple[str, str]]:
    figures = []
    for i, (group, exact) in enumerate(ablation_groups(rows)):
        r0 = group[0]
        fig, ax = plt.subplots(figsize=(8, 0.9 + 0.4 * len(group)))
        names = [technique_text(r.runs[0]["techniques"]) for r in group]
        stats = [r.stat("test_acc") for r in group]
        ax.barh(names, [100 * (m or 0) for m, _ in stats], xerr=[100 * (s or 0) for _, s in stats], capsize=3)
        if exact is not None and exact.stat("test_acc")[0] is not None:
            ax.axvline(100 * exact.stat("test_acc")[0], ls="--", color="black", label="single mode (exact)")
            _legend(ax)
        ax.invert_yaxis()
        ax.set(xlabel="test accuracy at the best validation epoch (%)",
               title=f"{r0.dataset}, {r0.model}, {r0.mode} {r0.runs[0]['layout']}")
        ax.tick_params(axis="y", labelsize=7)
        figures.append(_save(plt, fig, out_dir, f"ablation_{_slug(r0.dataset, r0.model, r0.mode)}_{i + 1}.png",
                             f"{r0.dataset}, {r0.model}, {r0.mode}: test accuracy per technique combination "
                             "(measured; mean over seeds, bars the standard deviation, computed)"))
    return figures


# ---------------------------------------------------------------- the file
def read_results(suite_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[dict[str, Any]],
                                           list[dict[str, Any]]]:
    """``suite_dir``'s manifest, its current records by run name, the failed runs
    (each manifest entry with ``returncode`` and ``last_line``) and the runs with
    neither a current record nor a failure. A stale record (its resolved config is not
    what the run's settings resolve to now: :mod:`bench.resolved`) is left out; its
    run is in the last list with ``stale``, the fields that changed. What the report
    and the README headline read."""
    manifest = read_json(suite_dir / "manifest.json")
    if manifest is None:
        raise FileNotFoundError(f"{suite_dir / 'manifest.json'} not found: run the suite first "
                                f"(python -m bench run {suite_dir.name})")
    records, failed, pending = {}, [], []
    for entry in manifest["runs"]:
        files = RunFiles(suite_dir, entry["name"])
        record = read_json(files.record)
        if record is not None:
            changed = resolved.changes(record.get("config", {}), resolved.resolved_config(entry["point"]))
            if not changed:
                records[entry["name"]] = record
            else:
                pending.append({**entry, "stale": changed})
            continue
        fail = read_json(files.failed)
        if fail is None:
            pending.append(entry)
        else:
            tail = [ln for ln in fail.get("stderr_tail", "").splitlines() if ln.strip()]
            failed.append({**entry, "returncode": fail.get("returncode"),
                           "last_line": (tail[-1] if tail else fail.get("reason", "")).strip()})
    return manifest, records, failed, pending


def write_report(suite_dir: Path) -> Path:
    """Read ``suite_dir``'s manifest and records; write ``report.md`` and the PNGs there."""
    plt = _pyplot()
    manifest, records, failed, pending = read_results(suite_dir)
    rows = build_rows(manifest["runs"], records, manifest.get("grid_names", []))
    varied = manifest.get("varied", [])
    figures: dict[str, list[tuple[str, str]]] = {}
    if rows:
        figures["Validation accuracy per epoch"] = plot_val_curves(plt, rows, varied, suite_dir)
        figures["Epoch time and bytes against depth and chunks"] = plot_sweeps(plt, rows, varied, suite_dir)
        figures["Time split"] = plot_time_split(plt, rows, varied, suite_dir)
        figures["ablation"] = plot_ablation(plt, rows, suite_dir)
        figures["drift"] = plot_drift(plt, rows, varied, suite_dir)
    path = suite_dir / "report.md"
    path.write_text(markdown(manifest, rows, figures, failed, pending) + "\n")
    return path

