"""Cold and cached load time of every shared dataset.

For each dataset, in a fresh cache folder: a *cold* load (parse + convert + write the
cache entry) in one process, then a *cached* load in a second, new process (what a
user's next run sees), then a second cached load in that same process. Each load runs
in its own subprocess so that no process inherits another's warm memory; only the
``load_dataset`` call is timed (not the interpreter or torch import).
Writes bench/results/datasets.json with machine info.

    python bench/datasets.py [--root /work/shared/datasets] [--names cora tolokers]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "datasets.json"

_CHILD = r"""
import json, sys, time
from gnnpipe.data import load_dataset
name, root, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
opts = {"structure_only": True} if name == "pubmed" else {}
times = []
for _ in range(repeats):
    t = time.perf_counter()
    g = load_dataset(name, root=root, **opts)
    times.append(time.perf_counter() - t)
print(json.dumps({"times_s": times, "num_nodes": g.num_nodes, "num_edges": g.num_edges,
                  "num_features": g.num_features, "num_classes": g.num_classes}))
"""


def _run(name: str, root: str, repeats: int, cache: str) -> dict:
    env = {**os.environ, "GNNPIPE_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", _CHILD, name, root, str(repeats)], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine() -> dict:
    import torch

    return {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "loadavg_1min_at_start": os.getloadavg()[0]}


def main() -> None:
    from gnnpipe.data import list_datasets

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.environ.get("GNNPIPE_DATA_ROOT", "/work/shared/datasets"))
    ap.add_argument("--names", nargs="+", default=None)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    names = args.names or [n for n in list_datasets() if n != "synthetic" and not n.startswith("ogbn-")]
    mach = machine()
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="gnnpipe-bench-cache-") as cache:
            cold = _run(name, args.root, 1, cache)
            warm = _run(name, args.root, 2, cache)
            entry = sum(p.stat().st_size for p in Path(cache).iterdir())
        row = {"name": name, "cold_s": cold["times_s"][0], "cached_new_process_s": warm["times_s"][0],
               "cached_same_process_s": warm["times_s"][1], "cache_entry_bytes": entry,
               **{k: cold[k] for k in ("num_nodes", "num_edges", "num_features", "num_classes")}}
        if name == "pubmed":
            row["note"] = "structure_only=True (ind.pubmed.allx is missing)"
        print(json.dumps(row), flush=True)
        rows.append(row)
    mach["loadavg_1min_at_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "load_dataset cold vs cached", "root": args.root,
                                    "machine": mach, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "max_cached_new_process_s": max(r["cached_new_process_s"] for r in rows),
                                    "datasets": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
