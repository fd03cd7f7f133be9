"""``y = x[rows] @ W^T`` for rows of a constant dense ``x``, keeping ``x``, not a copy.

A pipeline's stage 0 encodes the input features one group of rows at a time
(:mod:`gnnpipe.engine.encode_groups`). ``F.linear(x.index_select(0, rows), W)`` would
save the gathered rows for the weight's gradient: over an epoch's groups another copy
of the whole ``[N, F]`` input, kept until each group's backward. This product saves a
reference to ``x`` (which the stage holds for the epoch anyway) and the row ids, and
gathers the rows again in backward. ``x`` needs no gradient (features are constants);
the weight's is ``grad_y^T x[rows]``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["rows_linear"]


class _RowsLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x, rows)
        return x.index_select(0, rows) @ weight.t()

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:  # type: ignore[override]
        if not ctx.needs_input_grad[0]:
            return None, None, None
        x, rows = ctx.saved_tensors
        return grad_y.t() @ x.index_select(0, rows), None, None


def rows_linear(x: torch.Tensor, rows: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x[rows] @ weight^T (+ bias)``, differentiable w.r.t. ``weight`` and ``bias``
    only; ``x`` must not change until the backward (autograd's version check says so
    if it does).

    Shapes: x [n, F]; rows int64 [m]; weight [H, F]; bias [H] -> [m, H].
    """
    y = _RowsLinear.apply(weight, x, rows)
    return y + bias if bias is not None else y
