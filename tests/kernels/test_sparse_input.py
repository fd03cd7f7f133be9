"""The input projection's CSR x dense product (gnnpipe.kernels.sparse_input): forward
and the weight gradient against the dense product, full tensors, float64."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.data.sparse import SparseFeatures
from gnnpipe.kernels.sparse_input import sparse_linear

DT = torch.float64


def _sparse_matrix(n: int = 60, f: int = 45, density: float = 0.08, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, f, generator=gen, dtype=DT) * (torch.rand(n, f, generator=gen) < density)
    x[3] = 0.0  # an empty row
    x[:, 7] = 0.0  # an empty column
    return x


def test_forward_and_gradients_equal_the_dense_product():
    x = _sparse_matrix()
    s = SparseFeatures.from_dense(x)
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(9, x.shape[1], generator=gen, dtype=DT, requires_grad=True)
    b = torch.randn(9, generator=gen, dtype=DT, requires_grad=True)
    g = torch.randn(x.shape[0], 9, generator=gen, dtype=DT)

    y = sparse_linear(s, w, b)
    y.backward(g)
    gw, gb = w.grad.clone(), b.grad.clone()
    w.grad = b.grad = None
    ref = torch.nn.functional.linear(x, w, b)
    ref.backward(g)

    torch.testing.assert_close(y, ref, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(gw, w.grad, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(gb, b.grad, rtol=0, atol=0)
    assert bool((gw[:, 7] == 0).all())  # an all-zero feature column gets no gradient


def test_replaced_values_use_the_same_structure():
    x = _sparse_matrix(seed=2)
    s = SparseFeatures.from_dense(x)
    w = torch.randn(4, x.shape[1], dtype=DT, requires_grad=True)
    scaled = s.values * 3.0
    y = sparse_linear(s, w, values=scaled)
    y.sum().backward()
    ref_w = w.detach().clone().requires_grad_(True)
    ref = (3.0 * x) @ ref_w.t()
    ref.sum().backward()
    torch.testing.assert_close(y, ref, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(w.grad, ref_w.grad, rtol=1e-13, atol=1e-13)


def test_transpose_structure_is_the_transpose():
    x = _sparse_matrix(seed=3)
    s = SparseFeatures.from_dense(x)
    t_crow, t_col, perm = s.transpose_structure()
    xt = SparseFeatures(t_crow, t_col, s.values[perm], (x.shape[1], x.shape[0]))
    assert xt.check() is None
    assert torch.equal(xt.to_dense(), x.t())
    assert s.transpose_structure() is s.transpose_structure()  # built once


def test_no_nonzeros_and_no_rows():
    w = torch.randn(3, 5, dtype=DT, requires_grad=True)
    empty = SparseFeatures.from_dense(torch.zeros(4, 5, dtype=DT))
    y = sparse_linear(empty, w)
    assert torch.equal(y, torch.zeros(4, 3, dtype=DT))
    y.sum().backward()
    assert torch.equal(w.grad, torch.zeros(3, 5, dtype=DT))
    none = SparseFeatures.from_dense(torch.zeros(0, 5, dtype=DT))
    assert sparse_linear(none, w).shape == (0, 3)


def test_dtype_and_width_mismatch_are_refused():
    s = SparseFeatures.from_dense(_sparse_matrix().float())
    with pytest.raises(TypeError, match="to\\(device, dtype\\)"):
        sparse_linear(s, torch.zeros(3, s.shape[1], dtype=DT))
    with pytest.raises(ValueError, match="columns"):
        sparse_linear(s, torch.zeros(3, s.shape[1] + 1))
