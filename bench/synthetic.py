"""Benchmark of the synthetic generator: wall time and peak memory per size.

Each size runs in a fresh subprocess so that its peak RSS (resource.getrusage) is its
own; tracemalloc additionally reports the peak of numpy's allocations (torch's
allocations are not traced, RSS covers them). Writes bench/results/synthetic.json.

    python bench/synthetic.py                 # 20k (default job) and 1M vertices / ~10M edges
    python bench/synthetic.py --sizes 100000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from graphs import SYSTEMS_SYNTHETIC  # bench/graphs.py (this script's folder is on sys.path)

RESULTS = Path(__file__).resolve().parent / "results" / "synthetic.json"

_CHILD = r"""
import json, resource, sys, time, tracemalloc
import torch
from gnnpipe.data import synthetic_graph
n, deg, pinned = int(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t = time.perf_counter()
g = synthetic_graph(**{**pinned, "num_nodes": n, "avg_degree": deg})
wall = time.perf_counter() - t
_, traced_peak = tracemalloc.get_traced_memory()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"num_nodes": g.num_nodes, "num_edges": g.num_edges, "num_features": g.num_features,
                  "avg_degree_requested": deg, "wall_s": wall, "peak_rss_gib": peak / 2**20,
                  "rss_before_gib": base / 2**20, "tracemalloc_peak_gib": traced_peak / 2**30,
                  "torch_threads": torch.get_num_threads()}))
"""


def machine() -> dict:
    import torch

    return {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "loadavg_1min": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 1_000_000])
    ap.add_argument("--avg-degree", type=float, default=10.2,
                    help="requested mean degree (10.2 gives >= 10M directed edges at 1M vertices "
                         "after self-loops and repeats are dropped)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    runs = []
    for n in args.sizes:
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", _CHILD, str(n), str(args.avg_degree),
                              json.dumps(SYSTEMS_SYNTHETIC)], check=True,
                             capture_output=True, text=True)
        rec = json.loads(out.stdout.strip().splitlines()[-1])
        rec["process_wall_s"] = time.perf_counter() - t
        print(json.dumps(rec))
        runs.append(rec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "synthetic_graph", "machine": machine(),
                                    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "runs": runs}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
