"""The optimizer of every mode: Adam with per-group weight decay.

GCNII-style training uses one weight decay for the GNN-layer parameters and another
for the dense ones (input projection, classifier); ``TrainConfig.layer_weight_decay``
sets the former (default: ``weight_decay`` for both). A pipeline stage passes only
the parameters it owns.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import nn

__all__ = ["build_optimizer", "model_optimizer"]


def build_optimizer(train_config: Any, layer_params: Iterable[nn.Parameter],
                    other_params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """Adam(lr) over two groups: GNN-layer parameters (``layer_weight_decay`` or
    ``weight_decay``) and the rest (``weight_decay``). Empty groups are dropped."""
    wd = float(train_config.weight_decay)
    lwd = train_config.layer_weight_decay
    lwd = wd if lwd is None else float(lwd)
    groups = []
    layer = [p for p in layer_params if p.requires_grad]
    other = [p for p in other_params if p.requires_grad]
    if layer:
        groups.append({"params": layer, "weight_decay": lwd, "name": "layers"})
    if other:
        groups.append({"params": other, "weight_decay": wd, "name": "dense"})
    if not groups:
        # A stage with no trainable parameters still steps (a no-op optimizer).
        groups.append({"params": [], "weight_decay": wd, "name": "empty"})
    try:
        # One kernel over all parameters per step instead of a dozen per tensor (CPU
        # and CUDA since torch 2.4): on BlogCatalog, GCNII-32, a pipeline's stage 0
        # stepped in 4.7-6.6 ms a step with the per-tensor Adam, which its next epoch's
        # first chunk waits for, and which the last stage then waits for (measured,
        # bench/results/stage_start/). The same update up to float rounding (ad hoc,
        # 50 steps of GCNII-like shapes: at most 2.4e-7 apart in float32, 8.9e-16 in
        # float64); every mode uses it, so the modes still agree as before.
        return torch.optim.Adam(groups, lr=float(train_config.lr), fused=True)
    except (RuntimeError, ValueError, TypeError):  # an older torch, or a device without it
        return torch.optim.Adam(groups, lr=float(train_config.lr))


def model_optimizer(model: nn.Module, train_config: Any) -> torch.optim.Optimizer:
    """:func:`build_optimizer` for a whole ``DeepGNN`` (its ``layer_parameters``
    against every other parameter)."""
    layer = list(model.layer_parameters())  # type: ignore[operator]
    ids = {id(p) for p in layer}
    other = [p for p in model.parameters() if id(p) not in ids]
    return build_optimizer(train_config, layer, other)
