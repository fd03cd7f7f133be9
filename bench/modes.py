"""Mode benchmark: single, graph, pipeline and hybrid on one graph, same model, same epochs.

For every mode it trains the same model (default: 32-layer GCN, hidden 100) on the
same synthetic graph (default: ~200k vertices, ~2M directed edges) for the same
number of epochs through the public entry (``gnnpipe.api.run``: launcher, workers,
record) and reports, from the result record:

* epoch time (mean over the epochs after the warm-up ones, as the record defines it);
* payload bytes per epoch by kind (measured, summed over workers) beside the DESIGN.md 7
  prediction the runner makes, and their ratio (training kinds);
* the validation and test accuracy after the last epoch (one evaluation, at the end);
* the time split (compute / comm wait / bubble), peak memory per worker, wall time.

The JSON goes to ``bench/results/modes.json`` (``--out``) with the machine and the
full configuration. A quick check::

    python bench/modes.py --num-nodes 3000 --layers 4 --hidden 16 --epochs 3 \
        --out bench/results/modes_small.json

Worker processes get ``OMP_NUM_THREADS = cores // workers`` so that P workers share
the machine's cores instead of oversubscribing them (single mode uses every core);
``--single-threads`` / ``--threads-per-worker`` override. On a machine that other
jobs load, OpenMP threads that outnumber the free cores make every mode slower, the
multi-threaded single mode most: compare modes on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import time
from pathlib import Path
from typing import Any

from graphs import SYSTEMS_SYNTHETIC  # bench/graphs.py (this script's folder is on sys.path)

RESULTS = Path(__file__).resolve().parent / "results" / "modes.json"
MODES = ("single", "graph", "pipeline", "hybrid")
TRAINING_KINDS = ("stage_activations", "stage_gradients", "halo_rows", "halo_gradients", "weight_allreduce")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _config(args: argparse.Namespace, mode: str) -> Any:
    from gnnpipe.config import RunConfig

    parallel: dict[str, Any] = {"mode": mode, "device": args.device, "partition": args.partition}
    if mode != "single":
        parallel["workers"] = args.workers
    if mode in ("pipeline", "hybrid") and args.chunks is not None:
        parallel["chunks"] = args.chunks
    if mode == "hybrid" and args.ways is not None:
        parallel["ways"] = args.ways
    return RunConfig.from_dict({
        "data": {"dataset": "synthetic", "options": {**SYSTEMS_SYNTHETIC, "num_nodes": args.num_nodes,
                                                     "avg_degree": args.avg_degree, "seed": args.seed}},
        "model": {"model": args.model, "layers": args.layers, "hidden": args.hidden, "dropout": args.dropout},
        "train": {"epochs": args.epochs, "lr": args.lr, "eval_every": args.epochs, "seed": args.seed,
                  "log_level": args.log_level, "log_every": max(1, args.epochs // 5)},
        "parallel": parallel,
    })


def _summarise(record: dict[str, Any]) -> dict[str, Any]:
    """The figures of one mode, from its result record."""
    epochs = record["epochs"]
    n = len(epochs)
    measured = {k: sum(e["bytes"][k] for e in epochs) / n for k in record["epochs"][0]["bytes"]}
    predicted = epochs[0]["bytes_predicted"]
    out: dict[str, Any] = {
        "world_size": record["world_size"],
        "epochs_run": n,
        "mean_epoch_time_s": record["summary"]["mean_epoch_time_s"],
        "epoch_times_s": [e["epoch_time_s"] for e in epochs],
        "time_split_mean_s": {k: sum(e["time"][k] for e in epochs) / n for k in epochs[0]["time"]},
        "bytes_per_epoch": measured,
        "bytes_predicted_per_epoch": predicted,
        "final_loss": record["summary"]["final_loss"],
        "val_acc": epochs[-1]["val_acc"],
        "test_acc": epochs[-1]["test_acc"],
        "peak_memory_bytes": record["peak_memory_bytes"],
        "wall_time_s": record["wall_time_s"],
        "extra": record.get("extra", {}),
    }
    if predicted is not None:
        meas = sum(measured[k] for k in TRAINING_KINDS)
        pred = sum(int(predicted.get(k, 0)) for k in TRAINING_KINDS)
        out["training_bytes_per_epoch"] = meas
        out["training_bytes_predicted"] = pred
        out["measured_over_predicted"] = (meas / pred) if pred else (1.0 if meas == 0 else None)
        out["by_kind_measured_over_predicted"] = {
            k: (measured[k] / predicted[k]) if predicted.get(k) else None for k in TRAINING_KINDS
        }
    else:
        out["training_bytes_per_epoch"] = 0
        out["training_bytes_predicted"] = None
        out["measured_over_predicted"] = None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--num-nodes", type=int, default=200_000)
    ap.add_argument("--avg-degree", type=float, default=10.0, help="directed edges per vertex (E ~ N * this)")
    ap.add_argument("--model", default="gcn")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=None, help="pipeline/hybrid chunks (default: the config's)")
    ap.add_argument("--ways", type=int, default=None, help="hybrid ways (default: the config's)")
    ap.add_argument("--partition", default="metis", choices=("metis", "random"))
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--single-threads", type=int, default=None, help="intra-op threads of single mode "
                    "(default: every core)")
    ap.add_argument("--threads-per-worker", type=int, default=None, help="OMP_NUM_THREADS of each worker "
                    "(default: cores // workers)")
    ap.add_argument("--log-level", default="INFO")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    import torch

    from gnnpipe.api import load_graph, run
    from gnnpipe.trainer.progress import setup_logging
    from gnnpipe.trainer.record import graph_summary, machine_info, write_json_atomic

    setup_logging(args.log_level)
    cores = _cores()
    single_threads = args.single_threads or cores
    per_worker = args.threads_per_worker or max(1, cores // args.workers)
    cfg0 = _config(args, "single")
    t0 = time.perf_counter()
    graph = load_graph(cfg0.data)
    load_s = time.perf_counter() - t0
    print(f"graph: {graph} (loaded in {load_s:.1f} s)", file=sys.stderr, flush=True)
    results: dict[str, Any] = {}
    for mode in args.modes:
        cfg = _config(args, mode)
        if mode == "single":
            torch.set_num_threads(single_threads)
        else:
            # Read by the worker processes when they import torch.
            os.environ["OMP_NUM_THREADS"] = str(per_worker)
        print(f"--- {mode}", file=sys.stderr, flush=True)
        t1 = time.perf_counter()
        try:
            record = run(cfg, graph)
        except Exception as exc:  # one mode failing must not lose the others' figures
            results[mode] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"{mode} failed: {exc}", file=sys.stderr, flush=True)
            continue
        assert record is not None
        results[mode] = _summarise(record)
        results[mode]["config"] = cfg.to_dict()
        results[mode]["bench_wall_s"] = time.perf_counter() - t1
        r = results[mode]
        print(f"{mode}: epoch {r['mean_epoch_time_s']:.3f} s, train bytes/epoch {r['training_bytes_per_epoch']:.3e}"
              f" (measured/predicted {r['measured_over_predicted']}), val {r['val_acc']:.4f}",
              file=sys.stderr, flush=True)

    doc = {
        "benchmark": "modes",
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(cfg0.parallel.resolved_device()),
        "threads": {"cores": cores, "single": single_threads, "per_worker": per_worker},
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "dataset": graph_summary(graph),
        "graph_load_s": load_s,
        "notes": ("epoch time = mean over epochs after the warm-up ones (record summary); bytes summed over "
                  "workers; predicted = DESIGN.md 7 per training epoch (X replicated: layer 1 sends no halo "
                  "rows); accuracy after the last epoch, evaluated once"),
        "results": results,
    }
    write_json_atomic(doc, args.out)
    print(f"wrote {args.out}", file=sys.stderr, flush=True)
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
