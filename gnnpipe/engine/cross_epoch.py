"""Weight stashing for the cross-epoch overlap (``parallel.cross_epoch_chunks``).

At the turn of epoch ``e`` a stage (every stage but the last) runs the forward of
epoch ``e + 1``'s first chunks before its own step of epoch ``e``. Those forwards
must use, and their backward (in epoch ``e + 1``) must differentiate, the weights as
they were at the turn, although the step of epoch ``e`` changes the parameters in
place in between (and autograd would refuse the changed saved tensors). So at the
turn the stage copies its weights into a *stash* of leaf tensors and runs those
forwards through :func:`torch.func.functional_call` with them; at the step of epoch
``e + 1`` the gradients the stash collected are added to the parameters' own: the
ahead chunks' share of that step is computed at weights one step stale, as the
asynchronous pipeline schedules of PipeDream-2BW / weight stashing do.

Stage 0 encodes every row twice in such an epoch: at the turn with the stash, for
the chunks run ahead (their layer-1 reads and, with GCNII, the ``h0`` rows that travel
with them), and after its step with the stepped weights, for the other chunks. A
first version encoded once, at the turn, for the whole epoch; with Adam at lr 0.01 a
one-step-stale input projection for every chunk cost 10-24 points of test accuracy at
the paper suite's settings (seed 0, K = 2 of C = 8: Amazon Photo GCNII-32 79.81 % and
ResGCN+-32 63.56 %, BlogCatalog GCNII-32 76.04 %, against 90.72, 87.54 and 86.52 %
synchronous; ``bench/results/cross-epoch-encode-once/``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["stash_weights", "module_stash", "call_with", "add_stash_gradients"]


def stash_weights(named: dict[str, Tensor]) -> dict[str, Tensor]:
    """Leaf copies of the parameters ``named`` (name -> tensor), as they are now."""
    return {n: p.detach().clone().requires_grad_(p.requires_grad) for n, p in named.items()}


def module_stash(stash: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """The entries of ``stash`` under ``prefix + "."``, named as inside that module
    (what :func:`torch.func.functional_call` takes)."""
    cut = len(prefix) + 1
    return {n[cut:]: t for n, t in stash.items() if n.startswith(prefix + ".")}


def call_with(module: nn.Module, weights: dict[str, Tensor] | None, *args: Any, **kwargs: Any) -> Any:
    """``module(*args, **kwargs)``, with ``weights`` (from :func:`module_stash`) in
    place of its parameters when given."""
    if weights is None:
        return module(*args, **kwargs)
    return torch.func.functional_call(module, weights, args, kwargs)


def add_stash_gradients(owned: dict[str, Tensor], stash: dict[str, Tensor]) -> None:
    """Add each stashed tensor's gradient to the gradient of the parameter of the same
    name (the step of the epoch whose ahead chunks used the stash)."""
    for name, t in stash.items():
        if t.grad is None:
            continue
        p = owned[name]
        p.grad = t.grad if p.grad is None else p.grad + t.grad
