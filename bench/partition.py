"""Partition benchmark: METIS time and quality against the random baseline.

For every dataset and part count it runs METIS (uniform vertex weights and in-degree+1
weights) and the balanced random partition with the disk cache off, and records the
wall time of the partitioner (best and all of ``--repeats`` runs; METIS' time includes
building the symmetrised CSR it needs), the edge cut (undirected edges of the
symmetrised graph), balance, total halo and M (DESIGN.md 2). Results go to
``bench/results/partition.json`` with the machine description.

    python bench/partition.py --root /work/shared/datasets
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pymetis
import torch

from gnnpipe.data import load_dataset
from gnnpipe.partition import make_partition, partition_stats
from gnnpipe.trainer.machine import load_average, machine_info

RESULTS = Path(__file__).resolve().parent / "results" / "partition.json"

#: (label, method, vertex_weights)
VARIANTS = (("metis", "metis", None), ("metis-degree", "metis", "degree"), ("random", "random", None))


def machine() -> dict:
    """The record's machine (:func:`gnnpipe.trainer.machine.machine_info`) with the
    partitioner's libraries and the load at the start."""
    return {**machine_info("cpu"), "torch_threads": torch.get_num_threads(), "numpy": np.__version__,
            "pymetis": getattr(pymetis, "version", "?"), "load_average_1m_at_start": (load_average() or [None])[0],
            "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def bench_one(graph, num_parts: int, method: str, weights, seed: int, repeats: int) -> dict:
    times = []
    part = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        part = make_partition(graph, num_parts, method=method, seed=seed, vertex_weights=weights)
        times.append(time.perf_counter() - t0)
    s = partition_stats(graph, part.parts, num_parts, method=method, seed=seed)
    out = {
        "num_parts": num_parts,
        "seconds_best": min(times),
        "seconds_all": times,
        "edge_cut": s.edge_cut,
        "edge_cut_fraction": s.edge_cut_fraction,
        "cut_in_edges": s.cut_in_edges,
        "balance": s.balance,
        "total_halo": s.total_halo,
        "M": s.M,
        "min_part": min(s.part_sizes),
        "max_part": max(s.part_sizes),
    }
    if weights == "degree":
        w = (graph.in_degree + 1).to(torch.float64)
        per_part = torch.zeros(num_parts, dtype=torch.float64).index_add_(0, part.parts, w)
        out["weighted_balance"] = float(per_part.max() / per_part.mean())
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=os.environ.get("GNNPIPE_DATA_ROOT", "/work/shared/datasets"))
    p.add_argument("--datasets", default="cora,tolokers")
    p.add_argument("--parts", default="2,4,8,32")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    parts = [int(x) for x in args.parts.split(",")]
    results = []
    for name in args.datasets.split(","):
        graph = load_dataset(name, root=args.root)
        entry = {
            "dataset": name,
            "num_nodes": graph.num_nodes,
            "num_edges_stored": graph.num_edges,
            "runs": {},
        }
        for label, method, weights in VARIANTS:
            entry["runs"][label] = [bench_one(graph, k, method, weights, args.seed, args.repeats) for k in parts]
        for k_idx, k in enumerate(parts):
            m, r = entry["runs"]["metis"][k_idx], entry["runs"]["random"][k_idx]
            print(
                f"{name:>10} P={k:>3}: metis cut {m['edge_cut']:>7} ({100 * m['edge_cut_fraction']:5.1f}%) "
                f"M {m['M']:>7} bal {m['balance']:.3f} {m['seconds_best']:.3f}s | random cut "
                f"{r['edge_cut']:>7} ({100 * r['edge_cut_fraction']:5.1f}%) M {r['M']:>7} | "
                f"cut ratio {m['edge_cut'] / max(r['edge_cut'], 1):.3f}"
            )
        results.append(entry)
    record = {
        "benchmark": "partition",
        "machine": machine(),
        "config": {"parts": parts, "repeats": args.repeats, "seed": args.seed,
                   "variants": [v[0] for v in VARIANTS], "cache": False,
                   "edge_cut": "undirected edges of the symmetrised graph without self-loops"},
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
