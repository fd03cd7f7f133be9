"""``rows_linear``: the product and the weight and bias gradients of
``F.linear(x[rows], W, b)`` (full tensors, float64, repeated and unordered rows), with
``x`` itself saved for the backward, not a gathered copy."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from gnnpipe.kernels.rows_linear import rows_linear

DT = torch.float64


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(30, 11, generator=gen, dtype=DT)
    w = torch.randn(6, 11, generator=gen, dtype=DT)
    b = torch.randn(6, generator=gen, dtype=DT)
    rows = torch.tensor([7, 2, 29, 2, 0, 15], dtype=torch.int64)
    return x, w, b, rows


def test_rows_linear_equals_linear_of_the_gathered_rows():
    x, w, b, rows = _inputs()
    g = torch.randn(rows.numel(), 6, generator=torch.Generator().manual_seed(1), dtype=DT)
    w1, b1 = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
    w2, b2 = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
    got = rows_linear(x, rows, w1, b1)
    want = F.linear(x[rows], w2, b2)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    got.backward(g)
    want.backward(g)
    torch.testing.assert_close(w1.grad, w2.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(b1.grad, b2.grad, rtol=1e-12, atol=1e-12)


def test_rows_linear_saves_x_itself_not_a_copy_of_its_rows():
    x, w, _b, rows = _inputs()
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        rows_linear(x, rows, w.clone().requires_grad_(True))
    ptrs = {t.untyped_storage().data_ptr() for t in saved}
    assert x.untyped_storage().data_ptr() in ptrs
    # Nothing of [len(rows), F] (a gathered copy) is kept.
    assert not any(t.shape == (rows.numel(), x.shape[1]) for t in saved)


def test_rows_linear_without_bias_and_without_weight_gradient():
    x, w, _b, rows = _inputs(2)
    torch.testing.assert_close(rows_linear(x, rows, w), x[rows] @ w.t(), rtol=1e-12, atol=1e-12)
    assert not rows_linear(x, rows, w).requires_grad
