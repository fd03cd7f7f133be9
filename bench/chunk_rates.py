"""Which size sets a kernel's rate: per-value rates of a chunk's kernels on a real
chunking, beside the same kernels on whole synthetic graphs of the chunk's own rows
and of its local (own + halo) rows.

The planner prices each kernel at a rate that depends on the rows it works on
(:meth:`gnnpipe.plan.inputs.HardwareProfile.size_factor`); a chunk has two sizes, the
rows it computes (own) and the rows it reads (own + halo, gathered from the stage's
buffer). For each of the first ``--measure`` chunks of a METIS chunking into each of
``--chunks`` (1: the whole graph), one thread, forward + backward, the fastest of
``--repeats`` after a warm-up: the gather of the chunk's local rows with the layer's
input dropout applied in place (as a stage layer does it, per (local row x width)),
the aggregation over the chunk's in-edges (per (edge x width)) and the matmul of its
own rows (per FLOP). The same three kernels on whole synthetic graphs of the chunk's
own and of its local rows (the calibration's graphs, ``gnnpipe.plan.calibrate._plan``,
of the same mean degree) give the rates the two choices would predict. All measured;
the ratios are computed.

    python -m bench.chunk_rates --data-option num_nodes=200000 --data-option avg_degree=10.0 \\
        --data-option homophily=0.6 --data-option feature_signal=0.22 --data-option seed=0
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import torch

from .runner import load_average, write_measurement


def _rates(buf: torch.Tensor, ops: Any, ids: torch.Tensor, h: int, repeats: int) -> dict[str, float]:
    """Per-value seconds of the gather + dropout of ``ids`` from ``buf``, the
    aggregation of ``ops`` and the matmul of its own rows."""
    from gnnpipe.engine.stage_autograd import gather_rows
    from gnnpipe.plan.timing import min_time_s

    plan = ops.plan
    n_local, n_own, edges = ids.numel(), plan.num_own, int(plan.indices.numel())
    x = torch.randn(n_local, h, requires_grad=True)
    g = torch.randn(n_own, h)
    w = torch.randn(h, h, requires_grad=True)
    a = torch.randn(n_own, h, requires_grad=True)
    g_local = torch.randn(n_local, h)

    def gather_drop() -> None:
        rows, _sink = gather_rows(buf, ids, drop=(0.5, None))
        rows.backward(g_local)

    return {
        "gather_dropout_s_per_value": min_time_s(gather_drop, repeats) / (n_local * h),
        "aggregate_s_per_edge_row": min_time_s(lambda: ops.aggregate(x, "gcn").backward(g), repeats) / (edges * h),
        "matmul_s_per_flop": min_time_s(lambda: (a @ w).backward(g), repeats) / (2.0 * n_own * h * h),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="synthetic")
    ap.add_argument("--data-root", default=os.environ.get("GNNPIPE_DATASETS", "../shared/datasets"))
    ap.add_argument("--data-option", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--chunks", type=int, nargs="+", default=[1, 2, 8])
    ap.add_argument("--measure", type=int, default=2, help="chunks measured per chunking")
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="bench/results/chunk_rates.json")
    args = ap.parse_args(argv)
    if any(c < 1 for c in args.chunks) or args.measure < 1 or args.repeats < 1:
        ap.error(f"--chunks, --measure, --repeats: expected integers >= 1, found {args.chunks}, {args.measure}, "
                 f"{args.repeats}")
    from gnnpipe.data import load_dataset
    from gnnpipe.data.options import parse_option_words
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.partition import chunk_graph, whole_graph_plan
    from gnnpipe.plan.calibrate import _plan

    load_before = load_average()
    torch.set_num_threads(1)
    graph = load_dataset(args.dataset, root=args.data_root, **parse_option_words(args.data_option))
    graph = graph.remove_self_loops()
    degree = graph.num_edges / graph.num_nodes
    buf = torch.randn(graph.num_nodes, args.hidden)
    whole: dict[int, dict[str, float]] = {}

    def whole_rates(rows: int) -> dict[str, float]:
        if rows not in whole:
            ops = ChunkOps.build(_plan(rows, degree))
            whole[rows] = _rates(torch.randn(rows, args.hidden), ops, torch.arange(rows), args.hidden, args.repeats)
        return whole[rows]

    out = []
    for c in args.chunks:
        plans = [whole_graph_plan(graph)] if c == 1 else chunk_graph(graph, c, method="metis", seed=0).plans
        for k, plan in enumerate(plans[:args.measure]):
            ids = torch.as_tensor(plan.local_global_nid)
            got = _rates(buf, ChunkOps.build(plan), ids, args.hidden, args.repeats)
            at_own, at_local = whole_rates(plan.num_own), whole_rates(ids.numel())
            row = {"chunks": c, "chunk": k, "own_rows": plan.num_own, "local_rows": int(ids.numel()),
                   "edges": int(plan.indices.numel()), "measured": got, "whole_graph_of_own_rows": at_own,
                   "whole_graph_of_local_rows": at_local,
                   "measured_over_own_rate": {key: v / at_own[key] for key, v in got.items()},
                   "measured_over_local_rate": {key: v / at_local[key] for key, v in got.items()}}
            out.append(row)
            print(f"C={c} chunk {k}: own {plan.num_own} local {ids.numel()}: measured / rate at own rows "
                  + ", ".join(f"{key.split('_s_')[0]} {v:.2f}" for key, v in row["measured_over_own_rate"].items())
                  + "; at local rows "
                  + ", ".join(f"{key.split('_s_')[0]} {v:.2f}" for key, v in row["measured_over_local_rate"].items()),
                  flush=True)
    write_measurement(args, "per-value rates of a chunk's kernels (measured) against the same kernels on whole "
                      "synthetic graphs of its own and of its local rows (measured); ratios computed",
                      load_before, num_nodes=graph.num_nodes, num_edges=graph.num_edges, rows=out)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
