"""Aggregation kernel benchmark: every available ChunkOps backend and reduce.

On a 200k-vertex, 2M-edge power-law graph (by default), at hidden sizes 64 and 128,
in random vertex order and in METIS order (METIS parts renumbered contiguously, which
is what a chunked run sees), it times ``ChunkOps.aggregate`` of the whole graph,
forward alone and forward + backward (w.r.t. the input and, for ``weighted``, the edge
weights): the median of ``--repeats`` runs after one warm-up.

Achieved bandwidth uses a simple byte model per forward product:
``CSR arrays (indptr + indices + values) + gathered rows (nnz * d) + output (N * d)``
elements; the backward is counted as the same again (a transposed product), plus the
SDDMM for the edge-weight gradient (``nnz * (2 d + 1)``) for ``weighted``. It is
reported next to the machine's measured copy bandwidth (read + write of a large
tensor copy). Results go to ``bench/results/kernels.json`` with the machine info.

    python bench/kernels.py                       # full run (minutes on 2 cores)
    python bench/kernels.py --nodes 20000 --edges 200000 --out /tmp/k.json   # quick
    python bench/kernels.py --device cuda         # on a GPU (synchronised timing)
    python bench/kernels.py --backends torch scatter --out bench/results/kernels_scatter.json
                                                  # torch-scatter beside the CSR backend
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import time
from pathlib import Path
from typing import Callable

from graphs import SYSTEMS_SYNTHETIC  # bench/graphs.py (this script's folder is on sys.path)

import torch

from gnnpipe.data import Graph
from gnnpipe.kernels import REDUCES, ChunkOps, available_backends
from gnnpipe.partition import metis_partition, reorder, whole_graph_plan
from gnnpipe.trainer.machine import load_average, machine_info

RESULTS = Path(__file__).resolve().parent / "results" / "kernels.json"


def machine(device: torch.device) -> dict:
    """The record's machine (:func:`gnnpipe.trainer.machine.machine_info`) with what a
    kernel timing also depends on: threads, MKL, and the scatter library's version."""
    info = {**machine_info(device.type), "torch_threads": torch.get_num_threads(),
            "mkl": torch.backends.mkl.is_available(), "load_average_1_5_15": load_average()}
    try:  # the scatter backend's library, when installed (None: not importable)
        import torch_scatter

        info["torch_scatter"] = torch_scatter.__version__
    except Exception:
        info["torch_scatter"] = None
    return info


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn: Callable[[], object], repeats: int, device: torch.device) -> list[float]:
    """Wall milliseconds of ``repeats`` calls after one warm-up call."""
    fn()
    _sync(device)
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def copy_bandwidth(device: torch.device, mib: int = 512, repeats: int = 5) -> dict:
    """Bytes per second of ``dst.copy_(src)`` on a large float32 tensor (read + write)."""
    n = mib * (1 << 20) // 4
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), repeats, device)
    med = statistics.median(ms)
    return {"tensor_mib": mib, "ms_median": med, "bytes_per_s": 2 * n * 4 / (med / 1e3)}


def power_law_graph(num_nodes: int, num_edges: int, seed: int, exponent: float = 0.8) -> Graph:
    """A Chung-Lu style random directed graph: endpoints drawn independently with
    probability proportional to ``(rank + 1) ** -exponent``, self-loops dropped,
    duplicates kept; vertex ids randomly permuted (random order)."""
    g = torch.Generator().manual_seed(seed)
    weights = (torch.arange(num_nodes, dtype=torch.float64) + 1) ** -exponent
    # Draw a little more than needed so that dropping self-loops leaves num_edges.
    draw = int(num_edges * 1.02) + 16
    src = torch.multinomial(weights, draw, replacement=True, generator=g)
    dst = torch.multinomial(weights, draw, replacement=True, generator=g)
    keep = src != dst
    src, dst = src[keep][:num_edges], dst[keep][:num_edges]
    perm = torch.randperm(num_nodes, generator=g)
    edge_index = torch.stack([perm[src], perm[dst]])
    return Graph.from_edge_index(
        edge_index, torch.zeros(num_nodes, 1), torch.zeros(num_nodes, dtype=torch.int64),
        num_classes=1, name=f"powerlaw-{num_nodes}-{num_edges}",
    )


def make_graph(num_nodes: int, num_edges: int, seed: int, kind: str = "auto") -> tuple[Graph, str]:
    """The synthetic dataset of gnnpipe.data (``kind`` "synthetic", or "auto" when it
    is registered), else :func:`power_law_graph`.

    The synthetic generator takes a mean degree, drops repeated pairs and stores each
    pair in both directions, so its edge count is slightly below ``num_edges``.
    """
    if kind in ("auto", "synthetic"):
        try:
            from gnnpipe.data import list_datasets, load_dataset

            if "synthetic" in list_datasets() or kind == "synthetic":
                graph = load_dataset(
                    "synthetic", **{**SYSTEMS_SYNTHETIC, "num_nodes": num_nodes, "avg_degree": num_edges / num_nodes,
                                    "num_features": 1, "seed": seed})
                return graph, "gnnpipe.data synthetic (degree-corrected SBM, symmetric, ids in random order)"
        except ImportError:
            if kind == "synthetic":
                raise
    return power_law_graph(num_nodes, num_edges, seed), "bench power_law_graph (Chung-Lu, exponent 0.8)"


def bytes_model(num_nodes: int, nnz: int, d: int, elem: int, reduce: str, backward: bool) -> int:
    """Bytes moved by one aggregation under the byte model of the module docstring."""
    csr = (num_nodes + 1) * 8 + nnz * 8 + nnz * elem
    forward = csr + nnz * d * elem + num_nodes * d * elem
    if not backward:
        return forward
    total = 2 * forward
    if reduce == "weighted":
        total += nnz * (2 * d + 1) * elem
    return total


def bench_one(ops: ChunkOps, reduce: str, d: int, repeats: int, device: torch.device, seed: int) -> dict:
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(ops.num_local, d, generator=g).to(device=device, dtype=ops.dtype)
    w = torch.rand(ops.num_edges, generator=g).to(device=device, dtype=ops.dtype) if reduce == "weighted" else None
    grad_y = torch.randn(ops.num_own, d, generator=g).to(device=device, dtype=ops.dtype)

    def forward() -> None:
        with torch.no_grad():
            ops.aggregate(x, reduce, edge_weight=w)

    x_req = x.clone().requires_grad_(True)
    w_req = w.clone().requires_grad_(True) if w is not None else None

    def forward_backward() -> None:
        x_req.grad = None
        if w_req is not None:
            w_req.grad = None
        ops.aggregate(x_req, reduce, edge_weight=w_req).backward(grad_y)

    elem = torch.empty(0, dtype=ops.dtype).element_size()
    out = {}
    for name, fn, backward in (("forward", forward, False), ("forward_backward", forward_backward, True)):
        ms = time_ms(fn, repeats, device)
        med = statistics.median(ms)
        nbytes = bytes_model(ops.num_own, ops.num_edges, d, elem, reduce, backward)
        out[name] = {"ms_median": med, "ms_all": ms, "bytes_model": nbytes, "bytes_per_s": nbytes / (med / 1e3)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--edges", type=int, default=2_000_000)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--reduces", nargs="+", default=list(REDUCES), choices=list(REDUCES))
    parser.add_argument("--backends", nargs="+", default=None, help="default: every available backend")
    parser.add_argument("--metis-parts", type=int, default=64, help="parts of the METIS order")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--graph", choices=["auto", "synthetic", "powerlaw"], default="auto")
    parser.add_argument(
        "--reference-max-nodes", type=int, default=0,
        help="time the reference backend's max (a Python loop per row) only up to this many vertices",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    device = torch.empty(0, device=args.device).device
    backends = args.backends or list(available_backends())
    t0 = time.perf_counter()
    graph, source = make_graph(args.nodes, args.edges, args.seed, args.graph)
    t_graph = time.perf_counter() - t0
    t0 = time.perf_counter()
    partition = metis_partition(graph, args.metis_parts, seed=args.seed)
    metis_graph = reorder(graph, partition)
    t_metis = time.perf_counter() - t0
    print(f"graph {graph.num_nodes} vertices, {graph.num_edges} edges ({source}, {t_graph:.1f} s); "
          f"METIS {args.metis_parts} parts + reorder {t_metis:.1f} s", flush=True)

    record: dict = {
        "benchmark": "kernels",
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(device),
        "copy_bandwidth": copy_bandwidth(device),
        "graph": {"source": source, "num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
                  "max_in_degree": int(graph.in_degree.max()), "seed": args.seed},
        "orders": {"random": "vertex ids randomly permuted",
                   "metis": f"metis_partition({args.metis_parts} parts) + reorder"},
        "byte_model": "forward: (N+1)*8 + nnz*8 + nnz*elem + nnz*d*elem + N*d*elem; "
                      "forward_backward: 2x forward (+ nnz*(2d+1)*elem for weighted)",
        "repeats": args.repeats,
        "results": [],
    }
    copy_bps = record["copy_bandwidth"]["bytes_per_s"]
    print(f"copy bandwidth {copy_bps / 1e9:.2f} GB/s", flush=True)
    for order, g in (("random", graph), ("metis", metis_graph)):
        plan = whole_graph_plan(g)
        for backend in backends:
            t0 = time.perf_counter()
            ops = ChunkOps.build(plan, device=device, dtype=torch.float32, backend=backend)
            _sync(device)
            t_build = time.perf_counter() - t0
            for d in args.hidden:
                for reduce in args.reduces:
                    if backend == "reference" and reduce == "max" and g.num_nodes > args.reference_max_nodes:
                        continue  # a Python loop per row: minutes at this size, and not a kernel
                    res = bench_one(ops, reduce, d, args.repeats, device, args.seed)
                    row = {"order": order, "backend": backend, "hidden": d, "reduce": reduce,
                           "build_s": t_build, **res}
                    for key in ("forward", "forward_backward"):
                        row[key]["fraction_of_copy_bw"] = row[key]["bytes_per_s"] / copy_bps
                    record["results"].append(row)
                    print(f"{order:6s} {backend:9s} d={d:<4d} {reduce:8s} fwd {res['forward']['ms_median']:9.1f} ms "
                          f"({res['forward']['bytes_per_s'] / 1e9:5.2f} GB/s)  fwd+bwd "
                          f"{res['forward_backward']['ms_median']:9.1f} ms", flush=True)
            del ops
    # Other jobs may share the machine: the load before and after qualifies the times.
    record["load_average_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
