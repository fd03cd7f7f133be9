"""How much can depth gain on a graph? Linear probes on propagated features.

For a synthetic graph (``load_dataset("synthetic", **options)``) this fits a
logistic regression (L-BFGS, L2 penalty picked on the validation split) on

* ``A^k X`` for k = 0..16, with ``A = D^-1/2 (A + I) D^-1/2`` (GCN's propagation; SGC),
* ``PPR_alpha X`` after 32 steps of ``h <- (1 - alpha) A h + alpha X`` (the fixed
  propagation of APPNP, and of GCNII with near-identity weights),

and reports validation and test accuracy of each. The probe separates what the
graph offers from what a model learns: where the accuracy peaks at small k and falls
with k, long-range aggregation carries less label signal than it mixes in noise, and
a deep model whose propagation reaches far (GCNII: PPR with alpha = 0.1) is bounded
near the PPR figure whatever its training.

Usage: ``python bench/depth_probe.py [--option key=value ...] [--out PATH]``;
JSON with the machine and the graph options to ``bench/results/depth_probe.json``
(runs on other graphs are added to the same file; each run records its options as
given and resolved against the generator's defaults).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

import gnnpipe
from gnnpipe.cli import _parse_value
from gnnpipe.data import SYNTHETIC_DEFAULTS
from gnnpipe.kernels import ChunkOps
from gnnpipe.partition import whole_graph_plan
from gnnpipe.trainer.record import machine_info, write_json_atomic

RESULTS = Path(__file__).resolve().parent / "results" / "depth_probe.json"
HOPS = (0, 1, 2, 3, 4, 6, 8, 12, 16)
ALPHAS = (0.1, 0.2, 0.5)
PENALTIES = (1e-4, 1e-3, 1e-2, 1e-1)


def probe(features: torch.Tensor, graph: gnnpipe.Graph) -> dict[str, float]:
    """Validation-selected logistic regression on ``features``: val and test accuracy.

    Shapes: features [N, F]."""
    tr, va, te = graph.train_mask, graph.val_mask, graph.test_mask
    f = (features - features[tr].mean(0)) / (features[tr].std(0) + 1e-9)
    y = graph.labels
    best: dict[str, float] | None = None
    for penalty in PENALTIES:
        torch.manual_seed(0)
        lin = torch.nn.Linear(f.shape[1], graph.num_classes).double()
        opt = torch.optim.LBFGS(lin.parameters(), max_iter=200)

        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = F.cross_entropy(lin(f[tr]), y[tr]) + penalty * lin.weight.pow(2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            pred = lin(f).argmax(1)
        res = {"val_acc": float((pred[va] == y[va]).double().mean()),
               "test_acc": float((pred[te] == y[te]).double().mean()), "penalty": penalty}
        if best is None or res["val_acc"] > best["val_acc"]:
            best = res
    assert best is not None
    return best


def run(options: dict[str, Any]) -> dict[str, Any]:
    graph = gnnpipe.load_dataset("synthetic", **options).remove_self_loops()
    ops = ChunkOps.build(whole_graph_plan(graph), dtype=torch.float64)
    x = graph.features.double()
    out: dict[str, Any] = {"graph": repr(graph), "options": options,
                           "resolved_options": {**SYNTHETIC_DEFAULTS, **options}, "sgc": {}, "ppr32": {}}
    h = x
    for k in range(max(HOPS) + 1):
        if k in HOPS:
            out["sgc"][f"A^{k}"] = probe(h, graph)
        h = ops.aggregate(h, "gcn")
    for alpha in ALPHAS:
        h = x
        for _ in range(32):
            h = (1 - alpha) * ops.aggregate(h, "gcn") + alpha * x
        out["ppr32"][f"alpha={alpha}"] = probe(h, graph)
    best_k = max(out["sgc"], key=lambda k: out["sgc"][k]["val_acc"])
    out["best_sgc_hops"] = best_k
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="synthetic generator option (repeatable), e.g. homophily=0.85")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    options: dict[str, Any] = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"--option: expected KEY=VALUE, found {item!r}", file=sys.stderr)
            return 2
        options[key.strip()] = _parse_value(value.strip())  # the CLI's own --data-option parsing
    t0 = time.perf_counter()
    result = run(options)
    result["wall_time_s"] = time.perf_counter() - t0
    for name, table in (("A^k X", result["sgc"]), ("PPR32 X", result["ppr32"])):
        print(name + ": " + ", ".join(f"{k} {100 * v['test_acc']:.2f}" for k, v in table.items()))
    out_path = Path(args.out)
    previous = json.loads(out_path.read_text()) if out_path.exists() else {}
    # One entry per graph: a run replaces an earlier one of the same *resolved* options
    # (the generator's defaults change between versions, so the options as given are
    # not enough to name a graph).
    old_runs = previous.get("runs", [])
    runs = [r for r in (old_runs if isinstance(old_runs, list) else [])
            if r.get("resolved_options") != result["resolved_options"]]
    runs.append(result)
    record = {"benchmark": "depth_probe", "machine": machine_info("cpu"),
              "notes": "logistic regression (L-BFGS, L2 penalty chosen on val) on propagated raw "
                       "features; accuracies in [0, 1]", "runs": runs}
    write_json_atomic(record, out_path)
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
