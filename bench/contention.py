"""How much two workers computing at once slow each other on this machine, for a
pipeline stage's real per-layer work, against the planner's calibrated figure.

The planner multiplies every chunked mode's compute by ``contention``, which
:func:`gnnpipe.plan.calibrate.calibrate` measures on a synthetic graph, alone and on
both processes at once (with a small matmul + row-gather kernel when this benchmark was
written; since, with this benchmark's kernel). Here the kernel
(:func:`gnnpipe.plan.twins.stage_layer_kernel`) is one stage layer over
the 8 chunks of a METIS chunking of a real graph, as the layers run it (the gather of
each chunk's local rows, dropout, the chunk's aggregation, the matmul, and their
backward), one thread per process: the fastest of ``--rounds`` rounds of ``--reps``
layers, alone (the other process idle) and with both processes running it (measured;
the ratio computed).

    python -m bench.contention --out bench/results/contention.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import torch

from .runner import load_average, write_measurement


def _layer(name: str, root: str, chunks: int) -> Any:
    """The calibration's stage layer (:func:`gnnpipe.plan.twins.stage_layer_kernel`)
    over the graph's METIS chunking."""
    import gnnpipe
    from gnnpipe.partition import chunk_graph
    from gnnpipe.plan.twins import stage_layer_kernel

    g = gnnpipe.load_dataset(name, root=root).remove_self_loops()
    return stage_layer_kernel(chunk_graph(g, chunks).plans, g.num_nodes)


def _run(rank: int, name: str, root: str, chunks: int, both: bool, reps: int, q: Any) -> None:  # pragma: no cover
    torch.set_num_threads(1)
    layer = _layer(name, root, chunks)
    for _ in range(3):
        layer()
    if rank == 1 and not both:
        return
    t0 = time.perf_counter()
    for _ in range(reps):
        layer()
    q.put((time.perf_counter() - t0) / reps)


def measure(name: str, root: str, chunks: int, reps: int, rounds: int) -> dict[str, Any]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    seconds: dict[str, list[float]] = {"alone": [], "both": []}
    for _ in range(rounds):
        for key, both in (("alone", False), ("both", True)):
            q = ctx.Queue()
            procs = [ctx.Process(target=_run, args=(r, name, root, chunks, both, reps, q)) for r in (0, 1)]
            for p in procs:
                p.start()
            for p in procs:
                p.join()
            got = [q.get() for _ in range(2 if both else 1)]
            seconds[key].append(sum(got) / len(got))
    alone, both_s = min(seconds["alone"]), min(seconds["both"])
    return {"dataset": name, "chunks": chunks, "layer_s_alone": alone, "layer_s_both": both_s,
            "contention": both_s / alone, "rounds_s": seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results/contention.json")
    ap.add_argument("--datasets", nargs="+", default=["amazon_photo", "blogcatalog"])
    ap.add_argument("--data-root", default=os.environ.get("GNNPIPE_DATASETS", "../shared/datasets"))
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    load_before = load_average()
    results = []
    for name in args.datasets:
        results.append(measure(name, args.data_root, args.chunks, args.reps, args.rounds))
        r = results[-1]
        print(f"{name}: one stage layer over {args.chunks} chunks {1e3 * r['layer_s_alone']:.2f} ms alone, "
              f"{1e3 * r['layer_s_both']:.2f} ms with both processes at once: contention {r['contention']:.3f}",
              flush=True)
    write_measurement(args, "seconds of one pipeline stage layer (forward + backward over the chunks), one thread, "
                      "alone and with two processes at once (measured, fastest round); contention = both / alone "
                      "(computed)", load_before, results=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
