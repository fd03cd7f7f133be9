"""The chunked modes' dropout masks before and after one mask per row and layer.

Reads two suites' records (no training): ``paper`` (its single-mode runs are the exact
reference; its pipeline and hybrid runs of GCNII-32 and ResGCN+-32 drew a fresh mask
in every chunk for every row it read) and ``dropout-masks`` (the same runs, same
names, after the change: one mask per row and layer over a way's rows,
:mod:`gnnpipe.models.masks`). Per dataset, model and mode: test accuracy at the best
validation epoch, mean +- std over the seeds both suites have, each one's difference
to exact training, the mean epoch time and the source revision of each record set.
Writes ``bench/results/dropout_masks.json`` and prints a markdown table.

    python bench/mask_check.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.runner import DEFAULT_OUT, load_average, write_measurement  # noqa: E402

MODES = ("pipeline", "hybrid")


def _records(folder: Path) -> dict[str, dict[str, Any]]:
    """Run name -> {record, sidecar} of every finished run in a suite folder."""
    out = {}
    for path in sorted(folder.glob("*.json")):
        stem = path.name[: -len(".json")]
        if "." in stem or stem == "manifest":
            continue
        side_path = folder / f"{stem}.run.json"
        side = json.loads(side_path.read_text()) if side_path.exists() else {}
        out[stem] = {"record": json.loads(path.read_text()), "sidecar": side}
    return out


def _key(record: dict[str, Any]) -> tuple[str, str, str, int, int]:
    """(dataset, model, mode, snapshot period, seed) of a record."""
    cfg = record["config"]
    return (cfg["data"]["dataset"], cfg["model"]["model"], cfg["parallel"]["mode"],
            int(cfg["parallel"].get("snapshot_period", 1)), int(cfg["train"]["seed"]))


def _stats(values: list[float]) -> dict[str, Any]:
    return {"mean": statistics.fmean(values) if values else None,
            "std": statistics.stdev(values) if len(values) > 1 else None, "n": len(values)}


def _acc(r: dict[str, Any]) -> float:
    return 100.0 * r["record"]["best"]["test_acc"]


def _rev(r: dict[str, Any]) -> str:
    return str((r["sidecar"].get("source") or {}).get("commit"))


def compare(paper: dict[str, dict[str, Any]], masks: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (dataset, model, mode, snapshot period) that the new suite has, over
    the seeds whose exact run the paper suite has. The per-chunk-mask columns cover the
    seeds that also have the paper suite's twin (None where none has: a setting the
    paper suite did not run)."""
    by_key = {_key(r["record"]): r for r in paper.values()}
    # Single mode ignores the pipeline's settings: its runs are known by dataset, model, seed.
    exact_by = {(k[0], k[1], k[4]): r for k, r in by_key.items() if k[2] == "single"}
    rows = []
    cells = sorted({k[:4] for k in (_key(r["record"]) for r in masks.values())})
    for cell in cells:
        dataset, model, mode, period = cell
        seeds, new, exact, new_t, twins = [], [], [], [], []
        for r in masks.values():
            k = _key(r["record"])
            exact_r = exact_by.get((dataset, model, k[4]))
            if k[:4] != cell or exact_r is None:
                continue
            seeds.append(k[4])
            new.append(_acc(r))
            exact.append(_acc(exact_r))
            new_t.append(r["record"]["summary"]["mean_epoch_time_s"])
            old_r = by_key.get(k)
            if old_r is not None:
                twins.append((_acc(old_r), _acc(exact_r), old_r["record"]["summary"]["mean_epoch_time_s"],
                              _rev(old_r)))
        if not seeds:
            continue
        rows.append({
            "dataset": dataset, "model": model, "mode": mode, "snapshot_period": period, "seeds": sorted(seeds),
            "exact_test_acc": _stats(exact), "shared_masks_test_acc": _stats(new),
            "shared_minus_exact": statistics.fmean(n - e for n, e in zip(new, exact)),
            "shared_epoch_s": statistics.fmean(new_t),
            "shared_revisions": sorted({_rev(r) for r in masks.values() if _key(r["record"])[:4] == cell}),
            "per_chunk_seeds": len(twins),
            "per_chunk_masks_test_acc": _stats([t[0] for t in twins]) if twins else None,
            "per_chunk_minus_exact": statistics.fmean(t[0] - t[1] for t in twins) if twins else None,
            "per_chunk_epoch_s": statistics.fmean(t[2] for t in twins) if twins else None,
            "per_chunk_revisions": sorted({t[3] for t in twins})})
    return rows


def _pm(s: dict[str, Any] | None) -> str:
    if s is None or s["mean"] is None:
        return "-"
    return f"{s['mean']:.2f}" + (f" +- {s['std']:.2f}" if s["std"] is not None else "")


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| dataset | model | mode | R | seeds | exact | per-chunk masks (diff) | shared masks (diff) "
             "| epoch s per-chunk / shared |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        old = "-" if r["per_chunk_minus_exact"] is None else (
            f"{_pm(r['per_chunk_masks_test_acc'])} ({r['per_chunk_minus_exact']:+.2f})")
        old_t = "-" if r["per_chunk_epoch_s"] is None else f"{r['per_chunk_epoch_s']:.3f}"
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['mode']} | {r['snapshot_period']} | {len(r['seeds'])} "
            f"| {_pm(r['exact_test_acc'])} | {old} "
            f"| {_pm(r['shared_masks_test_acc'])} ({r['shared_minus_exact']:+.2f}) "
            f"| {old_t} / {r['shared_epoch_s']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(DEFAULT_OUT), help="the suites' parent folder")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT / "dropout_masks.json")
    args = ap.parse_args(argv)
    load = load_average()
    results = Path(args.results)
    rows = compare(_records(results / "paper"), _records(results / "dropout-masks"))
    if not rows:
        print(f"no run of {results / 'dropout-masks'} has its paper-suite twin and exact run yet",
              file=sys.stderr)
        return 2
    write_measurement(args, "test accuracy (best validation epoch) and epoch time of the paper suite's pipeline "
                      "and hybrid runs with per-chunk dropout masks against the same runs with one mask per row "
                      "and layer (measured by the two suites; differences to the exact runs computed)",
                      load, rows=rows)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
