"""What one blocking exchange costs between two busy workers (the hybrid mode's
per-layer halo exchange), against the same exchange between idle ones.

Hybrid mode exchanges halo rows between its ways at every layer of every step, and
each exchange is a wait on the other way (:mod:`gnnpipe.engine.way_exchange`). The
planner prices one at the link's latency + bytes / bandwidth, calibrated by an idle
ping-pong. Here two gloo processes (one thread each, as the launcher gives them)
repeat: ``compute_ms`` of dense matmul, then one batched send + receive of ``rows`` x
100 float32 with each other; the time from posting the exchange to its completion is
recorded per repetition (``wait_ms``), and of it the posting call alone
(``post_ms``: ``batch_isend_irecv`` returning, before any wait; on a machine whose cores
the workers fill, posting meets the scheduler too); their p10 / p50 / p90 / mean go into
the JSON for each (compute, rows) pair (measured; rank 0's view).

    python -m bench.exchange_wait --out bench/results/exchange_wait.json
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

import torch

from .runner import load_average, write_measurement


def _summary_ms(seconds: list[float]) -> dict[str, float]:
    """p10 / p50 / p90 / mean of ``seconds``, in milliseconds."""
    v = sorted(seconds)
    return {"p10": 1e3 * v[len(v) // 10], "p50": 1e3 * v[len(v) // 2], "p90": 1e3 * v[9 * len(v) // 10],
            "mean": 1e3 * sum(v) / len(v)}


def _worker(rank: int, store: str, grid: list[tuple[float, int]], reps: int, q: Any) -> None:  # pragma: no cover
    import torch.distributed as dist

    torch.set_num_threads(1)
    # A file store, as the calibration's twin processes use: no port to race for.
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    peer = 1 - rank
    a = torch.randn(256, 256)
    # Matmuls per millisecond on this process, measured once.
    t0 = time.perf_counter()
    for _ in range(200):
        a @ a
    per_ms = 200 / (1e3 * (time.perf_counter() - t0))
    out = []
    for compute_ms, rows in grid:
        send, recv = torch.randn(max(rows, 1), 100), torch.empty(max(rows, 1), 100)
        n_mm = int(round(compute_ms * per_ms))
        waits, posts = [], []
        dist.barrier()
        for i in range(reps + 10):
            for _ in range(n_mm):
                a @ a
            t1 = time.perf_counter()
            works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)])
            t2 = time.perf_counter()
            for w in works:
                w.wait()
            if i >= 10:
                waits.append(time.perf_counter() - t1)
                posts.append(t2 - t1)
        out.append({"compute_ms": compute_ms, "rows": rows, "bytes": rows * 400,
                    "wait_ms": _summary_ms(waits), "post_ms": _summary_ms(posts)})
    if rank == 0:
        q.put(out)
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results/exchange_wait.json")
    ap.add_argument("--compute-ms", type=float, nargs="+", default=[0.0, 1.0, 4.0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10, 190, 600, 2400],
                    help="rows of 100 float32 per message (600: BlogCatalog's hybrid C = 8 exchange)")
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args(argv)
    grid = [(c, r) for c in args.compute_ms for r in args.rows]
    load_before = load_average()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_worker, args=(r, os.path.join(tmp, "store"), grid, args.reps, q))
                 for r in (0, 1)]
        for p in procs:
            p.start()
        results = q.get(timeout=1800)
        for p in procs:
            p.join(timeout=60)
    for r in results:
        w, p = r["wait_ms"], r["post_ms"]
        print(f"compute {r['compute_ms']:.1f} ms, {r['bytes'] / 1e3:.0f} KB: wait p10 {w['p10']:.2f} "
              f"p50 {w['p50']:.2f} p90 {w['p90']:.2f} mean {w['mean']:.2f} ms; of it posting p50 {p['p50']:.2f} "
              f"p90 {p['p90']:.2f} mean {p['mean']:.2f} ms", flush=True)
    write_measurement(args, "milliseconds from posting one blocking send + receive between two gloo processes to "
                      "its completion (wait_ms), and of it the posting call alone (post_ms: batch_isend_irecv "
                      "returning), after compute_ms of matmul on each, per (compute, message size); "
                      "percentiles over reps (measured, rank 0)", load_before, results=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
