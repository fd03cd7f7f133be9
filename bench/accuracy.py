"""Accuracy of gnnpipe's models against their papers' published figures.

Runs ``gnnpipe.train`` (mode ``single``, exact full-graph training) for several seeds
per experiment and writes mean, spread and every run to
``bench/results/accuracy.json`` together with the machine and the full config.

Experiments (targets are the brief's, published figures in brackets):

* ``gcn2-cora`` / ``gcn2-citeseer``: Kipf & Welling's GCN (conv F->16, ReLU, conv 16->C;
  no input projection, no classifier), lr 0.01, weight decay 5e-4, dropout 0.5, 200
  epochs, public Planetoid split. Cora >= 80.5 % (81.5), CiteSeer >= 69.5 % (70.3).
* ``gcnii64-cora``: GCNII, 64 layers, hidden 64, lr 0.01, dropout 0.6, alpha 0.1,
  lambda 0.5, weight decay 0.01 on the convolutions and 5e-4 on the dense layers, up
  to 1500 epochs with patience 100 on the validation loss, test accuracy at the
  lowest validation loss (GCNII's own train.py). Cora >= 84.5 % (85.5).
* ``synthetic-*``: on ``load_dataset("synthetic")`` (the default job), 32-layer GCNII
  and ResGCN+ must reach at least the 2-layer GCN, and the 2-layer GCN is compared with
  a 2-layer MLP.

Both papers row-normalise the Planetoid bag-of-words features (each row sums to 1);
this script does the same (``row_normalize_features`` in the JSON). Model selection is
gnnpipe's ``train.monitor`` (in each experiment's ``train_config``): the test accuracy
at the evaluation with the best validation accuracy (``val_acc``, the default) or the
lowest validation loss (``val_loss``).

Usage: ``python bench/accuracy.py [--only NAME ...] [--seeds 3] [--root DIR] [--out PATH]``
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

import gnnpipe
from gnnpipe.config import ModelConfig, ParallelConfig, TrainConfig
from gnnpipe.trainer.record import machine_info, write_json_atomic

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = os.environ.get("GNNPIPE_DATASETS", str(REPO.parent / "shared" / "datasets"))
DEFAULT_OUT = REPO / "bench" / "results" / "accuracy.json"


def load(name: str, root: str) -> gnnpipe.Graph:
    if name == "synthetic":
        return gnnpipe.load_dataset("synthetic")
    return gnnpipe.load_dataset(name, root=root, normalize_features=True)


# name -> (dataset, ModelConfig kwargs, TrainConfig kwargs, target test accuracy | None, published)
KIPF_MODEL = dict(model="gcn", layers=2, hidden=16, dropout=0.5, input_proj=False, classifier=False)
KIPF_TRAIN = dict(epochs=200, lr=0.01, weight_decay=5e-4, eval_every=1)
GCNII_CORA_MODEL = dict(model="gcnii", layers=64, hidden=64, dropout=0.6, alpha=0.1, lambda_=0.5)
GCNII_CORA_TRAIN = dict(epochs=1500, lr=0.01, weight_decay=5e-4, layer_weight_decay=0.01,
                        eval_every=1, patience=100, monitor="val_loss")
SYN_TRAIN = dict(epochs=150, lr=0.01, weight_decay=5e-4, eval_every=5, patience=10)
# The 32-layer models converge more slowly, so they get a larger budget; patience 10
# evaluations = 40 epochs.
SYN_DEEP_TRAIN = dict(epochs=300, lr=0.01, weight_decay=5e-4, eval_every=4, patience=10)

EXPERIMENTS: dict[str, dict[str, Any]] = {
    "gcn2-cora": dict(dataset="cora", model=KIPF_MODEL, train=KIPF_TRAIN, target=0.805, published=0.815),
    "gcn2-citeseer": dict(dataset="citeseer", model=KIPF_MODEL, train=KIPF_TRAIN, target=0.695,
                          published=0.703),
    "gcnii64-cora": dict(dataset="cora", model=GCNII_CORA_MODEL, train=GCNII_CORA_TRAIN, target=0.845,
                         published=0.855),
    # Diagnostic variant: 1000 epochs without early stopping, best validation accuracy.
    # (Patience 100 on the *val accuracy* stopped at epoch ~300 with 82.9 %, 1 seed: on
    # Cora's 500 validation vertices the accuracy plateaus early; GCNII stops on val loss.)
    "gcnii64-cora-nopatience": dict(dataset="cora", model=GCNII_CORA_MODEL,
                                    train=dict(GCNII_CORA_TRAIN, epochs=1000, patience=None, monitor="val_acc"),
                                    target=0.845, published=0.855),
    "synthetic-gcn2": dict(dataset="synthetic", model=dict(model="gcn", layers=2, hidden=64, dropout=0.5,
                                                           input_proj=False, classifier=False),
                           train=SYN_TRAIN),
    "synthetic-mlp2": dict(dataset="synthetic", model=dict(model="mlp", layers=2, hidden=64, dropout=0.5,
                                                           input_proj=False, classifier=False),
                           train=SYN_TRAIN),
    # On the synthetic default (mean degree 4, homophily 0.93, weak features) the label
    # signal needs many hops (bench/depth_probe.py: A^2 X 81.9 %, A^8 X 90.1 % test), so
    # the 32-layer models should beat GCN-2. Tried (1 seed): GCNII-32 dropout 0.5 with
    # val-loss stopping 80.7 % (on an h 0.9 / degree 4 variant of the graph); dropout 0.2
    # and layer weight decay 0.01 84.2 %. The features are low-SNR: GCNII re-injects the
    # projected, undenoised h0 with weight alpha at every layer, so little dropout helps.
    "synthetic-gcnii32": dict(dataset="synthetic", model=dict(model="gcnii", layers=32, hidden=64, dropout=0.2,
                                                              alpha=0.1, lambda_=0.5),
                              train=dict(SYN_DEEP_TRAIN, layer_weight_decay=0.01)),
    "synthetic-resgcn+32": dict(dataset="synthetic", model=dict(model="resgcn+", layers=32, hidden=64,
                                                                dropout=0.2),
                                train=SYN_DEEP_TRAIN),
}

# Comparisons between experiments: (name, left, relation, right).
COMPARISONS = [
    ("gcnii32 >= gcn2 on synthetic", "synthetic-gcnii32", ">=", "synthetic-gcn2"),
    ("resgcn+32 >= gcn2 on synthetic", "synthetic-resgcn+32", ">=", "synthetic-gcn2"),
    ("gcn2 vs mlp2 on synthetic", "synthetic-gcn2", "vs", "synthetic-mlp2"),
]


def run_experiment(name: str, spec: dict[str, Any], seeds: list[int], graph: gnnpipe.Graph) -> dict[str, Any]:
    mc = ModelConfig(**spec["model"])
    runs = []
    for seed in seeds:
        tc = TrainConfig(seed=seed, log_level="WARNING", **spec["train"])
        t0 = time.perf_counter()
        rec = gnnpipe.train(graph, mc, tc, ParallelConfig(mode="single"))
        wall = time.perf_counter() - t0
        run = {
            "seed": seed,
            "test_acc": rec["best"]["test_acc"],
            "val_acc": rec["best"]["val_acc"],
            "best_epoch": rec["best"]["epoch"],
            "epochs_run": rec["summary"]["epochs_run"],
            "mean_epoch_time_s": rec["summary"]["mean_epoch_time_s"],
            "wall_time_s": wall,
        }
        runs.append(run)
        print(f"  {name} seed {seed}: test {run['test_acc']:.4f} val {run['val_acc']:.4f} "
              f"(best epoch {run['best_epoch']}/{run['epochs_run']}, {wall:.1f}s)", flush=True)
    out = {
        "dataset": spec["dataset"],
        "graph": repr(graph),
        "row_normalize_features": spec["dataset"] != "synthetic",
        "model_config": asdict(mc),
        "train_config": {k: v for k, v in asdict(TrainConfig(**spec["train"])).items() if k != "seed"},
        "runs": runs,
    }
    if spec.get("target") is not None:
        out["target"] = spec["target"]
        out["published"] = spec["published"]
    return _with_stats(out)


def _with_stats(exp: dict[str, Any]) -> dict[str, Any]:
    """(Re)compute the seed statistics of an experiment from its runs."""
    runs = sorted(exp["runs"], key=lambda r: r["seed"])
    accs = [r["test_acc"] for r in runs]
    exp.update(
        runs=runs, seeds=[r["seed"] for r in runs],
        test_acc_mean=statistics.fmean(accs),
        test_acc_std=statistics.stdev(accs) if len(accs) > 1 else 0.0,
        test_acc_min=min(accs), test_acc_max=max(accs),
        val_acc_mean=statistics.fmean(r["val_acc"] for r in runs),
    )
    if "target" in exp:
        exp["meets_target"] = exp["test_acc_mean"] >= exp["target"]
    return exp


def _merge_into(results: dict[str, Any], name: str, exp: dict[str, Any]) -> None:
    """Add an experiment; runs of the same experiment with other seeds are combined."""
    old = results.get(name)
    # Runs combine only where everything that decides them is equal (the graph too: the
    # synthetic default has changed between versions).
    if (old is not None and old["model_config"] == exp["model_config"]
            and old["train_config"] == exp["train_config"] and old.get("graph") == exp.get("graph")):
        by_seed = {r["seed"]: r for r in old["runs"]}
        by_seed.update({r["seed"]: r for r in exp["runs"]})
        exp = dict(exp, runs=list(by_seed.values()))
    results[name] = _with_stats(exp)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", choices=sorted(EXPERIMENTS), help="run only these experiments")
    ap.add_argument("--seeds", type=int, default=3, help="number of seeds")
    ap.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed, first-seed+1, ...")
    ap.add_argument("--root", default=DEFAULT_ROOT, help="datasets folder")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (1: robust on a shared machine; 0 = torch's default)")
    ap.add_argument("--merge", nargs="*", default=[], help="also take the experiments of these JSON files")
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.WARNING)

    names = list(EXPERIMENTS) if args.only is None else args.only
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    out_path = Path(args.out)
    # Merge into an existing file so that experiments can be run one at a time.
    previous = json.loads(out_path.read_text()) if out_path.exists() else {}
    results: dict[str, Any] = dict(previous.get("experiments", {}))
    for extra in args.merge:
        for key, exp in json.loads(Path(extra).read_text())["experiments"].items():
            _merge_into(results, key, exp)
    graphs: dict[str, gnnpipe.Graph] = {}
    for name in names:
        spec = EXPERIMENTS[name]
        if spec["dataset"] not in graphs:
            graphs[spec["dataset"]] = load(spec["dataset"], args.root)
        print(f"{name}: {graphs[spec['dataset']]!r}", flush=True)
        _merge_into(results, name, run_experiment(name, spec, seeds, graphs[spec["dataset"]]))
        r = results[name]
        print(f"{name}: test {100 * r['test_acc_mean']:.2f} +- {100 * r['test_acc_std']:.2f} %"
              + (f" (target {100 * r['target']:.1f}, published {100 * r['published']:.1f})"
                 if "target" in r else ""), flush=True)
        _write(out_path, results, argv)
    record = _write(out_path, results, argv)
    for c in record["comparisons"]:
        print(f"{c['comparison']}: {100 * c['left_mean']:.2f} vs {100 * c['right_mean']:.2f}"
              + (f" -> {'holds' if c['holds'] else 'FAILS'}" if "holds" in c else ""))
    print(f"wrote {out_path}")
    return 0


def _write(out_path: Path, results: dict[str, Any], argv: list[str] | None) -> dict[str, Any]:
    """Write the JSON (after every experiment, so a long run keeps what it finished)."""
    comparisons = []
    for label, left, rel, right in COMPARISONS:
        if left in results and right in results:
            a, b = results[left]["test_acc_mean"], results[right]["test_acc_mean"]
            item = {"comparison": label, "left": left, "right": right, "left_mean": a, "right_mean": b,
                    "difference": a - b}
            if rel == ">=":
                item["holds"] = a >= b
            comparisons.append(item)
    record = {
        "benchmark": "accuracy",
        "machine": dict(machine_info("cpu"), torch_threads=torch.get_num_threads()),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "selection": "test accuracy at the evaluation with the best train_config.monitor: highest "
                     "validation accuracy (val_acc) or lowest validation loss (val_loss); gnnpipe single mode",
        "experiments": results,
        "comparisons": comparisons,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(record, out_path)
    return record


if __name__ == "__main__":
    raise SystemExit(main())
