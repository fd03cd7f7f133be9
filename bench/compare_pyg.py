"""gnnpipe vs torch_geometric: the same model, data, seed and initial weights, side by side.

For every case both frameworks train in one process, epoch by epoch in alternation
(the one that goes first alternates too), so that both see the same machine load:

* ``gnnpipe``: ``gnnpipe.models.build_model`` over one whole-graph ``ChunkOps``
  (CSR sparse-dense products with a prebuilt transpose for backward), the loss and
  optimizer of ``gnnpipe.trainer``;
* ``pyg``: the same architecture from ``torch_geometric.nn.GCNConv`` /
  ``GCN2Conv`` (``cached=True``, so the normalisation is computed once, as PyG's own
  examples do for full-graph training), with the gnnpipe model's initial weights
  copied in (checked: the two initial eval-mode forwards agree to float32 round-off,
  ``initial_max_abs_diff`` in the JSON). PyG gets its fastest input on this machine
  (``--pyg-adjacency``): ``csr``, the transposed adjacency as a torch sparse CSR
  tensor (PyG's sparse-matrix path, an SpMM per layer; the default), or
  ``edge_index`` (gather/scatter message passing). Each case records which.

Cases: ``gcn2-cora`` (Kipf & Welling: conv F->16->C, 200 epochs, 3 seeds),
``gcnii32-coauthor_cs`` (GCNII-32 hidden 100 on Coauthor CS, gnnpipe on its sparse CSR
features, PyG on the dense matrix; 60 epochs),
``gcn4-syn200k`` (4 GCN convs, hidden 128) and ``gcnii32-syn200k`` (GCNII, 32 layers,
hidden 100) on ``load_dataset("synthetic", num_nodes=200000)`` with the options of
``bench/graphs.py`` (~2M edges). On the
200k graph the epoch budget is small (CPU time), so accuracy there is the test
accuracy after a fixed number of epochs, the same for both (GCNII-32: 10 epochs, past
the first epochs where both are near chance and the gap is dropout noise).

Reported per case: test accuracy (at the best validation evaluation), median epoch
time (forward + backward + optimizer step; evaluation and the first ``warmup`` epochs
excluded), and the ratios gnnpipe / pyg. JSON: ``bench/results/compare_pyg.json``.

Usage: ``python bench/compare_pyg.py [--only CASE ...] [--seeds S ...] [--threads 1] [--out PATH]
[--merge FILE ...]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

import gnnpipe
from gnnpipe.config import ModelConfig, TrainConfig
from gnnpipe.kernels import ChunkOps
from gnnpipe.data.sparse import SparseFeatures
from gnnpipe.models import DeepGNN, build_model, model_input
from gnnpipe.partition import whole_graph_plan
from gnnpipe.models.optim import build_optimizer, model_optimizer
from gnnpipe.trainer.record import machine_info, write_json_atomic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graphs import SYSTEMS_SYNTHETIC  # noqa: E402

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.runner import load_average  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = os.environ.get("GNNPIPE_DATASETS", str(REPO.parent / "shared" / "datasets"))
DEFAULT_OUT = REPO / "bench" / "results" / "compare_pyg.json"

CASES: dict[str, dict[str, Any]] = {
    "gcn2-cora": dict(
        dataset="cora",
        model=dict(model="gcn", layers=2, hidden=16, dropout=0.5, input_proj=False, classifier=False),
        train=dict(lr=0.01, weight_decay=5e-4), epochs=200, eval_every=1, warmup=5, seeds=[0, 1, 2]),
    "gcn4-syn200k": dict(
        dataset="synthetic200k",
        model=dict(model="gcn", layers=4, hidden=128, dropout=0.5, input_proj=False, classifier=False),
        train=dict(lr=0.01, weight_decay=5e-4), epochs=40, eval_every=5, warmup=1, seeds=[0, 1, 2]),
    "gcnii32-syn200k": dict(
        dataset="synthetic200k",
        model=dict(model="gcnii", layers=32, hidden=100, dropout=0.5, alpha=0.1, lambda_=0.5),
        train=dict(lr=0.01, weight_decay=5e-4, layer_weight_decay=0.01), epochs=10, eval_every=5,
        warmup=1, seeds=[0, 1, 2]),
    # A bag-of-words graph (18,333 x 6,805 features, 0.88 % non-zero): gnnpipe reads its
    # features as it loads them (sparse CSR, the input projection a CSR product), PyG the
    # dense matrix its examples use. 60 epochs: both past their fast first rise.
    "gcnii32-coauthor_cs": dict(
        dataset="coauthor_cs", native_input=True,
        model=dict(model="gcnii", layers=32, hidden=100, dropout=0.5, alpha=0.1, lambda_=0.5),
        train=dict(lr=0.01, weight_decay=5e-4, layer_weight_decay=0.01), epochs=60, eval_every=5,
        warmup=2, seeds=[0, 1, 2]),
}


# ------------------------------------------------------------------ PyG models
class PygGCN(nn.Module):
    """``dropout -> GCNConv -> ReLU`` per layer, no ReLU after the last (Kipf & Welling)."""

    def __init__(self, dims: list[int], dropout: float) -> None:
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.dropout = dropout
        self.convs = nn.ModuleList(GCNConv(a, b, cached=True) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(F.dropout(x, self.dropout, self.training), edge_index)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x

    def load_from(self, ours: DeepGNN) -> None:
        with torch.no_grad():
            for conv, layer in zip(self.convs, ours.layers):
                conv.lin.weight.copy_(layer.weight.T)
                conv.bias.copy_(layer.bias)

    def layer_parameters(self):
        return self.convs.parameters()


class PygGCNII(nn.Module):
    """PyG's GCNII (examples/gcn2_cora.py): dropout, linear, ReLU; L x (dropout,
    GCN2Conv, ReLU); dropout, linear."""

    def __init__(self, in_dim: int, hidden: int, num_classes: int, layers: int, alpha: float,
                 theta: float, dropout: float) -> None:
        super().__init__()
        from torch_geometric.nn import GCN2Conv

        self.dropout = dropout
        self.lin0 = nn.Linear(in_dim, hidden)
        self.convs = nn.ModuleList(
            GCN2Conv(hidden, alpha, theta, layer=l, shared_weights=True, cached=True)
            for l in range(1, layers + 1))
        self.lin1 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = x0 = F.relu(self.lin0(F.dropout(x, self.dropout, self.training)))
        for conv in self.convs:
            x = F.relu(conv(F.dropout(x, self.dropout, self.training), x0, edge_index))
        return self.lin1(F.dropout(x, self.dropout, self.training))

    def load_from(self, ours: DeepGNN) -> None:
        with torch.no_grad():
            self.lin0.weight.copy_(ours.encode.linear.weight)
            self.lin0.bias.copy_(ours.encode.linear.bias)
            for conv, layer in zip(self.convs, ours.layers):
                conv.weight1.copy_(layer.weight)
            self.lin1.weight.copy_(ours.decode.linear.weight)
            self.lin1.bias.copy_(ours.decode.linear.bias)

    def layer_parameters(self):
        return self.convs.parameters()


def pyg_twin(ours: DeepGNN, mc: ModelConfig, in_dim: int, num_classes: int) -> nn.Module:
    if mc.model == "gcn":
        twin: nn.Module = PygGCN(ours.layer_dims, mc.dropout)
    elif mc.model == "gcnii":
        twin = PygGCNII(in_dim, mc.hidden, num_classes, mc.layers, mc.alpha, mc.lambda_, mc.dropout)
    else:
        raise ValueError(f"no torch_geometric twin for model {mc.model}")
    twin.load_from(ours)
    return twin


# ------------------------------------------------------------------ the runs
class Runner:
    """One framework's model, optimizer and forward; times one training epoch."""

    def __init__(self, name: str, model: nn.Module, forward: Callable[[], torch.Tensor],
                 optimizer: torch.optim.Optimizer, y: torch.Tensor, masks: tuple[torch.Tensor, ...]) -> None:
        self.name, self.model, self.forward, self.optimizer = name, model, forward, optimizer
        self.y, self.masks = y, masks
        self.num_train = int(masks[0].sum())
        self.epoch_times: list[float] = []
        self.losses: list[float] = []
        self.best: dict[str, Any] = {"val_acc": -1.0}

    def train_epoch(self) -> None:
        t0 = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.forward()
        train = self.masks[0]
        # DESIGN.md 3: summed cross-entropy over training rows / number of training rows.
        loss = F.cross_entropy(logits[train], self.y[train], reduction="sum") / self.num_train
        loss.backward()
        self.optimizer.step()
        self.epoch_times.append(time.perf_counter() - t0)
        self.losses.append(float(loss.detach()))

    @torch.no_grad()
    def evaluate(self, epoch: int) -> None:
        self.model.eval()
        pred = self.forward().argmax(dim=1)
        accs = [float((pred[m] == self.y[m]).float().mean()) for m in self.masks]
        if accs[1] > self.best["val_acc"]:
            self.best = {"epoch": epoch, "train_acc": accs[0], "val_acc": accs[1], "test_acc": accs[2]}


def pyg_adjacency(edge_index: torch.Tensor, num_nodes: int, kind: str) -> torch.Tensor:
    """What PyG's convs take as ``edge_index``: the [2, E] index itself, or ``adj_t``
    (row = target, column = source) as a torch sparse CSR tensor."""
    if kind == "edge_index":
        return edge_index
    from torch_geometric.utils import to_torch_csr_tensor

    return to_torch_csr_tensor(edge_index.flip(0), size=(num_nodes, num_nodes))


def build_runners(spec: dict[str, Any], graph: gnnpipe.Graph, seed: int,
                  adjacency: str = "csr") -> tuple[list[Runner], dict[str, Any]]:
    """The two runners of one case: gnnpipe's model and its PyG twin with the same
    initial weights, each with its own Adam (same parameter groups and decays).

    Returns the runners (gnnpipe first) and the setup figures for the JSON."""
    g = graph.remove_self_loops()  # as gnnpipe's trainer does; both frameworks add one per vertex
    t0 = time.perf_counter()
    ops = ChunkOps.build(whole_graph_plan(g))
    build_ops_s = time.perf_counter() - t0
    x, y = (g.features.to_dense() if g.sparse_features else g.features), g.labels  # PyG's usual dense input
    edge_index = pyg_adjacency(g.edge_index(), g.num_nodes, adjacency)
    masks = (g.train_mask, g.val_mask, g.test_mask)
    mc = ModelConfig(**spec["model"])
    tc = TrainConfig(seed=seed, **spec["train"])

    torch.manual_seed(seed)
    ours = build_model(mc, g.num_features, g.num_classes)
    twin = pyg_twin(ours, mc, g.num_features, g.num_classes)
    # gnnpipe's own input where the case asks for it (sparse features stay CSR); else the
    # same dense matrix as PyG.
    x_ours = model_input(ours, g.features) if spec.get("native_input") else x
    ours.eval(), twin.eval()
    with torch.no_grad():
        init_diff = float((ours(x_ours, ops) - twin(x, edge_index)).abs().max())

    twin_opt = build_optimizer(tc, twin.layer_parameters(),
                               [p for n, p in twin.named_parameters() if not n.startswith("convs.")])
    runners = [
        Runner("gnnpipe", ours, lambda: ours(x_ours, ops), model_optimizer(ours, tc), y, masks),
        Runner("pyg", twin, lambda: twin(x, edge_index), twin_opt, y, masks),
    ]
    return runners, {"seed": seed, "initial_max_abs_diff": init_diff, "build_ops_s": build_ops_s,
                     "pyg_adjacency": adjacency,
                     "gnnpipe_input": "sparse CSR" if isinstance(x_ours, SparseFeatures) else "dense",
                     "pyg_input": "dense"}


def run_case(name: str, spec: dict[str, Any], graph: gnnpipe.Graph, seed: int,
             adjacency: str = "csr") -> dict[str, Any]:
    runners, out = build_runners(spec, graph, seed, adjacency)
    epochs, every = spec["epochs"], spec["eval_every"]
    torch.manual_seed(seed)
    for epoch in range(1, epochs + 1):
        order = runners if epoch % 2 else runners[::-1]
        for r in order:
            r.train_epoch()
            if epoch % every == 0 or epoch == epochs:
                r.evaluate(epoch)
        if epoch == 1 or epoch % max(1, epochs // 5) == 0:
            print(f"  {name} seed {seed} epoch {epoch}: " + ", ".join(
                f"{r.name} {r.epoch_times[-1]:.3f}s loss {r.losses[-1]:.4f}" for r in runners), flush=True)

    for r in runners:
        timed = r.epoch_times[spec["warmup"]:]
        out[r.name] = {
            "test_acc": r.best["test_acc"], "val_acc": r.best["val_acc"], "best_epoch": r.best["epoch"],
            "median_epoch_time_s": statistics.median(timed), "epoch_times_s": r.epoch_times,
            "final_loss": r.losses[-1],
        }
    out["epoch_time_ratio"] = out["gnnpipe"]["median_epoch_time_s"] / out["pyg"]["median_epoch_time_s"]
    out["test_acc_diff"] = out["gnnpipe"]["test_acc"] - out["pyg"]["test_acc"]
    return out


def load(dataset: str, root: str) -> gnnpipe.Graph:
    if dataset == "synthetic200k":
        return gnnpipe.load_dataset("synthetic", **{**SYSTEMS_SYNTHETIC, "num_nodes": 200_000})
    return gnnpipe.load_dataset(dataset, root=root, normalize_features=True)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key: str, fw: str) -> float:
        return statistics.fmean(r[fw][key] for r in runs)

    s: dict[str, Any] = {"seeds": [r["seed"] for r in runs]}
    s.update({f"{fw}_{k}": mean(k, fw) for fw in ("gnnpipe", "pyg") for k in ("test_acc", "median_epoch_time_s")})
    for fw in ("gnnpipe", "pyg"):
        accs = [r[fw]["test_acc"] for r in runs]
        # Sample standard deviation over seeds; 0 for a single seed (no spread measured).
        s[f"{fw}_test_acc_std"] = statistics.stdev(accs) if len(accs) > 1 else 0.0
        s[f"{fw}_test_acc_range"] = [min(accs), max(accs)]
    s["test_acc_diff_points_per_seed"] = [100 * (r["gnnpipe"]["test_acc"] - r["pyg"]["test_acc"]) for r in runs]
    s["epoch_time_ratio"] = s["gnnpipe_median_epoch_time_s"] / s["pyg_median_epoch_time_s"]
    s["test_acc_diff_points"] = 100 * (s["gnnpipe_test_acc"] - s["pyg_test_acc"])
    s["accuracy_within_1_point"] = abs(s["test_acc_diff_points"]) <= 1.0
    s["not_slower_than_pyg"] = s["epoch_time_ratio"] <= 1.0
    return s


_SETTINGS = ("graph", "row_normalize_features", "pyg_adjacency", "model_config", "train")


def _fold(results: dict[str, Any], name: str, case: dict[str, Any]) -> None:
    """Store ``case``; where the stored case has the same settings, its runs of other
    seeds are kept (a new run of a seed replaces the old one) and the summary covers all."""
    old = results.get(name)
    runs = {r["seed"]: r for r in case["runs"]}
    if old is not None and all(old.get(k) == case.get(k) for k in _SETTINGS):
        runs = {**{r["seed"]: r for r in old["runs"]}, **runs}
    ordered = [runs[seed] for seed in sorted(runs)]
    results[name] = {**{k: case[k] for k in _SETTINGS if k in case}, "summary": summarize(ordered), "runs": ordered}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", choices=sorted(CASES))
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads for both frameworks (0 = torch's default)")
    ap.add_argument("--root", default=DEFAULT_ROOT)
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--pyg-adjacency", choices=("csr", "edge_index"), default="csr",
                    help="PyG's graph input: adj_t as torch sparse CSR (SpMM) or edge_index (scatter)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="run these seeds instead of the case's own (runs of other seeds with the same "
                         "settings are kept and summarised together)")
    ap.add_argument("--merge", nargs="*", default=[],
                    help="also fold in the runs of these JSON files (same case and settings only)")
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    import torch_geometric

    out_path = Path(args.out)
    previous = json.loads(out_path.read_text()) if out_path.exists() else {}
    # Summaries are recomputed on load so that every case carries the current summary fields.
    results: dict[str, Any] = {name: {**case, "summary": summarize(case["runs"])}
                               for name, case in previous.get("cases", {}).items()}
    # Every earlier command that wrote this file or a merged one, oldest first. A run one
    # of them made may since have been replaced (same seed rerun, or changed settings).
    commands: list[str] = list(previous.get("earlier_commands", []))
    if "command" in previous:
        commands.append(previous["command"])
    header = {
        "benchmark": "compare_pyg",
        "machine": dict(machine_info("cpu"), torch_threads=torch.get_num_threads(),
                        torch_geometric=torch_geometric.__version__,
                        pyg_extensions={m: importlib.util.find_spec(m) is not None
                                        for m in ("pyg_lib", "torch_scatter", "torch_sparse")}),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "earlier_commands": commands,
        "timing": "median over epochs after the warm-up ones of forward + backward + Adam step; "
                  "evaluation excluded; the two frameworks alternate epoch by epoch",
    }

    def write_record() -> None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic({**header, "cases": results}, out_path)

    for extra in args.merge:
        merged = json.loads(Path(extra).read_text())
        commands.extend([*merged.get("earlier_commands", []), merged["command"]])
        for name, case in merged["cases"].items():
            _fold(results, name, case)
    if args.merge:
        write_record()  # a merge with no case to run (--only with no names) still lands
    graphs: dict[str, gnnpipe.Graph] = {}
    for name in (list(CASES) if args.only is None else args.only):
        spec = CASES[name]
        if spec["dataset"] not in graphs:
            graphs[spec["dataset"]] = load(spec["dataset"], args.root)
        graph = graphs[spec["dataset"]]
        print(f"{name}: {graph!r}", flush=True)
        seeds = spec["seeds"] if args.seeds is None else args.seeds
        runs = []
        for seed in seeds:
            before = load_average()
            run = run_case(name, spec, graph, seed, args.pyg_adjacency)
            runs.append({**run, "load_average_before": before, "load_average_after": load_average()})
        _fold(results, name, {
            "graph": repr(graph),
            "row_normalize_features": spec["dataset"] != "synthetic200k",  # load() normalises real datasets
            "pyg_adjacency": args.pyg_adjacency,
            "model_config": asdict(ModelConfig(**spec["model"])),
            "train": dict(spec["train"], optimizer="Adam", epochs=spec["epochs"],
                          eval_every=spec["eval_every"], warmup_epochs_excluded=spec["warmup"]),
            "runs": runs,
        })
        s = results[name]["summary"]
        print(f"{name}: test gnnpipe {100 * s['gnnpipe_test_acc']:.2f} pyg {100 * s['pyg_test_acc']:.2f} "
              f"({s['test_acc_diff_points']:+.2f} points); epoch gnnpipe {s['gnnpipe_median_epoch_time_s']:.4f}s "
              f"pyg {s['pyg_median_epoch_time_s']:.4f}s (ratio {s['epoch_time_ratio']:.3f})", flush=True)
        # Write after every case: a long run keeps what it finished.
        write_record()
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
