"""How large each layer's input is in a training-mode forward (dropout on) against an
evaluation-mode forward (dropout off), at initialisation.

Why: the pipeline's exact history start fills the historical buffers from an exact
evaluation-mode forward, and the history-drift measure shows those values far from the
fresh training values in deep plain models (drift 1.00, i.e. the history is near zero
beside the fresh rows, from about layer 12 of GCN-32 on Amazon Photo in the
``ablation-plain`` suite). This measures the cause directly: the Frobenius norm of every
layer's input over all rows in both modes, one whole-graph forward each, no gradient,
one seed. Writes a JSON with machine and config::

    python -m bench.activation_scale --out bench/results/activation_scale.json
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import torch

from .runner import load_average, write_measurement

DEFAULT_CASES = ("amazon_photo:gcn", "amazon_photo:sage", "amazon_photo:gcnii", "amazon_photo:resgcn+")


@torch.no_grad()
def layer_input_norms(model: Any, x: Any, ops: Any, training: bool) -> list[float]:
    """Norm of the input of layers 1..L of ``model`` in one forward (measured).

    Shapes: x [N, F]; every layer input [N, H]."""
    model.train(training)
    h0 = h = model.encode(x)
    norms = []
    for layer in model.layers:  # as DeepGNN.forward, keeping each layer's input norm
        norms.append(float(h.norm()))
        h = layer(h, ops, h0 if layer.needs_h0 else None)
    return norms


def main(argv: list[str] | None = None) -> int:
    import gnnpipe
    from gnnpipe.config import ModelConfig
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.models import build_model, model_input
    from gnnpipe.partition import whole_graph_plan

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results/activation_scale.json")
    ap.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), metavar="DATASET:MODEL")
    ap.add_argument("--data-root", default=os.environ.get("GNNPIPE_DATASETS", "../shared/datasets"))
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    load_before, cases, graphs = load_average(), [], {}
    for case in args.cases:
        dataset, _, model_name = case.partition(":")
        if dataset not in graphs:
            graph = gnnpipe.load_dataset(dataset, root=args.data_root).remove_self_loops()
            graphs[dataset] = (graph, ChunkOps.build(whole_graph_plan(graph)))
        graph, ops = graphs[dataset]
        torch.manual_seed(args.seed)
        model = build_model(ModelConfig(model=model_name, layers=args.layers, hidden=args.hidden,
                                        dropout=args.dropout, input_proj=True, classifier=True),
                            graph.num_features, graph.num_classes)
        x = model_input(model, graph.features)
        train = layer_input_norms(model, x, ops, training=True)
        evaluation = layer_input_norms(model, x, ops, training=False)
        ratio = [t / e if e > 0 else None for t, e in zip(train, evaluation)]
        cases.append({"dataset": dataset, "model": model_name, "train_mode_norm": train, "eval_mode_norm": evaluation,
                      "train_over_eval": ratio})
        print(f"{case}: train/eval norm of the layer input at layers 1, L/2, L: "
              f"{ratio[0]:.3g}, {ratio[len(ratio) // 2]:.3g}, {ratio[-1]:.3g}", flush=True)
    write_measurement(
        args,
        "Frobenius norm of each layer's input (index 0 = layer 1) over all rows, one forward with dropout "
        "(training mode) and one without (evaluation mode), at initialisation, no gradient (measured); "
        "train_over_eval computed", load_before, cases=cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
