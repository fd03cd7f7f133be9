"""Sparse (CSR) vs dense bag-of-words features: the input projection and one epoch.

On Coauthor CS (18,333 x 6,805, 0.88 % non-zero) with one intra-op thread (default),
it measures

* ``encode`` (GCNII's input projection, F -> 100: dropout 0.5, linear, ReLU) forward +
  backward, dense features vs sparse features (``SparseFeatures``: dropout on the
  stored values, CSR x dense product with a prebuilt transpose for the weight
  gradient), and for comparison the same sparse product through ``torch.sparse.mm``
  (whose backward builds the transpose on every call); the median of ``--repeats``
  after one warm-up, plus the one-off build of the transposed structure;
* one GCNII-32, hidden-100 training epoch in ``single`` mode through ``gnnpipe.train``
  (the record's ``epoch_time_s``, median over ``--epochs``), dense vs sparse;
* the converted-graph cache entry of the dataset with dense and with sparse features.

The load average is recorded before and after (the machine is shared). Results go
to ``bench/results/sparse_features.json``.

    python bench/sparse_features.py                          # ~2 minutes on 2 cores
    python bench/sparse_features.py --device cuda --threads 0  # on a GPU
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnnpipe.data import load_dataset, write_graph  # noqa: E402
from gnnpipe.data.sparse import SparseFeatures  # noqa: E402
from gnnpipe.kernels.csr import make_csr  # noqa: E402
from gnnpipe.models import build_model, dropout, model_input  # noqa: E402
from gnnpipe.trainer.machine import load_average, machine_info  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "sparse_features.json"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], Any], repeats: int, device: torch.device) -> dict[str, Any]:
    fn()  # warm-up (first-call allocations, the transposed structure)
    times = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "min_s": min(times), "runs_s": times}


def bench_encode(graph_dense: Any, graph_sparse: Any, args: argparse.Namespace, device: torch.device) -> dict:
    torch.manual_seed(0)
    model = build_model({"model": "gcnii", "layers": args.layers, "hidden": args.hidden, "dropout": args.dropout},
                        graph_dense.num_features, graph_dense.num_classes)
    encode = model.encode.to(device)
    encode.train()
    n = graph_dense.num_nodes
    grad = torch.randn(n, args.hidden, device=device)
    xd = model_input(model, graph_dense.features, device=device, dtype=torch.float32)
    xs = model_input(model, graph_sparse.features, device=device, dtype=torch.float32)
    assert isinstance(xs, SparseFeatures) and not isinstance(xd, SparseFeatures)

    def step(x: Any) -> Callable[[], None]:
        def run() -> None:
            encode.zero_grad(set_to_none=True)
            encode(x).backward(grad)
        return run

    def sparse_mm() -> None:
        # The alternative: torch.sparse.mm, whose backward transposes the CSR per call.
        encode.zero_grad(set_to_none=True)
        w, b = encode.linear.weight, encode.linear.bias
        v = dropout(xs.values, encode.dropout, True)
        h = torch.relu(torch.sparse.mm(make_csr(xs.crow, xs.col, v, tuple(xs.shape)), w.t()) + b)
        h.backward(grad)

    fresh = SparseFeatures(xs.crow, xs.col, xs.values, xs.shape)
    _sync(device)
    t0 = time.perf_counter()
    fresh.transpose_structure()
    _sync(device)
    transpose_s = time.perf_counter() - t0

    # Forward alone (eval-free: training mode, dropout included), then forward + backward.
    def fwd(x: Any) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                encode(x)
        return run

    out = {
        "dense_forward": _timed(fwd(xd), args.repeats, device),
        "sparse_forward": _timed(fwd(xs), args.repeats, device),
        "dense_forward_backward": _timed(step(xd), args.repeats, device),
        "sparse_forward_backward": _timed(step(xs), args.repeats, device),
        "torch_sparse_mm_forward_backward": _timed(sparse_mm, args.repeats, device),
        "sparse_transpose_build_s": transpose_s,
    }
    out["speedup_forward_backward"] = (out["dense_forward_backward"]["median_s"]
                                       / out["sparse_forward_backward"]["median_s"])
    return out


def bench_epoch(graph: Any, args: argparse.Namespace, device: torch.device) -> dict:
    import gnnpipe
    from gnnpipe.config import ModelConfig, ParallelConfig, TrainConfig

    t0 = time.perf_counter()
    rec = gnnpipe.train(
        graph,
        ModelConfig(model="gcnii", layers=args.layers, hidden=args.hidden, dropout=args.dropout),
        TrainConfig(epochs=args.epochs, seed=0, eval_every=args.epochs, log_level="WARNING"),
        ParallelConfig(mode="single", device=device.type),
    )
    wall = time.perf_counter() - t0
    times = [e["epoch_time_s"] for e in rec["epochs"]]
    return {"epoch_time_s": times, "median_epoch_s": statistics.median(times), "run_wall_s": wall,
            "losses": [e["loss"] for e in rec["epochs"]],
            "peak_memory": rec.get("peak_memory")}


def cache_sizes(graph_dense: Any, graph_sparse: Any) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = {}
        for name, g in (("dense", graph_dense), ("sparse", graph_sparse)):
            path = Path(tmp) / f"{name}.graph"
            t0 = time.perf_counter()
            write_graph(g, path)
            out[f"{name}_write_s"] = time.perf_counter() - t0
            out[f"{name}_bytes"] = path.stat().st_size
            path.unlink()
        out["ratio"] = out["dense_bytes"] / out["sparse_bytes"]
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="coauthor_cs")
    ap.add_argument("--root", default=os.environ.get("GNNPIPE_DATA_ROOT", "/work/shared/datasets"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: leave as is)")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--skip-epoch", action="store_true", help="only the encode and cache measurements")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    load_before = load_average()

    t0 = time.perf_counter()
    sparse = load_dataset(args.dataset, root=args.root)  # auto: CSR below 10 % non-zero
    load_sparse_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    dense = load_dataset(args.dataset, root=args.root, sparse_features=False)
    load_dense_s = time.perf_counter() - t0
    if not sparse.sparse_features:
        raise SystemExit(f"{args.dataset}: features are {100 * dense.feature_density:.1f} % non-zero, not sparse")
    f = sparse.features
    result: dict[str, Any] = {
        "benchmark": "sparse_features",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine_info(device.type), "torch_threads": torch.get_num_threads(),
                    "mkl": torch.backends.mkl.is_available()},
        "load_average_before": load_before,
        "config": {"dataset": args.dataset, "num_nodes": sparse.num_nodes, "num_features": sparse.num_features,
                   "nnz": f.nnz, "density": f.density, "model": "gcnii", "layers": args.layers,
                   "hidden": args.hidden, "dropout": args.dropout, "repeats": args.repeats,
                   "epochs": args.epochs, "device": str(device), "dtype": "float32"},
        "load_s": {"sparse_auto": load_sparse_s, "dense_forced": load_dense_s},
        "features_bytes": {"dense": dense.features.numel() * 4, "sparse_csr": f.nbytes},
    }
    result["cache_entry"] = cache_sizes(dense, sparse)
    result["encode"] = bench_encode(dense, sparse, args, device)
    result["load_average_after_encode"] = load_average()
    if not args.skip_epoch:
        result["epoch_single_mode"] = {"dense": bench_epoch(dense, args, device),
                                       "sparse": bench_epoch(sparse, args, device)}
        d, s = (result["epoch_single_mode"][k]["median_epoch_s"] for k in ("dense", "sparse"))
        result["epoch_single_mode"]["speedup"] = d / s
    result["load_average_after"] = load_average()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    enc = result["encode"]
    print(f"{args.dataset}: N={sparse.num_nodes} F={sparse.num_features} nnz={f.nnz} ({100 * f.density:.2f} %), "
          f"threads {torch.get_num_threads()}, load {load_before}")
    print(f"encode fwd+bwd: dense {enc['dense_forward_backward']['median_s']:.3f} s, "
          f"sparse {enc['sparse_forward_backward']['median_s']:.3f} s, "
          f"torch.sparse.mm {enc['torch_sparse_mm_forward_backward']['median_s']:.3f} s, "
          f"transpose build {enc['sparse_transpose_build_s']:.3f} s")
    if "epoch_single_mode" in result:
        e = result["epoch_single_mode"]
        print(f"GCNII-{args.layers} epoch: dense {e['dense']['median_epoch_s']:.2f} s, "
              f"sparse {e['sparse']['median_epoch_s']:.2f} s (x{e['speedup']:.2f})")
    c = result["cache_entry"]
    print(f"cache entry: dense {c['dense_bytes'] / 1e6:.1f} MB, sparse {c['sparse_bytes'] / 1e6:.2f} MB")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
