"""The planner against measurement: predicted vs measured epoch time and peak memory.

For each graph (default Amazon Photo and BlogCatalog from the data root; loader
options with ``--data-option``) and each mode (single; graph P=2; pipeline S=2 C=8;
hybrid W=2 S=1 C=8; ``--chunks`` sets C), GCNII-32 hidden 100 (``--model`` sets the kind),
it asks :mod:`gnnpipe.plan` for that layout's predicted epoch time and peak memory
per worker (profile calibrated once per graph by the short measurement of
``python -m gnnpipe.plan calibrate``, at the graph's feature width), then trains it
for ``--epochs`` epochs through the public entry (``python -m gnnpipe.train ...
--json-out``) and reads the record: ``summary.mean_epoch_time_s`` (warm-up epochs
left out) and the largest ``peak_memory_bytes``. Writes
``bench/results/plan_check.json`` with both, their ratio (predicted / measured),
the machine, the load average before and after, and the config. Target: the
predicted epoch time within 25 % of the measured one for every mode.

    python bench/plan_check.py            # a few minutes on 2 cores
    python bench/plan_check.py --graphs synthetic --model gcn --epochs 4 \
        --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 \
        --data-option feature_signal=0.22 --data-option seed=0 --out bench/results/plan_check_200k.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnnpipe.config import ModelConfig, default_snapshot_period, stale_sensitive  # noqa: E402
from gnnpipe.data import load_dataset  # noqa: E402
from gnnpipe.data.options import parse_option_words  # noqa: E402
from gnnpipe.plan import ModelShape, graph_stats, make_plan  # noqa: E402
from gnnpipe.plan.calibrate import calibrate_for  # noqa: E402
from gnnpipe.trainer.record import machine_info, write_json_atomic  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "plan_check.json"


def layouts(chunks: int = 8) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """mode -> (trainer flags, planner restriction); ``chunks``: the pipeline's and the hybrid's C."""
    c = str(chunks)
    return {
        "single": (["--mode", "single"], {"modes": ("single",)}),
        "graph": (["--mode", "graph", "--workers", "2"], {"modes": ("graph",)}),
        "pipeline": (["--mode", "pipeline", "--workers", "2", "--chunks", c],
                     {"modes": ("pipeline",), "chunks": chunks}),
        "hybrid": (["--mode", "hybrid", "--workers", "2", "--ways", "2", "--chunks", c],
                   {"modes": ("hybrid",), "ways": 2, "chunks": chunks}),
    }


def predicted_layout(stats: Any, model: Any, profile: Any, workers: int, **restrict: Any) -> Any:
    """The plan's candidate for one layout (``restrict``: make_plan's mode, ways, chunks,
    ...), at the equal stage split and, unless ``restrict`` names one, the trainer's
    default snapshot period for the model (R = 1 for a deep GCN or GraphSAGE), as a run
    given that layout trains it."""
    shape = ModelShape.of(model, stats.num_features, stats.num_classes)
    restrict.setdefault("snapshot_period", default_snapshot_period(stale_sensitive(model.model, model.layers)))
    plan = make_plan(stats, shape, profile, workers=workers, **restrict)
    return next(c for c in plan.candidates if c.split in ("equal", "-"))


def _measure(dataset: str, root: str, flags: list[str], model: ModelConfig, epochs: int,
             data_options: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "record.json"
        argv = [sys.executable, "-m", "gnnpipe.train", "--dataset", dataset, "--data-root", root,
                "--model", model.model, "--layers", str(model.layers), "--hidden", str(model.hidden),
                "--epochs", str(epochs), "--eval-every", str(epochs), "--log-level", "WARNING",
                "--json-out", str(out), *flags]
        for option in data_options:
            argv += ["--data-option", option]
        t0 = time.time()
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            return {"argv": argv[1:], "returncode": proc.returncode, "stderr": proc.stderr[-2000:]}
        rec = json.loads(out.read_text())
    return {"argv": argv[1:], "returncode": 0, "wall_s": time.time() - t0,
            "epoch_s": rec["summary"]["mean_epoch_time_s"],
            "epoch_s_skipped_epochs": rec["summary"]["mean_epoch_time_skipped_epochs"],
            "epoch_times_s": [e["epoch_time_s"] for e in rec["epochs"]],
            "time_split_last_epoch": rec["epochs"][-1]["time"],
            "peak_memory_bytes": max(m["bytes"] for m in rec["peak_memory_bytes"]),
            "peak_memory_source": rec["peak_memory_bytes"][0]["source"],
            "bytes_measured": rec["epochs"][-1]["bytes"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="amazon_photo,blogcatalog")
    ap.add_argument("--modes", default="single,graph,pipeline,hybrid")
    ap.add_argument("--data-root", default=os.environ.get("GNNPIPE_DATA_ROOT", "/work/shared/datasets"))
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--model", default="gcnii", choices=("gcn", "sage", "gcnii", "resgcn+"))
    ap.add_argument("--chunks", type=int, default=8, help="the pipeline's and the hybrid's C")
    ap.add_argument("--data-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a loader option for every graph (the trainer's --data-option; repeatable)")
    args = ap.parse_args(argv)
    if args.chunks < 2:
        ap.error(f"--chunks: expected an integer >= 2, found {args.chunks}")
    model = ModelConfig(model=args.model, layers=32, hidden=100)
    table = layouts(args.chunks)
    load_before = list(os.getloadavg())
    results: dict[str, Any] = {}
    for name in args.graphs.split(","):
        graph = load_dataset(name, root=args.data_root, **parse_option_words(args.data_option))
        stats = graph_stats(graph)
        t0 = time.time()
        profile = calibrate_for(stats, model.model, model.hidden, workers=2, graph=graph)
        cal_s = time.time() - t0
        results.setdefault(name, {})["calibration"] = {"calibration_s": cal_s, "profile": profile.__dict__}
        for mode in args.modes.split(","):
            flags, restrict = table[mode]
            pred = predicted_layout(stats, model, profile, 2, **restrict).as_dict()
            meas = _measure(name, args.data_root, flags, model, args.epochs, args.data_option)
            row: dict[str, Any] = {"predicted": pred, "measured": meas}
            if meas.get("returncode") == 0 and meas["epoch_s"]:
                row["epoch_time_ratio"] = pred["predicted_epoch_s"] / meas["epoch_s"]
                row["peak_memory_ratio"] = pred["predicted_peak_memory_bytes"] / meas["peak_memory_bytes"]
                row["within_25_percent"] = abs(row["epoch_time_ratio"] - 1.0) <= 0.25
            results.setdefault(name, {})[mode] = row
            print(f"{name:14s} {mode:9s} predicted {pred['predicted_epoch_s']:.3f} s "
                  f"{pred['predicted_peak_memory_bytes'] / 2**30:.2f} GiB | measured "
                  f"{meas.get('epoch_s', float('nan')):.3f} s "
                  f"{meas.get('peak_memory_bytes', 0) / 2**30:.2f} GiB | ratio "
                  f"{row.get('epoch_time_ratio', float('nan')):.2f} / {row.get('peak_memory_ratio', float('nan')):.2f}",
                  flush=True)
    ratios = [r["epoch_time_ratio"] for g in results.values() for r in g.values() if "epoch_time_ratio" in r]
    record = {
        "benchmark": "plan_check",
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info("cpu"),
        "load_average_before": load_before, "load_average_after": list(os.getloadavg()),
        "config": {"model": model.model, "layers": model.layers, "hidden": model.hidden, "workers": 2,
                   "epochs": args.epochs, "graphs": args.graphs.split(","), "data_root": args.data_root,
                   "data_options": args.data_option, "layouts": {m: table[m][0] for m in args.modes.split(",")}},
        "target": "predicted epoch time within 25 % of measured for every mode",
        "all_within_25_percent": bool(ratios) and all(abs(r - 1) <= 0.25 for r in ratios),
        "results": results,
    }
    write_json_atomic(record, args.out)
    print(f"written {args.out}; load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
