"""The input projection's product for sparse (CSR) features: ``y = X W^T``.

``X`` is a :class:`~gnnpipe.data.sparse.SparseFeatures` [n, F] (a constant: features
need no gradient), ``W`` the projection weight [H, F] (``nn.Linear`` layout). Forward is
one CSR x dense product, ``X @ W^T`` -> [n, H]; the weight's gradient is
``grad_W = (X^T grad_y)^T``, a second CSR product with the transpose of ``X``, whose
structure (``t_crow``, ``t_col``, ``perm``) is built once per feature matrix
(:meth:`SparseFeatures.transpose_structure`) as :mod:`gnnpipe.kernels.csr` does for
aggregation; only its values (``values[perm]``, which change with dropout) are gathered
per call. Both products are ``torch.sparse_csr_tensor @ dense``: MKL or native kernels
on CPU, cuSPARSE on CUDA, so one path serves every device.

Why not ``torch.sparse.mm``: its backward for the dense operand transposes the CSR to
CSC on every call and multiplies with it; measured with torch 2.13 on Coauthor CS
(1.09 M non-zeros, H = 100, one thread) about 3x slower forward + backward than the
prebuilt transpose here (bench/sparse_features.py records both).
"""

from __future__ import annotations

from typing import Any

import torch

from gnnpipe.kernels.csr import make_csr

__all__ = ["sparse_linear", "sparse_weight_grad"]


class _SparseLinear(torch.autograd.Function):
    """``y = X(values) @ W^T`` with fixed structure; gradient for ``W`` only."""

    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, values: torch.Tensor, x: Any) -> torch.Tensor:  # type: ignore[override]
        ctx.x = x
        ctx.save_for_backward(values)
        n, f = x.shape
        if values.numel() == 0 or n == 0:
            return weight.new_zeros((n, weight.shape[0]))
        return make_csr(x.crow, x.col, values, (n, f)) @ weight.t()

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:  # type: ignore[override]
        if not ctx.needs_input_grad[0]:
            return None, None, None
        (values,) = ctx.saved_tensors
        return sparse_weight_grad(ctx.x, values, grad_y), None, None


def sparse_weight_grad(x: Any, values: torch.Tensor, grad_y: torch.Tensor) -> torch.Tensor:
    """The weight's gradient of ``y = X(values) @ W^T`` for the output gradient
    ``grad_y``: ``(X^T grad_y)^T``, through the transposed structure built once per
    feature matrix (module docstring).

    Shapes: x [n, F]; values [nnz]; grad_y [n, H] -> [H, F].
    """
    n, f = x.shape
    if values.numel() == 0 or n == 0:
        return grad_y.new_zeros((grad_y.shape[1], f))
    t_crow, t_col, perm = x.transpose_structure()
    xt = make_csr(t_crow, t_col, values[perm], (f, n))
    return (xt @ grad_y.contiguous()).t()


def sparse_linear(x: Any, weight: torch.Tensor, bias: torch.Tensor | None = None,
                  values: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight^T (+ bias)`` for a SparseFeatures ``x``, differentiable w.r.t.
    ``weight`` and ``bias``; ``values`` replaces ``x.values`` (e.g. after dropout) on
    the same structure.

    Shapes: x [n, F]; weight [H, F]; bias [H]; values [nnz] -> [n, H].
    """
    v = x.values if values is None else values
    if v.dtype != weight.dtype or v.device != weight.device:
        raise TypeError(f"sparse_linear: features are {v.dtype} on {v.device}, the weight {weight.dtype} on "
                        f"{weight.device}; move the features with .to(device, dtype) first")
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"sparse_linear: features have F={x.shape[1]} columns, the weight expects {weight.shape[1]}")
    y = _SparseLinear.apply(weight, v, x)
    return y + bias if bias is not None else y
