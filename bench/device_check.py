"""The prepared accelerator check: the CUDA (and, with two GPUs or more, NCCL) path
against the CPU reference, and one mode benchmark, in one short run.

CI has no GPU, so this is what a session with a lent GPU runs, in one call
(``bench/device_check.sh`` installs the project there first). Every check compares
full tensors or per-epoch figures of the device run with the same run on the CPU, in
float64 and without dropout (the device's generators draw other numbers), so the
tolerance is float64 rounding:

* ``kernels``: each reduce of :class:`gnnpipe.kernels.ChunkOps` on every chunk of a
  METIS chunking, forward output and input gradient;
* ``single``: single-mode training of each model kind, per-epoch loss and the final
  test accuracy;
* ``simulated``: the pipeline (S = 2, C = 4, stale halo reads from the last epoch,
  technique 3) and hybrid (W = 2, C = 4) semantics run by the single-process
  simulator (:mod:`gnnpipe.engine.simulator`, the distributed runs' oracle), per-epoch
  loss and every parameter's gradient: the chunked arithmetic on one GPU, where the
  NCCL layouts cannot run;
* ``distributed``: graph mode (P = 2), pipeline (S = 2, C = 1: every read fresh) and
  hybrid (W = 2, C = 2: one chunk per way, graph parallelism's layout) on
  ``--device``, each exact, against single mode on the CPU. On CUDA these need two
  GPUs or more (NCCL refuses two ranks on one device): with fewer the record says it
  was skipped and why;
* ``benchmark`` (not a check): single mode's epoch time on the device and on the CPU
  (all its cores), on the synthetic graph, GCNII, measured.

With ``--device cpu`` every check runs CPU against CPU (gloo for the distributed
ones): a dry run of the script itself, which the tests do.

    python -m bench.device_check --out $OUT/device_check.json
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import torch

from .runner import load_average, write_measurement

MODELS = ("gcnii", "gcn", "sage", "resgcn+")
DISTRIBUTED = {"graph": dict(mode="graph", workers=2), "pipeline": dict(mode="pipeline", workers=2, chunks=1),
               "hybrid": dict(mode="hybrid", workers=2, ways=2, chunks=2)}


def _graph(num_nodes: int, seed: int = 0) -> Any:
    from gnnpipe.data import synthetic_graph

    return synthetic_graph(num_nodes=num_nodes, num_features=16, num_classes=4, seed=seed).remove_self_loops()


def check_kernels(device: str, num_nodes: int = 400, chunks: int = 3, width: int = 8) -> dict[str, Any]:
    """Max |device - cpu| of every reduce's forward and input gradient, float64."""
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.kernels.ops import REDUCES
    from gnnpipe.partition import chunk_graph

    plans = chunk_graph(_graph(num_nodes), chunks, cache=False).plans
    g = torch.Generator().manual_seed(0)
    worst: dict[str, float] = {}
    for p in plans:
        ops = {dev: ChunkOps.build(p, device=dev, dtype=torch.float64) for dev in ("cpu", device)}
        x = torch.randn(p.num_local, width, generator=g, dtype=torch.float64)
        edge_weight = torch.rand(ops["cpu"].num_edges, generator=g, dtype=torch.float64)
        for reduce in REDUCES:
            outs = []
            for dev in ("cpu", device):
                xd = x.to(dev).requires_grad_()
                y = ops[dev].aggregate(xd, reduce, edge_weight.to(dev) if reduce == "weighted" else None)
                y.backward(torch.ones_like(y))
                outs.append((y.detach().cpu(), xd.grad.cpu()))
            diff = max(float((a - b).abs().max()) if a.numel() else 0.0 for a, b in zip(outs[0], outs[1]))
            worst[reduce] = max(worst.get(reduce, 0.0), diff)
    return {"max_abs_diff": worst, "ok": all(v <= 1e-10 for v in worst.values())}


def _train(graph: Any, model: str, device: str, epochs: int, **parallel: Any) -> dict[str, Any]:
    from gnnpipe import api
    from gnnpipe.config import ModelConfig, ParallelConfig, TrainConfig

    rec = api.train(graph, ModelConfig(model=model, layers=4, hidden=16, dropout=0.0),
                    TrainConfig(epochs=epochs, eval_every=epochs, dtype="float64", seed=0, log_level="WARNING"),
                    ParallelConfig(device=device, **({"mode": "single"} | parallel)))
    assert rec is not None
    return rec


def _compare(ref: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    a = [e["loss"] for e in ref["epochs"]]
    b = [e["loss"] for e in rec["epochs"]]
    rel = max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a, b))
    acc = (ref["epochs"][-1]["test_acc"], rec["epochs"][-1]["test_acc"])
    return {"loss_cpu": a, "loss_device": b, "max_rel_loss_diff": rel, "test_acc_cpu_device": acc,
            "ok": len(a) == len(b) and rel <= 1e-9 and acc[0] == acc[1]}


def check_single(device: str, num_nodes: int = 600, epochs: int = 3) -> dict[str, Any]:
    """Single mode of every model kind on the device against the CPU."""
    graph = _graph(num_nodes)
    out = {m: _compare(_train(graph, m, "cpu", epochs), _train(graph, m, device, epochs)) for m in MODELS}
    return {"models": out, "ok": all(v["ok"] for v in out.values())}


SIMULATED = {"pipeline": dict(mode="pipeline", workers=2, chunks=4, snapshot_period=1, unbiased_scale=True),
             "hybrid": dict(mode="hybrid", workers=2, ways=2, chunks=4, snapshot_period=1)}


def check_simulated(device: str, num_nodes: int = 600, epochs: int = 3) -> dict[str, Any]:
    """The simulator's pipeline and hybrid epochs on the device against the CPU: the
    largest relative loss difference and the largest gradient difference."""
    from copy import deepcopy

    from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig, TrainConfig
    from gnnpipe.engine.simulator import PipelineSimulator
    from gnnpipe.models.model import build_model
    from gnnpipe.partition import chunk_graph

    graph = _graph(num_nodes)
    out: dict[str, Any] = {}
    for name, layout in SIMULATED.items():
        cfg = RunConfig(model=ModelConfig(model="gcnii", layers=4, hidden=16, dropout=0.0),
                        train=TrainConfig(epochs=epochs, dtype="float64", seed=0),
                        parallel=ParallelConfig(device="cpu", **layout))
        chunked = chunk_graph(graph, layout["chunks"], cache=False)
        torch.manual_seed(0)
        model = build_model(cfg.model, graph.num_features, graph.num_classes)
        sims = [PipelineSimulator(deepcopy(model), chunked, cfg, device=dev) for dev in ("cpu", device)]
        losses: list[list[float]] = [[], []]
        grad_diff = 0.0
        for epoch in range(1, epochs + 1):
            for i, sim in enumerate(sims):
                losses[i].append(float(sim.train_epoch(epoch)))
            ref, got = sims[0].gradients(), sims[1].gradients()
            grad_diff = max([grad_diff] + [float((ref[k] - got[k].cpu()).abs().max()) for k in ref])
        rel = max(abs(a - b) / max(abs(a), 1e-30) for a, b in zip(*losses))
        out[name] = {"loss_cpu": losses[0], "loss_device": losses[1], "max_rel_loss_diff": rel,
                     "max_abs_grad_diff": grad_diff, "ok": rel <= 1e-9 and grad_diff <= 1e-9}
    return {"layouts": out, "ok": all(v["ok"] for v in out.values())}


def check_distributed(device: str, num_nodes: int = 600, epochs: int = 3) -> dict[str, Any]:
    """The exact distributed layouts on the device against single mode on the CPU."""
    if device != "cpu" and torch.cuda.device_count() < 2:
        return {"skipped": f"needs 2 GPUs or more, found {torch.cuda.device_count()} (NCCL refuses two ranks "
                           "on one device)", "ok": None}
    graph = _graph(num_nodes)
    ref = _train(graph, "gcnii", "cpu", epochs)
    out = {name: _compare(ref, _train(graph, "gcnii", device, epochs, **layout))
           for name, layout in DISTRIBUTED.items()}
    return {"layouts": out, "ok": all(v["ok"] for v in out.values())}


def benchmark(device: str, num_nodes: int, epochs: int) -> dict[str, Any]:
    """Single mode's mean epoch time (after the first) on the CPU and on the device,
    synthetic graph, GCNII-32 hidden 100, float32 (measured)."""
    from gnnpipe import api
    from gnnpipe.config import ModelConfig, ParallelConfig, TrainConfig

    graph = _graph(num_nodes)
    out: dict[str, Any] = {"num_nodes": num_nodes, "num_edges": graph.num_edges, "model": "gcnii-32 h100"}
    for dev in dict.fromkeys(("cpu", device)):
        t0 = time.perf_counter()
        rec = api.train(graph, ModelConfig(model="gcnii", layers=32, hidden=100),
                        TrainConfig(epochs=epochs, eval_every=epochs, seed=0, log_level="WARNING"),
                        ParallelConfig(mode="single", device=dev))
        assert rec is not None
        times = [e["epoch_time_s"] for e in rec["epochs"]][1:]
        out[dev] = {"epoch_s": sum(times) / max(len(times), 1), "wall_s": time.perf_counter() - t0,
                    "peak_memory_bytes": rec.get("peak_memory_bytes")}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results/device_check.json")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--bench-nodes", type=int, default=50_000)
    ap.add_argument("--bench-epochs", type=int, default=4)
    ap.add_argument("--skip", nargs="*", default=[],
                    choices=("kernels", "single", "simulated", "distributed", "benchmark"))
    args = ap.parse_args(argv)
    load_before = load_average()
    info = {"device": args.device, "torch": torch.__version__, "cuda": torch.version.cuda,
            "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}
    print(f"device check on {args.device}: {info}", flush=True)
    results: dict[str, Any] = {}
    steps = (("kernels", lambda: check_kernels(args.device)), ("single", lambda: check_single(args.device)),
             ("simulated", lambda: check_simulated(args.device)),
             ("distributed", lambda: check_distributed(args.device)),
             ("benchmark", lambda: benchmark(args.device, args.bench_nodes, args.bench_epochs)))
    for name, fn in steps:
        if name in args.skip:
            continue
        t0 = time.perf_counter()
        try:
            results[name] = fn()
        except Exception as exc:  # one check's failure is recorded, the others still run
            results[name] = {"error": f"{type(exc).__name__}: {exc}", "ok": False}
        results[name]["seconds"] = time.perf_counter() - t0
        print(f"{name}: ok={results[name].get('ok')} ({results[name]['seconds']:.1f} s)", flush=True)
    failed = [n for n, r in results.items() if r.get("ok") is False]
    write_measurement(args, "the accelerator path against the CPU reference (float64, no dropout; max differences "
                      "computed) and single mode's epoch time on both (measured)", load_before, device_info=info,
                      results=results, failed=failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

