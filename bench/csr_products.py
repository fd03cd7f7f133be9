"""The CSR products of one GCN layer, by index type and by call, in one process.

A layer's aggregation is ``A x`` forward and ``A^T g`` backward
(:mod:`gnnpipe.kernels.csr`). On the CPU torch runs both through MKL, which takes
32-bit indices: given int64 ones (what the structures held before), torch converts
the row pointers and column indices to int32 at every product. This times, on a real
graph's ``gcn`` operator (its whole-graph plan, as single mode multiplies it, and its
C METIS chunks, as a pipeline stage does), the forward and the transposed product of
a layer with:

* ``int64``: the structure's indices int64, ``A @ x``;
* ``int32``: the same indices as int32, ``A @ x``;
* ``int32_addmm``: int32, :func:`gnnpipe.kernels.csr.spmm` (``addmm`` into an output
  not zeroed first: ``A @ x`` zero-fills its output first);

and, beside the chunks as they are (``chunks``), the chunks as a pipeline stage
multiplies them in training (``chunks_held``): each chunk's transpose without the
entries of its halo rows owned by chunks later in a random order (seeded), the stale
reads it holds constant (:meth:`gnnpipe.kernels.ChunkOps.with_constant_rows`);
``kept_share`` is the share of transposed entries left;

alternating every kind and variant ``--rounds`` times (the median of each one's
per-round times, and each round's time over the same round's ``chunks``), with the
products' results checked bit-equal across the variants. One thread
(``--threads``), as a worker has. Writes a JSON with machine, load and config::

    python -m bench.csr_products --out bench/results/csr_products.json
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any, Callable

import torch

from .runner import default_data_root, load_average, write_measurement

#: Each variant's index type and product (``spmm``: the kernels' own, into an output
#: not zeroed first).
VARIANTS = ("int64", "int32", "int32_addmm")


def _variant(name: str) -> tuple[torch.dtype, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    from gnnpipe.kernels.csr import spmm

    return {"int64": (torch.int64, torch.matmul), "int32": (torch.int32, torch.matmul),
            "int32_addmm": (torch.int32, spmm)}[name]


def _operators(dataset: str, data_root: str, chunks: int, options: dict[str, Any],
               seed: int = 0) -> dict[str, list[tuple]]:
    """``{"whole": [(A, A^T)], "chunks": [(A, A^T) per chunk], "chunks_held": [(A,
    A^T without the stale columns) per chunk]}``: the gcn operators with the indices
    the installed gnnpipe builds them with (module docstring)."""
    from gnnpipe.data import load_dataset
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.kernels.csr import operator_without_transposed_rows
    from gnnpipe.partition import chunk_graph, whole_graph_plan

    graph = load_dataset(dataset, root=data_root, **options)
    chunked = chunk_graph(graph, chunks, cache=False)
    order = torch.randperm(len(chunked.plans), generator=torch.Generator().manual_seed(seed))
    step_of = torch.empty_like(order)
    step_of[order] = torch.arange(order.numel())

    def gcn(plan: Any) -> Any:
        return ChunkOps.build(plan, reduces=["gcn"])._impl._ops["gcn"]

    def held(plan: Any) -> tuple:
        op = gcn(plan)
        stale = step_of[plan.halo_chunk.long()] > step_of[plan.chunk_idx]
        constant = torch.cat([torch.zeros(plan.num_own, dtype=torch.bool), stale])
        return op.forward_csr, operator_without_transposed_rows(op, constant).transpose_csr

    return {"whole": [(op.forward_csr, op.transpose_csr) for op in [gcn(whole_graph_plan(chunked.graph))]],
            "chunks": [(op.forward_csr, op.transpose_csr) for op in map(gcn, chunked.plans)],
            "chunks_held": [held(p) for p in chunked.plans]}


def _with_index(a: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    from gnnpipe.kernels.csr import make_csr

    return make_csr(a.crow_indices().to(dtype), a.col_indices().to(dtype), a.values(), tuple(a.shape))


def measure(ops_by_kind: dict[str, list[tuple]], hidden: int, rounds: int, reps: int) -> dict[str, Any]:
    """Per kind (``whole``, ``chunks``, ...), each variant's median milliseconds for one
    layer's products (forward and transposed, every operator of the kind), and whether
    every variant's results equal the int64 ones bit for bit. Every (kind, variant)
    is timed once per round, so that a change of the machine's speed during the run
    (this machine's moves by up to 2x between minutes) falls on all of them alike;
    ``paired_ratios`` are each round's time of a kind over the same round's ``chunks``."""
    gen = torch.Generator().manual_seed(0)
    prepared = {}
    for kind, ops in ops_by_kind.items():
        inputs = [torch.randn(a.shape[1], hidden, generator=gen) for pair in ops for a in pair]
        mats = {v: [_with_index(a, _variant(v)[0]) for pair in ops for a in pair] for v in VARIANTS}
        ref = [a @ x for a, x in zip(mats["int64"], inputs)]
        equal = {v: all(torch.equal(_variant(v)[1](a, x), r) for a, x, r in zip(mats[v], inputs, ref))
                 for v in VARIANTS}
        prepared[kind] = (inputs, mats, equal)
    times: dict[str, dict[str, list[float]]] = {k: {v: [] for v in VARIANTS} for k in ops_by_kind}
    for _ in range(rounds):
        for kind, (inputs, mats, _) in prepared.items():
            for v in VARIANTS:
                prod = _variant(v)[1]
                for a, x in zip(mats[v], inputs):  # warm
                    prod(a, x)
                t0 = time.perf_counter()
                for _ in range(reps):
                    for a, x in zip(mats[v], inputs):
                        prod(a, x)
                times[kind][v].append((time.perf_counter() - t0) / reps * 1e3)
    out = {}
    for kind, ops in ops_by_kind.items():
        forward_nnz = sum(int(pair[0]._nnz()) for pair in ops)
        out[kind] = {"median_ms": {v: statistics.median(t) for v, t in times[kind].items()},
                     "all_ms": times[kind], "bit_equal_to_int64": prepared[kind][2], "nnz": forward_nnz,
                     "operators": len(ops),
                     "kept_share": sum(int(pair[1]._nnz()) for pair in ops) / max(forward_nnz, 1)}
        if "chunks" in times:
            out[kind]["paired_ratios"] = {v: [t / c for t, c in zip(times[kind][v], times["chunks"][v])]
                                          for v in VARIANTS}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results/csr_products.json")
    ap.add_argument("--datasets", nargs="+", default=["blogcatalog", "amazon_photo", "synthetic"])
    ap.add_argument("--data-root", default=default_data_root())
    ap.add_argument("--synthetic-option", action="append", default=[], metavar="KEY=VALUE",
                    help="loader options of the synthetic graph (default: the 200k systems graph)")
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
    from gnnpipe.data.options import parse_option_words

    synthetic = parse_option_words(args.synthetic_option or [
        "num_nodes=200000", "avg_degree=10.0", "homophily=0.6", "feature_signal=0.22", "seed=0"],
        "--synthetic-option")
    before = load_average()
    results = {}
    for name in args.datasets:
        options = synthetic if name == "synthetic" else {}
        ops = _operators(name, args.data_root, args.chunks, options)
        results[name] = measure(ops, args.hidden, args.rounds, args.reps)
        r = results[name]
        print(name, {k: {v: round(ms, 3) for v, ms in r[k]["median_ms"].items()} for k in r}, flush=True)
    write_measurement(args, "milliseconds of one gcn layer's CSR products (forward + transposed) by kind, index "
                      "type and call, every one once per round; medians over rounds, and per-round ratios "
                      "to the chunks (measured)", before, results=results)


if __name__ == "__main__":
    main()
