"""The planner's predicted peak memory per worker against what committed runs measured.

For every trainer record under the given result folders (a suite's records), this
asks :mod:`gnnpipe.plan` for the record's own layout (mode, workers, ways, chunks,
snapshot period, dropout masks; its graph's exact partitions, its model) and puts the
predicted peak bytes of the largest worker beside the record's largest
``peak_memory_bytes`` (VmHWM on CPU). Nothing is trained: the records are the
measurement. The profile is calibrated once per graph (``gnnpipe.plan.calibrate``; its
memory figures, the runtime's resident size and the values autograd keeps per row, do
not depend on the load) or read with ``--profile``. Writes a JSON with the machine, the
load average and each record's figures and ratio (predicted / measured)::

    python bench/plan_memory.py bench/results/after-memfix/modes bench/results/after-memfix/modes-gcn-default \\
        --out bench/results/plan_memory_200k.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.plan_check import predicted_layout  # noqa: E402
from bench.runner import source_revision  # noqa: E402
from gnnpipe.config import RunConfig  # noqa: E402
from gnnpipe.data import load_dataset  # noqa: E402
from gnnpipe.plan import calibrate, graph_stats  # noqa: E402
from gnnpipe.plan.inputs import read_profile  # noqa: E402
from gnnpipe.trainer.machine import load_average  # noqa: E402
from gnnpipe.trainer.record import machine_info, write_json_atomic  # noqa: E402


def _records(folders: list[str]) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for folder in folders:
        for path in sorted(Path(folder).glob("*.json")):
            rec = json.loads(path.read_text())
            if isinstance(rec, dict) and "peak_memory_bytes" in rec and "config" in rec:
                out.append((path, rec))
    return out


def predict(cfg: RunConfig, stats: Any, profile: Any) -> dict[str, Any]:
    """The plan's candidate for the record's own layout (the equal stage split)."""
    pc = cfg.parallel
    restrict: dict[str, Any] = {"modes": (pc.mode,)}
    if pc.mode in ("pipeline", "hybrid"):
        restrict.update(chunks=pc.chunks, ways=pc.ways)
    c = predicted_layout(stats, cfg.model, profile, pc.workers if pc.mode != "single" else 1,
                         snapshot_period=pc.snapshot_period, row_masks=pc.dropout_masks == "row", **restrict)
    return {"layout": c.label(), "predicted_peak_bytes": int(c.peak_memory_bytes)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", help="result folders with trainer records")
    ap.add_argument("--profile", help="a profile JSON (default: calibrate once per graph)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    before = load_average()
    graphs: dict[str, tuple[Any, Any]] = {}
    rows = []
    for path, rec in _records(args.folders):
        cfg = RunConfig.from_dict(rec["config"])
        key = json.dumps(rec["config"]["data"], sort_keys=True)
        if key not in graphs:
            graph = load_dataset(cfg.data.dataset, root=cfg.data.root, **dict(cfg.data.options))
            stats = graph_stats(graph, method=cfg.parallel.partition)
            profile = (read_profile(args.profile) if args.profile else
                       calibrate(hidden=cfg.model.hidden, num_features=stats.num_features,
                                 mean_degree=stats.num_edges / stats.num_nodes, num_nodes=stats.num_nodes,
                                 workers=cfg.parallel.workers))
            graphs[key] = (stats, profile)
        stats, profile = graphs[key]
        measured = max(int(p["bytes"]) for p in rec["peak_memory_bytes"])
        row = {"record": str(path), **predict(cfg, stats, profile), "measured_peak_bytes": measured}
        row["predicted_over_measured"] = row["predicted_peak_bytes"] / measured
        print(f"{path.name}: {row['layout']}: predicted {row['predicted_peak_bytes'] / 2**30:.2f} GiB, "
              f"measured {measured / 2**30:.2f} GiB, ratio {row['predicted_over_measured']:.2f}", flush=True)
        rows.append(row)
    write_json_atomic({
        "what": "predicted peak memory per worker (gnnpipe.plan, the record's own layout) against the "
                "record's measured peak (largest worker); ratio computed",
        "written_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine_info(), "source": source_revision()}, "load_average_before": before, "load_average_after": load_average(),
        "config": {"folders": args.folders, "profile": args.profile or "calibrated once per graph"},
        "profiles": {k: v[1].source for k, v in graphs.items()},
        "rows": rows,
    }, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
