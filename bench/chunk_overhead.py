"""What a pipeline stage spends per layer on its chunks' row copies, against the
aggregation and the matmul it must do anyway (issue 14: profile before choosing a fix).

Per layer and epoch a stage runs, for each of its C chunks (as ``engine/stage.py`` does):
forward, the gather ``B_l[local_ids]`` of the chunk's own + halo rows, the chunk's
aggregation (``ChunkOps.aggregate``) and its dense matmul; backward, the aggregation's
backward, the mask that drops the gradient of stale halo rows (an in-place multiply by a
0/1 factor per row; ``mask_stale_where`` times the ``torch.where`` the stage used before,
outside the share) and the scatter of the rest into ``G_l`` (``index_add_``). A layer
also applies dropout to its whole input, own and halo rows: ``dropout_chunks`` times that
(forward and backward) over the C chunks' local rows, each drawing its own mask (the
stage until the masks change), ``dropout_shared`` one mask drawn over the N rows and
applied to each chunk's rows of it (:mod:`gnnpipe.models.masks`, the stage now), and
``dropout_once`` over the N rows once, as single mode does (all outside the share);
``dropout_chunks_unscaled`` the first as the layers now call it, the mask alone (its
``1 / (1 - p)`` folded into the layer's weights: one multiply each way, not two);
``gather_dropout_{separate,in_place}_{chunk,row}_masks`` the stage's gather of each
chunk's rows and the dropout on them, forward and backward (a backward of ones), with the
mask applied as a second tensor (by the layer, as the stage did until commit cf4d4b8) or
in place in the gather (as it does since), with chunk masks or row masks;
``draw_chunks_1bit`` / ``draw_chunks_8bit`` / ``draw_chunks_16bit`` the mask draw alone
over the chunks' local rows at p = 0.5 with 1-bit lanes (what dropout uses for that p),
8-bit and 16-bit ones (what it uses for p exact on 8 bits, and for any other p). On a dense graph a chunk's halo is
most of N, so the copies move several times N rows per layer. ``whole`` times what single
mode does per layer instead, over the N rows at once (one chunk's operator over the whole
graph): the aggregation forward and backward, the matmul, the dropout forward and backward;
``excess_over_whole`` is, per kind of work, the chunks' sum minus that (computed): where a
stage's layer spends more than its share of a single-mode layer. This times each of these
kernels alone, one thread, summed over the C chunks of a METIS partition, median of
``--repeats``; the ``copies`` share is (gather + mask + scatter) over all six.

    python -m bench.chunk_overhead --out bench/results/chunk_overhead.json
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import torch

from gnnpipe.plan.timing import median_time_s

from .runner import load_average, write_measurement


def measure(graph: Any, num_chunks: int, hidden: int, repeats: int) -> dict[str, Any]:
    """Seconds per layer of each kernel, summed over the chunks (measured).

    Shapes: B, G [N, hidden]; per chunk h_local [n_local, hidden], out [n_own, hidden]."""
    from gnnpipe.engine.stage_autograd import gather_rows
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.models.layers import dropout
    from gnnpipe.models.masks import EpochMasks, MaskRows, draw_keep
    from gnnpipe.partition import chunk_graph

    plans = chunk_graph(graph, num_chunks).plans
    n = graph.num_nodes
    torch.manual_seed(0)
    B, G, W = torch.randn(n, hidden), torch.zeros(n, hidden), torch.randn(hidden, hidden)
    ops = [ChunkOps.build(p) for p in plans]
    local_ids = [torch.as_tensor(p.local_global_nid) for p in plans]
    halo_ids = [torch.as_tensor(p.halo_global_nid) for p in plans]
    own = [p.row_end - p.row_start for p in plans]
    # Half of the halo rows stale, as under a random order on average.
    fresh = [(torch.rand(len(h)) < 0.5).unsqueeze(1) for h in halo_ids]
    factor = [f.to(torch.float32) for f in fresh]
    h_local = [B.index_select(0, ids).requires_grad_() for ids in local_ids]
    outs = [o.aggregate(h, "gcn") for o, h in zip(ops, h_local)]
    grads = [torch.randn_like(y) for y in outs]
    zero = torch.zeros(())

    def agg_backward() -> None:
        for y, h, g in zip(outs, h_local, grads):
            torch.autograd.grad(y, h, g, retain_graph=True)

    halo_grads = [torch.randn(len(h), hidden) for h in halo_ids]
    seconds = {
        "gather": median_time_s(lambda: [B.index_select(0, ids) for ids in local_ids], repeats),
        "aggregate_forward": median_time_s(lambda: [o.aggregate(h.detach(), "gcn") for o, h in zip(ops, h_local)],
                                       repeats),
        "matmul_forward": median_time_s(lambda: [B[:m] @ W for m in own], repeats),
        "aggregate_backward": median_time_s(agg_backward, repeats),
        "mask_stale": median_time_s(lambda: [g.mul_(f) for f, g in zip(factor, halo_grads)], repeats),
        "scatter": median_time_s(lambda: [G.index_add_(0, ids, g) for ids, g in zip(halo_ids, halo_grads)], repeats),
    }
    where_s = median_time_s(lambda: [torch.where(f, g, zero) for f, g in zip(fresh, halo_grads)], repeats)

    def dropout_fb(rows: list[torch.Tensor], scaled: bool = True) -> None:
        for h in rows:
            y = dropout(h, 0.5, True, scaled=scaled)
            torch.autograd.grad(y, h, torch.ones_like(y))

    def dropout_shared_fb() -> None:
        keep = EpochMasks(0, 1, "cpu").keep(1, n, hidden, 0.5)  # drawn once per layer
        for h, ids in zip(h_local, local_ids):
            y = dropout(h, 0.5, True, keep.index_select(0, ids))
            torch.autograd.grad(y, h, torch.ones_like(y))

    def gather_dropout_fb(in_place: bool, shared: bool) -> None:
        """The stage's gather of each chunk's rows and the layer's input dropout on them,
        forward and backward: applied by the layer as a second tensor, or in place in
        the gather (``gather_rows(..., drop=)``); chunk masks drawn per call, or one
        mask over the N rows (``shared``: row masks)."""
        keep = EpochMasks(0, 1, "cpu").keep(1, n, hidden, 0.5) if shared else None
        for ids in local_ids:
            rows = MaskRows(keep, ids) if shared else None
            if in_place:
                y, sink = gather_rows(B, ids, drop=(0.5, rows))
            else:
                h, sink = gather_rows(B, ids)
                y = dropout(h, 0.5, True, rows, scaled=False)
            y.backward(torch.ones_like(y))

    gather_dropout = {f"gather_dropout_{how}_{masks}_s": median_time_s(
        lambda how=how, masks=masks: gather_dropout_fb(how == "in_place", masks == "row_masks"), repeats)
        for masks in ("chunk_masks", "row_masks") for how in ("separate", "in_place")}
    dropout_chunks = median_time_s(lambda: dropout_fb(h_local), repeats)
    # As the layers call it: the mask alone, 1 / (1 - p) folded into their weights.
    dropout_chunks_unscaled = median_time_s(lambda: dropout_fb(h_local, scaled=False), repeats)
    dropout_shared = median_time_s(dropout_shared_fb, repeats)
    dropout_once = median_time_s(lambda: dropout_fb([B.clone().requires_grad_()]), repeats)
    # The mask draw alone over the chunks' local rows at p = 0.5, with the 1-bit lanes
    # dropout uses for that p and with the 8- and 16-bit lanes of other p.
    draw = {f"draw_chunks_{b}bit_s": median_time_s(
        lambda b=b: [draw_keep((len(ids), hidden), 0.5, bits=b) for ids in local_ids], repeats) for b in (1, 8, 16)}
    copies = seconds["gather"] + seconds["mask_stale"] + seconds["scatter"]
    # Single mode's layer over the N rows (the same kernels, one operator for the graph).
    (whole_plan,) = chunk_graph(graph, 1).plans
    whole_ops = ChunkOps.build(whole_plan)
    x_whole = B.clone().requires_grad_()  # made outside the timings (dropout_once times its clone too)
    y_whole = whole_ops.aggregate(x_whole, "gcn")
    g_whole = torch.randn_like(y_whole)
    whole = {
        "aggregate_forward": median_time_s(lambda: whole_ops.aggregate(B, "gcn"), repeats),
        "aggregate_backward": median_time_s(
            lambda: torch.autograd.grad(y_whole, x_whole, g_whole, retain_graph=True), repeats),
        "matmul_forward": median_time_s(lambda: B @ W, repeats),
        "dropout": median_time_s(lambda: dropout_fb([x_whole], scaled=False), repeats),
    }
    chunked = {"aggregate_forward": seconds["aggregate_forward"], "aggregate_backward": seconds["aggregate_backward"],
               "matmul_forward": seconds["matmul_forward"], "dropout": dropout_chunks_unscaled,
               "copies": copies}
    excess = {k: v - whole.get(k, 0.0) for k, v in chunked.items()}
    return {**gather_dropout, "mask_stale_where_s": where_s, "dropout_chunks_s": dropout_chunks,
            "dropout_chunks_unscaled_s": dropout_chunks_unscaled, "dropout_shared_s": dropout_shared,
            "dropout_once_s": dropout_once, **draw, "num_nodes": n, "num_edges": graph.num_edges, "num_chunks": num_chunks,
            "local_rows_over_n": sum(len(i) for i in local_ids) / n,
            "halo_rows_over_n": sum(len(h) for h in halo_ids) / n,
            "seconds_per_layer": seconds, "copies_share": copies / sum(seconds.values()),
            "whole_seconds_per_layer": whole, "excess_over_whole_s": excess,
            "excess_over_whole_total_s": sum(excess.values())}


def main(argv: list[str] | None = None) -> int:
    import gnnpipe

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results/chunk_overhead.json")
    ap.add_argument("--datasets", nargs="+", default=["blogcatalog", "amazon_photo"])
    ap.add_argument("--data-root", default=os.environ.get("GNNPIPE_DATASETS", "../shared/datasets"))
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    load_before, results = load_average(), []
    for name in args.datasets:
        graph = gnnpipe.load_dataset(name, root=args.data_root).remove_self_loops()
        results.append({"dataset": name, **measure(graph, args.chunks, args.hidden, args.repeats)})
        s = results[-1]["seconds_per_layer"]
        print(f"{name}: " + ", ".join(f"{k} {1e3 * v:.1f} ms" for k, v in s.items())
              + f"; copies {100 * results[-1]['copies_share']:.0f} %; mask with torch.where "
              f"{1e3 * results[-1]['mask_stale_where_s']:.1f} ms; dropout over the chunks' local rows "
              f"{1e3 * results[-1]['dropout_chunks_s']:.1f} ms, one mask applied to them "
              f"{1e3 * results[-1]['dropout_shared_s']:.1f} ms, over the N rows once "
              f"{1e3 * results[-1]['dropout_once_s']:.1f} ms; mask draw over the chunks' local rows, 1-bit "
              f"lanes {1e3 * results[-1]['draw_chunks_1bit_s']:.1f} ms, 8-bit "
              f"lanes {1e3 * results[-1]['draw_chunks_8bit_s']:.1f} ms, 16-bit "
              f"{1e3 * results[-1]['draw_chunks_16bit_s']:.1f} ms; gather + dropout forward and backward, "
              "separate / in place: chunk masks "
              f"{1e3 * results[-1]['gather_dropout_separate_chunk_masks_s']:.1f} / "
              f"{1e3 * results[-1]['gather_dropout_in_place_chunk_masks_s']:.1f} ms, row masks "
              f"{1e3 * results[-1]['gather_dropout_separate_row_masks_s']:.1f} / "
              f"{1e3 * results[-1]['gather_dropout_in_place_row_masks_s']:.1f} ms; over single mode's layer: "
              + ", ".join(f"{k} {1e3 * v:+.1f} ms" for k, v in results[-1]["excess_over_whole_s"].items()),
              flush=True)
    write_measurement(
        args,
        "seconds per layer of a pipeline stage's per-chunk kernels, summed over the C chunks, one thread, "
        "median of repeats (measured); copies_share computed", load_before, results=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
