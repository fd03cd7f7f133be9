"""Rows of an aggregation's input held constant: their gradient is 0.

A pipeline stage's chunk reads some halo rows stale, as constants whose gradient it
drops (DESIGN.md 5). :meth:`gnnpipe.kernels.ChunkOps.with_constant_rows` gives it
operators that do not compute that gradient; the native backend leaves those rows out
of its transposed products (:func:`gnnpipe.kernels.csr.without_transposed_rows`), the
others compute the whole gradient and zero those rows with :func:`hold_constant`.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["hold_constant"]


class _HoldConstant(torch.autograd.Function):
    """The identity forward; backward zeroes the gradient of the rows ``constant``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, constant: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.constant = constant
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return grad.masked_fill(ctx.constant.unsqueeze(1), 0), None


def hold_constant(x: torch.Tensor, constant: torch.Tensor) -> torch.Tensor:
    """``x``, with the gradient of the rows ``constant`` zeroed on the way back.

    Shapes: x [n, d]; constant bool [n] -> [n, d]."""
    return _HoldConstant.apply(x, constant)
