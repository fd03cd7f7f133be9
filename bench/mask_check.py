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


def _key(record: dict[str, Any]) -> tuple[str, str, str, int]:
    cfg = record["config"]
    return (cfg["data"]["dataset"], cfg["model"]["model"], cfg["parallel"]["mode"], int(cfg["train"]["seed"]))


def _stats(values: list[float]) -> dict[str, Any]:
    return {"mean": statistics.fmean(values) if values else None,
            "std": statistics.stdev(values) if len(values) > 1 else None, "n": len(values)}


def compare(paper: dict[str, dict[str, Any]], masks: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (dataset, model, mode) that the new suite has: the seeds that the new
    suite, the old records and the exact runs all have, and their figures."""
    by_key = {_key(r["record"]): (name, r) for name, r in paper.items()}
    rows = []
    cells = sorted({k[:3] for k in (_key(r["record"]) for r in masks.values())})
    for dataset, model, mode in cells:
        seeds, new, old, exact, new_t, old_t, revs_old, revs_new = [], [], [], [], [], [], set(), set()
        for name, r in masks.items():
            k = _key(r["record"])
            if k[:3] != (dataset, model, mode):
                continue
            old_r = by_key.get(k)
            exact_r = by_key.get((dataset, model, "single", k[3]))
            if old_r is None or exact_r is None:
                continue
            seeds.append(k[3])
            new.append(100.0 * r["record"]["best"]["test_acc"])
            old.append(100.0 * old_r[1]["record"]["best"]["test_acc"])
            exact.append(100.0 * exact_r[1]["record"]["best"]["test_acc"])
            new_t.append(r["record"]["summary"]["mean_epoch_time_s"])
            old_t.append(old_r[1]["record"]["summary"]["mean_epoch_time_s"])
            revs_new.add((r["sidecar"].get("source") or {}).get("commit"))
            revs_old.add((old_r[1]["sidecar"].get("source") or {}).get("commit"))
        if not seeds:
            continue
        rows.append({
            "dataset": dataset, "model": model, "mode": mode, "seeds": sorted(seeds),
            "exact_test_acc": _stats(exact),
            "per_chunk_masks_test_acc": _stats(old), "shared_masks_test_acc": _stats(new),
            "per_chunk_minus_exact": statistics.fmean(o - e for o, e in zip(old, exact)),
            "shared_minus_exact": statistics.fmean(n - e for n, e in zip(new, exact)),
            "per_chunk_epoch_s": statistics.fmean(old_t), "shared_epoch_s": statistics.fmean(new_t),
            "per_chunk_revisions": sorted(str(r) for r in revs_old),
            "shared_revisions": sorted(str(r) for r in revs_new)})
    return rows


def _pm(s: dict[str, Any]) -> str:
    if s["mean"] is None:
        return "-"
    return f"{s['mean']:.2f}" + (f" +- {s['std']:.2f}" if s["std"] is not None else "")


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| dataset | model | mode | seeds | exact | per-chunk masks (diff) | shared masks (diff) "
             "| epoch s per-chunk / shared |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['mode']} | {len(r['seeds'])} | {_pm(r['exact_test_acc'])} "
            f"| {_pm(r['per_chunk_masks_test_acc'])} ({r['per_chunk_minus_exact']:+.2f}) "
            f"| {_pm(r['shared_masks_test_acc'])} ({r['shared_minus_exact']:+.2f}) "
            f"| {r['per_chunk_epoch_s']:.3f} / {r['shared_epoch_s']:.3f} |")
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
