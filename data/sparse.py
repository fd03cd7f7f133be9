"""Sparse (CSR) node features: :class:`SparseFeatures` and the density rule.

Why a type of its own: bag-of-words features are mostly zeros (Coauthor CS 18,333 x
6,805 at 0.88 % non-zero), and keeping them dense costs memory in every copy (the
cache entry, every worker's replica) and time in the input projection (dropout and a
dense product over N x F entries, of which 99 % are zero). A :class:`SparseFeatures`
keeps only the CSR arrays from the loader through the cache, the partition reorder and
the chunk rows to the input projection (``InputProjection`` in
:mod:`gnnpipe.models.model`), which multiplies it with a sparse x dense product.

The type offers what the graph pipeline does with a feature matrix, with the same
spelling as a tensor: ``shape``/``size()``/``dim()``, ``dtype``/``device``, row selection
(``x[index]``, ``x.index_select(0, index)``, ``x[a:b]``), ``to(device, dtype)`` (every
``Tensor.to`` form), ``contiguous()``, ``to_dense()``. Anything else (element-wise maths,
column slices) is refused rather than silently densified: call ``to_dense()``.

The CSR is canonical: rows ascending, columns strictly ascending within each row, no
duplicates and no explicitly stored zeros (built that way by every constructor here;
:meth:`validate` checks it), so two equal matrices have equal arrays.

Density rule (:func:`choose_layout`): ``"auto"`` keeps a matrix sparse when its non-zero
fraction is at most :data:`DEFAULT_SPARSE_THRESHOLD` (0.1) and dense otherwise; ``True`` /
``False`` force one layout. The loaders apply ``"auto"`` with the default threshold (so
the cached conversion is fixed by the file); ``load_dataset(..., sparse_features=...,
sparse_threshold=...)`` then re-applies the caller's choice.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

__all__ = ["SparseFeatures", "DEFAULT_SPARSE_THRESHOLD", "SPARSE_MODES", "is_sparse_features",
           "feature_density", "wants_sparse", "choose_layout", "sparse_of"]

#: Non-zero fraction at or below which ``"auto"`` keeps features sparse.
DEFAULT_SPARSE_THRESHOLD = 0.1
#: The accepted values of the ``sparse_features`` option.
SPARSE_MODES = ("auto", True, False)


def _make_csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """A torch sparse CSR tensor without invariant checks or the "beta" warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        warnings.filterwarnings("ignore", message=".*[Ss]parse invariant checks.*")
        return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)


class SparseFeatures:
    """A CSR feature matrix [N, F]: ``crow`` int64 [N + 1], ``col`` int64 [nnz]
    (strictly ascending within a row), ``values`` float [nnz] (no stored zeros).

    Immutable by convention (transformations return new objects); the transposed
    structure used by the projection's backward (:meth:`transpose_structure`) is built
    once per object, on its device, and kept.
    """

    __slots__ = ("crow", "col", "values", "_shape", "_transpose")
    is_sparse = True

    def __init__(self, crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, shape: Any) -> None:
        self.crow = crow
        self.col = col
        self.values = values
        n, f = (int(s) for s in shape)
        self._shape = torch.Size((n, f))
        self._transpose: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    # ------------------------------------------------------------ construction
    @classmethod
    def from_scipy(cls, m: Any, dtype: torch.dtype = torch.float32) -> "SparseFeatures":
        """From any scipy sparse matrix (duplicates summed, zeros dropped, sorted)."""
        import scipy.sparse as sp

        csr = sp.csr_matrix(m, copy=True)
        csr.sum_duplicates()
        csr.eliminate_zeros()
        csr.sort_indices()
        return cls(torch.from_numpy(csr.indptr.astype(np.int64)), torch.from_numpy(csr.indices.astype(np.int64)),
                   torch.from_numpy(np.asarray(csr.data)).to(dtype), csr.shape)

    @classmethod
    def from_dense(cls, x: Any) -> "SparseFeatures":
        """From a dense [N, F] tensor or array (its non-zero entries), on its device."""
        t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
        if t.dim() != 2:
            raise ValueError(f"SparseFeatures.from_dense: expected a 2-D matrix, found shape {tuple(t.shape)}")
        n, f = t.shape
        nz = t != 0
        lengths = nz.sum(dim=1)
        crow = torch.zeros(n + 1, dtype=torch.int64, device=t.device)
        crow[1:] = torch.cumsum(lengths, 0)
        rows, cols = nz.nonzero(as_tuple=True)  # row-major: rows ascending, columns ascending
        return cls(crow, cols.to(torch.int64), t[rows, cols].contiguous(), (n, f))

    @classmethod
    def from_torch(cls, t: torch.Tensor) -> "SparseFeatures":
        """From a torch sparse tensor (COO, CSR or CSC layout)."""
        if t.layout != torch.sparse_csr:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
                t = t.to_sparse_csr() if t.layout != torch.sparse_coo else t.coalesce().to_sparse_csr()
        crow, col, values = t.crow_indices().to(torch.int64), t.col_indices().to(torch.int64), t.values()
        if bool((values == 0).any()):
            return cls.from_dense(t.to_dense())
        return cls(crow, col, values, t.shape)

    # ------------------------------------------------------------ tensor-like
    @property
    def shape(self) -> torch.Size:
        return self._shape

    def size(self, dim: int | None = None) -> Any:
        return self._shape if dim is None else self._shape[dim]

    def dim(self) -> int:
        return 2

    @property
    def ndim(self) -> int:
        return 2

    def __len__(self) -> int:
        return self._shape[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def nnz(self) -> int:
        return int(self.col.numel())

    @property
    def density(self) -> float:
        """Non-zero fraction ``nnz / (N F)`` (0 for an empty matrix)."""
        n, f = self._shape
        return self.nnz / (n * f) if n * f else 0.0

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.crow, self.col, self.values))

    def numel(self) -> int:
        return self._shape[0] * self._shape[1]

    def to(self, *args: Any, **kwargs: Any) -> "SparseFeatures":
        """Every form of ``Tensor.to`` (device, dtype, both, another tensor); the dtype
        applies to the values, the device to every array."""
        values = self.values.to(*args, **kwargs)
        dev = values.device
        if values is self.values:
            return self
        out = SparseFeatures(self.crow.to(dev), self.col.to(dev), values, self._shape)
        if self._transpose is not None and dev == self.device:
            out._transpose = self._transpose
        return out

    def cpu(self) -> "SparseFeatures":
        return self.to("cpu")

    def cuda(self, device: Any = None) -> "SparseFeatures":
        return self.to(torch.device("cuda") if device is None else device)

    def float(self) -> "SparseFeatures":
        return self.to(torch.float32)

    def double(self) -> "SparseFeatures":
        return self.to(torch.float64)

    def contiguous(self) -> "SparseFeatures":
        return self

    def clone(self) -> "SparseFeatures":
        return SparseFeatures(self.crow.clone(), self.col.clone(), self.values.clone(), self._shape)

    def detach(self) -> "SparseFeatures":
        return self

    @property
    def requires_grad(self) -> bool:
        return False

    # ------------------------------------------------------------ rows
    def _rows_of_range(self, start: int, stop: int) -> "SparseFeatures":
        crow = self.crow[start:stop + 1]
        a, b = int(crow[0]), int(crow[-1])
        return SparseFeatures(crow - a, self.col[a:b], self.values[a:b], (stop - start, self._shape[1]))

    def index_select(self, dim: int, index: torch.Tensor) -> "SparseFeatures":
        """Rows ``index`` in that order (repeats allowed).

        Shapes: index int [k] -> [k, F]."""
        if dim not in (0, -2):
            raise IndexError(f"SparseFeatures selects rows only (dim 0), found dim={dim}")
        index = torch.as_tensor(index, device=self.crow.device)
        if index.dtype == torch.bool:
            if index.shape != (self._shape[0],):
                raise IndexError(f"SparseFeatures: a bool row mask must have N={self._shape[0]} entries, "
                                 f"found shape {tuple(index.shape)}")
            index = index.nonzero(as_tuple=True)[0]
        if index.dtype.is_floating_point or index.dim() != 1:
            raise IndexError(f"SparseFeatures: rows must be a 1-D integer index, found dtype {index.dtype} "
                             f"shape {tuple(index.shape)}")
        index = index.to(torch.int64)
        n = self._shape[0]
        if index.numel() and (int(index.min()) < -n or int(index.max()) >= n):
            raise IndexError(f"SparseFeatures: row index out of range for N={n}")
        index = torch.where(index < 0, index + n, index)
        starts = self.crow[:-1][index]
        lengths = self.crow[1:][index] - starts
        k = int(index.numel())
        crow = torch.zeros(k + 1, dtype=torch.int64, device=self.crow.device)
        crow[1:] = torch.cumsum(lengths, 0)
        nnz = int(crow[-1])
        # Entry j of selected row r comes from position starts[r] + j.
        pos = torch.repeat_interleave(starts - crow[:-1], lengths, output_size=nnz)
        pos += torch.arange(nnz, device=pos.device)
        return SparseFeatures(crow, self.col[pos], self.values[pos], (k, self._shape[1]))

    def __getitem__(self, index: Any) -> "SparseFeatures":
        """Row selection: an integer or bool tensor/array/list, or a slice of rows."""
        if isinstance(index, tuple):
            if len(index) == 2 and isinstance(index[1], slice) and index[1] == slice(None):
                index = index[0]
            else:
                raise IndexError("SparseFeatures selects whole rows only; call to_dense() for other indexing")
        if isinstance(index, slice):
            start, stop, step = index.indices(self._shape[0])
            if step == 1:
                return self._rows_of_range(start, max(start, stop))
            return self.index_select(0, torch.arange(start, stop, step))
        if isinstance(index, (int, np.integer)):
            raise IndexError("SparseFeatures selects sets of rows; use x[[i]] for one row as a [1, F] matrix")
        if not isinstance(index, torch.Tensor):
            index = torch.as_tensor(np.asarray(index))
        return self.index_select(0, index)

    # ------------------------------------------------------------ conversions
    def to_sparse_csr(self) -> torch.Tensor:
        """The torch sparse CSR tensor of the same arrays (no copy)."""
        return _make_csr(self.crow, self.col, self.values, tuple(self._shape))

    def to_dense(self) -> torch.Tensor:
        """Dense [N, F] on the same device and dtype."""
        n, f = self._shape
        out = torch.zeros(n, f, dtype=self.dtype, device=self.device)
        if self.nnz:
            out.view(-1).index_put_((self.row_index() * f + self.col,), self.values)
        return out

    def to_scipy(self) -> Any:
        import scipy.sparse as sp

        return sp.csr_matrix((self.values.cpu().numpy(), self.col.cpu().numpy(), self.crow.cpu().numpy()),
                             shape=tuple(self._shape))

    def row_index(self) -> torch.Tensor:
        """int64 [nnz]: the row of every stored entry."""
        lengths = self.crow[1:] - self.crow[:-1]
        return torch.repeat_interleave(torch.arange(self._shape[0], device=self.crow.device), lengths,
                                       output_size=self.nnz)

    def transpose_structure(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(t_crow [F + 1], t_col [nnz], perm [nnz])``: the CSR of the transpose
        [F, N], whose values are ``values[perm]``. Built once, on this object's device."""
        if self._transpose is None:
            f = self._shape[1]
            # A stable sort by column keeps rows ascending within a column (the forward
            # order is (row, col)); int32 keys sort faster on CPU.
            key = self.col.to(torch.int32) if f < 2**31 else self.col
            perm = torch.sort(key, stable=True).indices
            t_crow = torch.zeros(f + 1, dtype=torch.int64, device=self.col.device)
            t_crow[1:] = torch.cumsum(torch.bincount(self.col, minlength=f), 0)
            self._transpose = (t_crow, self.row_index()[perm].contiguous(), perm)
        return self._transpose

    # ------------------------------------------------------------ maths the graph needs
    def row_sums(self) -> torch.Tensor:
        """[N]: the sum of every row."""
        out = torch.zeros(self._shape[0], dtype=self.dtype, device=self.device)
        return out.index_add_(0, self.row_index(), self.values) if self.nnz else out

    def row_normalize(self) -> "SparseFeatures":
        """Rows scaled to sum 1; rows whose sum is not positive stay as they are
        (the rule of :meth:`Graph.row_normalize_features` for dense features)."""
        s = self.row_sums()[self.row_index()]
        values = torch.where(s > 0, self.values / s.clamp_min(1e-12), self.values)
        return SparseFeatures(self.crow, self.col, values.contiguous(), self._shape)

    def all_finite(self) -> bool:
        v = self.values
        return bool(torch.isfinite(v.sum())) or bool(torch.isfinite(v).all())

    def equal(self, other: Any) -> bool:
        """Same shape and the same entries (dense ``other`` compared by its non-zeros)."""
        if not isinstance(other, SparseFeatures):
            if not isinstance(other, torch.Tensor) or other.layout != torch.strided:
                return False
            other = SparseFeatures.from_dense(other)
        return (self._shape == other._shape and self.dtype == other.dtype
                and all(torch.equal(a, b.to(a.device)) for a, b in
                        ((self.crow, other.crow), (self.col, other.col), (self.values, other.values))))

    def check(self) -> str | None:
        """None when the CSR is canonical and finite, else what is wrong (one phrase)."""
        n, f = self._shape
        crow, col, v = self.crow, self.col, self.values
        if crow.dtype != torch.int64 or crow.dim() != 1 or crow.numel() != n + 1:
            return f"row pointers int64 of length N+1={n + 1}, found dtype {crow.dtype} shape {tuple(crow.shape)}"
        if col.dtype != torch.int64 or col.dim() != 1 or v.dim() != 1 or v.numel() != col.numel():
            return (f"column indices int64 [nnz] and values [nnz], found {col.dtype} {tuple(col.shape)} and "
                    f"{tuple(v.shape)}")
        if int(crow[0]) != 0 or int(crow[-1]) != col.numel():
            return f"row pointers from 0 to nnz={col.numel()}, found {int(crow[0])} .. {int(crow[-1])}"
        if n and bool((crow[1:] < crow[:-1]).any()):
            return "non-decreasing row pointers, found a decrease"
        if col.numel():
            lo, hi = int(col.min()), int(col.max())
            if lo < 0 or hi >= f:
                return f"column indices in [0, F={f}), found range [{lo}, {hi}]"
            rising = col[1:] > col[:-1]
            row_start = torch.zeros(col.numel(), dtype=torch.bool, device=col.device)
            starts = crow[1:-1]
            row_start[starts[starts < col.numel()]] = True
            if bool((~rising & ~row_start[1:]).any()):
                return "strictly ascending column indices within each row (no duplicates)"
            if bool((v == 0).any()):
                return "no explicitly stored zeros"
        return None

    # ------------------------------------------------------------ misc
    def __reduce__(self) -> tuple[Any, ...]:
        return (SparseFeatures, (self.crow, self.col, self.values, tuple(self._shape)))

    def __repr__(self) -> str:
        return (f"SparseFeatures(shape={tuple(self._shape)}, nnz={self.nnz}, density={self.density:.4g}, "
                f"dtype={self.dtype}, device={self.device})")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("SparseFeatures is not an array: call to_dense() (or to_scipy()) explicitly")


def is_sparse_features(x: Any) -> bool:
    return isinstance(x, SparseFeatures)


def feature_density(x: Any) -> float:
    """Non-zero fraction of a dense tensor/array, a scipy sparse matrix or a SparseFeatures."""
    if isinstance(x, SparseFeatures):
        return x.density
    try:
        import scipy.sparse as sp

        if sp.issparse(x):
            n, f = x.shape
            return sp.csr_matrix(x).count_nonzero() / (n * f) if n * f else 0.0
    except ImportError:  # pragma: no cover
        pass
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    return float((t != 0).sum()) / t.numel() if t.numel() else 0.0


def _check_mode(mode: Any, threshold: Any) -> None:
    if not any(mode is m or (isinstance(mode, str) and mode == m) for m in SPARSE_MODES):
        raise ValueError(f"sparse_features: expected 'auto', true or false, found {mode!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"sparse_threshold: expected a number in [0, 1], found {threshold!r}")


def wants_sparse(x: Any, mode: Any = "auto", threshold: float = DEFAULT_SPARSE_THRESHOLD) -> bool:
    """Whether ``x`` should be stored sparse under ``mode`` (``"auto"``/True/False)."""
    _check_mode(mode, threshold)
    if mode is True or mode is False:
        return bool(mode)
    n, f = x.shape
    return n * f > 0 and feature_density(x) <= threshold


def sparse_of(x: Any) -> "SparseFeatures | None":
    """``x`` as a float32 :class:`SparseFeatures` when it is a sparse matrix (a
    SparseFeatures, a scipy or torch sparse matrix), else None (a dense matrix)."""
    if isinstance(x, SparseFeatures):
        return x.float()
    if isinstance(x, torch.Tensor) and x.layout != torch.strided:
        return SparseFeatures.from_torch(x).float()
    try:
        import scipy.sparse as sp

        if sp.issparse(x):
            return SparseFeatures.from_scipy(x)
    except ImportError:  # pragma: no cover
        pass
    return None


def choose_layout(x: Any, mode: Any = "auto", threshold: float = DEFAULT_SPARSE_THRESHOLD) -> Any:
    """``x`` (dense tensor/array, scipy/torch sparse or SparseFeatures) in the layout
    ``mode`` asks for: a :class:`SparseFeatures` or a dense float32 tensor. A matrix
    already in that layout is returned as is (no copy).

    Shapes: x [N, F] -> [N, F].
    """
    sparse = wants_sparse(x, mode, threshold)
    if isinstance(x, SparseFeatures):
        return x if sparse else x.to_dense()
    given = sparse_of(x)
    if given is not None:  # scipy / torch sparse
        return given if sparse else given.to_dense()
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(torch.float32)
    return SparseFeatures.from_dense(t) if sparse else t
