"""The pipelined modes' two dropout masks against exact training, seed by seed.

Reads the records of two suites (no training): ``paper`` and ``dropout-masks``. Every
pipeline or hybrid record is one of two arms by its ``parallel.dropout_masks``:
``chunk`` (each chunk draws a mask for every row it reads: every record made before
the setting existed) or ``row`` (one mask per row and layer, :mod:`gnnpipe.models.masks`);
single-mode records are the exact reference. Per dataset, model, mode and snapshot
period R: each arm's test accuracy at the best validation epoch (mean +- std over its
seeds), its mean difference to the exact run of the same seed, the seeds both arms
have and the mean row - chunk difference over them, the mean epoch times and the
source revisions. Writes ``bench/results/dropout_masks.json`` and prints a markdown
table.

    python bench/mask_check.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.runner import DEFAULT_OUT, load_average, read_json, records, write_measurement  # noqa: E402

SUITES = ("paper", "dropout-masks")
ARMS = ("chunk", "row")


def _records(folder: Path) -> list[dict[str, Any]]:
    """{record, sidecar} of every finished run in a suite folder."""
    return [{"record": record, "sidecar": read_json(folder / f"{name}.run.json") or {}}
            for name, record in records(folder)]


def _cell(record: dict[str, Any]) -> tuple[str, str, str, int]:
    """(dataset, model, mode, snapshot period) of a record."""
    cfg = record["config"]
    return (cfg["data"]["dataset"], cfg["model"]["model"], cfg["parallel"]["mode"],
            int(cfg["parallel"].get("snapshot_period", 1)))


def _arm(record: dict[str, Any]) -> str:
    return str(record["config"]["parallel"].get("dropout_masks", "chunk"))


def _seed(record: dict[str, Any]) -> int:
    return int(record["config"]["train"]["seed"])


def _acc(r: dict[str, Any]) -> float:
    return 100.0 * r["record"]["best"]["test_acc"]


def _stats(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
            "n": len(values)}


def compare(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (dataset, model, pipelined mode, R) that has a ``row`` arm (module
    docstring). A seed counts in an arm only where the exact run of that seed exists;
    a later record of the same arm and seed replaces an earlier one."""
    exact = {(_cell(r["record"])[:2], _seed(r["record"])): r for r in records
             if r["record"]["config"]["parallel"]["mode"] == "single"}
    arms: dict[tuple, dict[str, dict[int, dict[str, Any]]]] = {}
    for r in records:
        cell = _cell(r["record"])
        if cell[2] in ("pipeline", "hybrid") and (cell[:2], _seed(r["record"])) in exact:
            arms.setdefault(cell, {a: {} for a in ARMS})[_arm(r["record"])][_seed(r["record"])] = r
    rows = []
    for cell in sorted(arms):
        by_arm = arms[cell]
        if not by_arm["row"]:
            continue
        row: dict[str, Any] = dict(zip(("dataset", "model", "mode", "snapshot_period"), cell))
        ex = {s: _acc(exact[(cell[:2], s)]) for a in ARMS for s in by_arm[a]}
        row["exact_test_acc"] = _stats([ex[s] for s in sorted(ex)])
        for a in ARMS:
            runs = by_arm[a]
            seeds = sorted(runs)
            row[a] = None if not seeds else {
                "seeds": seeds, "test_acc": _stats([_acc(runs[s]) for s in seeds]),
                "minus_exact": statistics.fmean(_acc(runs[s]) - ex[s] for s in seeds),
                "epoch_s": statistics.fmean(runs[s]["record"]["summary"]["mean_epoch_time_s"] for s in seeds),
                "revisions": sorted({str((runs[s]["sidecar"].get("source") or {}).get("commit")) for s in seeds})}
        both = sorted(set(by_arm["chunk"]) & set(by_arm["row"]))
        row["paired_seeds"] = both
        row["row_minus_chunk"] = (statistics.fmean(_acc(by_arm["row"][s]) - _acc(by_arm["chunk"][s]) for s in both)
                                  if both else None)
        rows.append(row)
    return rows


def _pm(s: dict[str, Any] | None) -> str:
    if s is None:
        return "-"
    return f"{s['mean']:.2f}" + (f" +- {s['std']:.2f}" if s["std"] is not None else "")


def _arm_text(a: dict[str, Any] | None) -> str:
    return "-" if a is None else f"{_pm(a['test_acc'])} ({a['minus_exact']:+.2f}, {len(a['seeds'])} seeds)"


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| dataset | model | mode | R | exact | chunk masks (- exact, seeds) | row masks (- exact, seeds) "
             "| row - chunk (paired seeds) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        diff = "-" if r["row_minus_chunk"] is None else f"{r['row_minus_chunk']:+.2f} ({len(r['paired_seeds'])})"
        lines.append(f"| {r['dataset']} | {r['model']} | {r['mode']} | {r['snapshot_period']} "
                     f"| {_pm(r['exact_test_acc'])} | {_arm_text(r['chunk'])} | {_arm_text(r['row'])} | {diff} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(DEFAULT_OUT), help="the suites' parent folder")
    ap.add_argument("--out", default=str(DEFAULT_OUT / "dropout_masks.json"))
    args = ap.parse_args(argv)
    load = load_average()
    results = Path(args.results)
    rows = compare([r for suite in SUITES for r in _records(results / suite)])
    if not rows:
        print(f"no row-mask run under {results} has an exact run of its seed yet", file=sys.stderr)
        return 2
    write_measurement(args, "test accuracy (best validation epoch) and epoch time of pipeline and hybrid runs "
                      "with a dropout mask per reading chunk (chunk) and one per row and layer (row), against "
                      "exact training of the same seed (measured by the paper and dropout-masks suites; "
                      "differences computed)", load, rows=rows)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
