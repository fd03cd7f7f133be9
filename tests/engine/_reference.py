"""The single-process reference that every distributed-mode test compares against:
``single`` mode's computation written out plainly (whole-graph forward, the DESIGN.md 3
loss, Adam with the trainer's parameter groups), in float64."""

from __future__ import annotations

from typing import Any

import torch


def single_run(model: torch.nn.Module, graph: Any, train_config: Any, epochs: int):
    """Train ``model`` (already float64) on the whole ``graph`` for ``epochs`` epochs.

    Returns ``(per_epoch, accuracies)``: per epoch the loss, logits and gradients of the
    forward/backward before the step and the parameters after it; then the exact
    evaluation of the final model ({train, val, test, val_loss}).
    """
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.partition import whole_graph_plan
    from gnnpipe.models.objective import evaluation_metrics, evaluation_sums, training_loss
    from gnnpipe.models.optim import model_optimizer

    g = graph
    ops = ChunkOps.build(whole_graph_plan(g), dtype=torch.float64)
    x = g.features.to(torch.float64)
    opt = model_optimizer(model, train_config)
    per_epoch = []
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        logits = model(x, ops)
        loss = training_loss(logits, g.labels, g.train_mask, int(g.train_mask.sum()))
        loss.backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters()}
        opt.step()
        per_epoch.append({"loss": float(loss.detach()), "logits": logits.detach().clone(), "grads": grads,
                          "params": {k: p.detach().clone() for k, p in model.named_parameters()}})
    model.eval()
    with torch.no_grad():
        acc = evaluation_metrics(evaluation_sums(model(x, ops), g.labels, (g.train_mask, g.val_mask, g.test_mask)))
    return per_epoch, acc
