"""The planner against measurement: predicted vs measured epoch time and peak memory.

For each graph (default Amazon Photo and BlogCatalog from the data root; loader
options with ``--data-option``) and each mode (single; graph P=2; pipeline S=2 C=8;
hybrid W=2 S=1 C=8; ``--chunks`` sets C), GCNII-32 hidden 100 (``--model`` sets the kind),
it asks :mod:`gnnpipe.plan` for that layout's predicted epoch time and peak memory
per worker (profile calibrated once per graph by the short measurement of
``python -m gnnpipe.plan calibrate``, at the graph's feature width), then trains it
for ``--epochs`` epochs through the public entry (``python -m gnnpipe.train ...
--json-out``) and reads the record: ``summary.mean_epoch_time_s`` (warm-up epochs
left out) and the largest ``peak_memory_bytes``. ``--rounds N`` repeats all of it
(calibration included) N times in turn, and the target is judged on each layout's
median ratio (:func:`summarize`). Writes ``bench/results/plan_check.json`` after every
layout (``--resume`` continues a run that stopped) with both figures of every round,
their ratio (predicted / measured), the medians, the machine, the load average before
and after, and the config. Target: the predicted epoch time within 25 % of the
measured one for every mode.

    python bench/plan_check.py            # a few minutes a round on 2 cores
    python bench/plan_check.py --rounds 3 --out bench/results/plan_check_rounds.json
    python bench/plan_check.py --graphs synthetic --model gcn --epochs 4 \
        --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 \
        --data-option feature_signal=0.22 --data-option seed=0 --out bench/results/plan_check_200k.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnnpipe.config import ModelConfig, default_snapshot_period, stale_sensitive  # noqa: E402
from gnnpipe.data import load_dataset  # noqa: E402
from gnnpipe.data.options import parse_option_words  # noqa: E402
from gnnpipe.huge_pages import request_huge_pages  # noqa: E402
from gnnpipe.plan import ModelShape, graph_stats, make_plan  # noqa: E402
from gnnpipe.plan.calibrate import calibrate_for  # noqa: E402
from gnnpipe.plan.inputs import HardwareProfile  # noqa: E402
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


def _row(pred: dict[str, Any], meas: dict[str, Any]) -> dict[str, Any]:
    """One round of one layout: the prediction, the measurement and their ratios."""
    row: dict[str, Any] = {"predicted": pred, "measured": meas}
    if meas.get("returncode") == 0 and meas["epoch_s"]:
        row["epoch_time_ratio"] = pred["predicted_epoch_s"] / meas["epoch_s"]
        row["peak_memory_ratio"] = pred["predicted_peak_memory_bytes"] / meas["peak_memory_bytes"]
    return row


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """A layout over its rounds: the median of the rounds' ratios (predicted /
    measured), which the 25 % target is judged on, and their range. On a shared
    machine one round's epochs, and one calibration's rates, move by up to a quarter
    between runs minutes apart; the median of alternating rounds is what a plan made
    at one moment can be held to."""
    out: dict[str, Any] = {"rounds": len(rounds)}
    for key in ("epoch_time_ratio", "peak_memory_ratio"):
        got = [r[key] for r in rounds if key in r]
        if got:
            out[f"median_{key}"] = statistics.median(got)
            out[f"{key}_range"] = [min(got), max(got)]
    if "median_epoch_time_ratio" in out:
        out["within_25_percent"] = abs(out["median_epoch_time_ratio"] - 1.0) <= 0.25
    return out


def main(argv: list[str] | None = None) -> int:
    request_huge_pages()  # as the runs do by default: the calibration in this process measures the same
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="amazon_photo,blogcatalog")
    ap.add_argument("--modes", default="single,graph,pipeline,hybrid")
    ap.add_argument("--data-root", default=os.environ.get("GNNPIPE_DATA_ROOT", "/work/shared/datasets"))
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternating rounds (each calibrates every graph again and runs every layout); "
                         "the target is judged on the median ratio")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rounds already in --out (same config) and run only the missing ones")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--model", default="gcnii", choices=("gcn", "sage", "gcnii", "resgcn+"))
    ap.add_argument("--chunks", type=int, default=8, help="the pipeline's and the hybrid's C")
    ap.add_argument("--data-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a loader option for every graph (the trainer's --data-option; repeatable)")
    args = ap.parse_args(argv)
    if args.chunks < 2:
        ap.error(f"--chunks: expected an integer >= 2, found {args.chunks}")
    if args.rounds < 1:
        ap.error(f"--rounds: expected an integer >= 1, found {args.rounds}")
    model = ModelConfig(model=args.model, layers=32, hidden=100)
    table = layouts(args.chunks)
    graphs, modes = args.graphs.split(","), args.modes.split(",")
    config = {"model": model.model, "layers": model.layers, "hidden": model.hidden, "workers": 2,
              "epochs": args.epochs, "rounds": args.rounds, "graphs": graphs, "data_root": args.data_root,
              "data_options": args.data_option, "layouts": {m: table[m][0] for m in modes}}
    record: dict[str, Any] = {
        "benchmark": "plan_check", "machine": machine_info("cpu"), "load_average_before": list(os.getloadavg()),
        "config": config, "target": "predicted epoch time within 25 % of measured for every mode "
                                    "(the median over the rounds)", "rounds": []}
    if args.resume and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        if {k: v for k, v in old.get("config", {}).items() if k != "rounds"} != \
                {k: v for k, v in config.items() if k != "rounds"}:
            ap.error(f"--resume: expected {args.out} to hold this config, found {old.get('config')}")
        record["load_average_before"] = old["load_average_before"]
        record["rounds"] = old.get("rounds", [])

    def save() -> None:
        # After every layout: a later failure or a killed session keeps what was measured.
        record["date_utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        record["load_average_after"] = list(os.getloadavg())
        record["summary"] = {g: {m: summarize([r["results"][g][m] for r in record["rounds"]
                                               if m in r["results"].get(g, {})]) for m in modes}
                             for g in graphs}
        medians = [s.get("median_epoch_time_ratio") for g in record["summary"].values() for s in g.values()]
        record["all_within_25_percent"] = bool(medians) and all(
            r is not None and abs(r - 1) <= 0.25 for r in medians)
        write_json_atomic(record, args.out)

    loaded: dict[str, Any] = {}
    for rnd in range(args.rounds):
        if rnd == len(record["rounds"]):
            record["rounds"].append({"round": rnd, "load_average_before": list(os.getloadavg()), "results": {}})
        results = record["rounds"][rnd]["results"]
        for name in graphs:
            done = results.setdefault(name, {})
            if all(m in done for m in modes):
                continue
            if name not in loaded:
                graph = load_dataset(name, root=args.data_root, **parse_option_words(args.data_option))
                loaded[name] = (graph, graph_stats(graph))
            graph, stats = loaded[name]
            if "calibration" in done:  # resumed mid-round: the round's own profile
                profile = HardwareProfile(**done["calibration"]["profile"])
            else:
                t0 = time.time()
                profile = calibrate_for(stats, model.model, model.hidden, workers=2, graph=graph)
                done["calibration"] = {"calibration_s": time.time() - t0, "profile": asdict(profile)}
            for mode in modes:
                if mode in done:
                    continue
                flags, restrict = table[mode]
                pred = predicted_layout(stats, model, profile, 2, **restrict).as_dict()
                meas = _measure(name, args.data_root, flags, model, args.epochs, args.data_option)
                row = done[mode] = _row(pred, meas)
                save()
                print(f"round {rnd} {name:14s} {mode:9s} predicted {pred['predicted_epoch_s']:.3f} s "
                      f"{pred['predicted_peak_memory_bytes'] / 2**30:.2f} GiB | measured "
                      f"{meas.get('epoch_s', float('nan')):.3f} s "
                      f"{meas.get('peak_memory_bytes', 0) / 2**30:.2f} GiB | ratio "
                      f"{row.get('epoch_time_ratio', float('nan')):.2f} / "
                      f"{row.get('peak_memory_ratio', float('nan')):.2f}", flush=True)
    save()
    for g, per_mode in record["summary"].items():
        for m, s in per_mode.items():
            if "median_epoch_time_ratio" in s:
                lo, hi = s["epoch_time_ratio_range"]
                print(f"{g:14s} {m:9s} median ratio {s['median_epoch_time_ratio']:.2f} "
                      f"(rounds {lo:.2f}-{hi:.2f}) within 25 %: {s['within_25_percent']}")
    print(f"written {args.out}; load average before {record['load_average_before'][0]:.2f}, "
          f"after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
