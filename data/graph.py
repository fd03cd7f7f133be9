"""The graph container that every part of gnnpipe reads.

A :class:`Graph` is immutable: every transformation returns a new graph. Edges are
stored as the CSR of *in-edges*: row ``v`` lists the sources ``u`` of the edges
``u -> v``, so that aggregation "v gathers from its in-neighbours" is a row-wise
sparse-dense product. Ids are ``global_nid`` in ``[0, N)``.

Labels are ``-1`` for a vertex that has no label (CiteSeer's isolated test-range
vertices, for example); such a vertex may not be in any mask.

``features`` is either a dense float32 tensor or a
:class:`~gnnpipe.data.sparse.SparseFeatures` (CSR) for bag-of-words features that are
mostly zeros; both have ``shape``, row selection, ``to(device, dtype)`` and
``to_dense()``. The constructors keep the layout they are given (a scipy or torch
sparse matrix becomes a SparseFeatures); :meth:`Graph.with_feature_layout` converts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnpipe.data.sparse import DEFAULT_SPARSE_THRESHOLD, SparseFeatures, choose_layout, sparse_of
from gnnpipe.errors import DataError

__all__ = ["Graph"]


def _as_long(x: Any) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    return t.to(torch.int64).contiguous()


def _as_mask(x: Any, n: int, what: str, name: str) -> torch.Tensor:
    if x is None:
        return torch.zeros(n, dtype=torch.bool)
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    if t.dtype != torch.bool:
        is_int = t.dtype in (torch.int32, torch.int64)
        if t.dim() == 1 and is_int and (t.numel() != n or (t.numel() and int(t.max()) > 1)):
            # An index list rather than a 0/1 mask (a 0/1 vector of length N is a mask).
            if t.numel() and (int(t.min()) < 0 or int(t.max()) >= n):
                raise DataError(
                    f"{name}: {what} indices must lie in [0, {n}), found range "
                    f"[{int(t.min())}, {int(t.max())}]"
                )
            m = torch.zeros(n, dtype=torch.bool)
            m[t.long()] = True
            return m
        t = t != 0
    return t.contiguous()


@dataclass(frozen=True, eq=False)
class Graph:
    """An attributed graph for node classification.

    Shapes:
        indptr: int64 [N + 1]; indices: int64 [E] (sources of the in-edges of each row,
        sorted within a row); features: float32 [N, F], dense or a SparseFeatures (CSR);
        labels: int64 [N] (-1 = none); train_mask / val_mask / test_mask: bool [N].
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    features: "torch.Tensor | SparseFeatures"
    labels: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    num_classes: int
    name: str = "graph"

    # ------------------------------------------------------------------ basics
    @property
    def num_nodes(self) -> int:
        return int(self.indptr.numel() - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def sparse_features(self) -> bool:
        """True when ``features`` is a :class:`SparseFeatures` (CSR)."""
        return isinstance(self.features, SparseFeatures)

    @property
    def feature_density(self) -> float:
        """Non-zero fraction of the feature matrix (for dense features: counted)."""
        f = self.features
        if isinstance(f, SparseFeatures):
            return f.density
        return float((f != 0).sum()) / f.numel() if f.numel() else 0.0

    def with_feature_layout(self, sparse: bool | str = "auto",
                            threshold: float = DEFAULT_SPARSE_THRESHOLD) -> "Graph":
        """The graph with its features sparse (``True``), dense (``False``) or sparse
        when their non-zero fraction is at most ``threshold`` (``"auto"``). Returns
        ``self`` when the layout is already the requested one.

        Shapes: features [N, F] -> [N, F] (same values)."""
        try:
            feats = choose_layout(self.features, sparse, threshold)
        except ValueError as exc:
            raise DataError(f"{self.name}: {exc}") from None
        return self if feats is self.features else self.replace(features=feats)

    @property
    def in_degree(self) -> torch.Tensor:
        """int64 [N]: number of in-edges of each vertex."""
        return self.indptr[1:] - self.indptr[:-1]

    def dst_index(self) -> torch.Tensor:
        """int64 [E]: the destination (row) of every stored edge, in CSR order."""
        return torch.repeat_interleave(torch.arange(self.num_nodes), self.in_degree)

    def edge_index(self) -> torch.Tensor:
        """int64 [2, E]: rows (source, destination), in CSR order."""
        return torch.stack([self.indices, self.dst_index()])

    def replace(self, **changes: Any) -> "Graph":
        """A copy with some fields replaced (the graph itself is immutable)."""
        return dataclasses.replace(self, **changes)

    def with_masks(self, train_mask: Any, val_mask: Any, test_mask: Any) -> "Graph":
        """A copy with new train/val/test masks (bool [N] masks or int index lists).

        Shapes: each mask bool [N] or int64 [k] (indices in [0, N)).
        """
        n = self.num_nodes
        return self.replace(
            train_mask=_as_mask(train_mask, n, "train", self.name),
            val_mask=_as_mask(val_mask, n, "val", self.name),
            test_mask=_as_mask(test_mask, n, "test", self.name),
        )

    def __repr__(self) -> str:
        return (
            f"Graph(name={self.name!r}, N={self.num_nodes}, E={self.num_edges}, "
            f"F={self.num_features}, classes={self.num_classes}, "
            f"train/val/test={int(self.train_mask.sum())}/{int(self.val_mask.sum())}/"
            f"{int(self.test_mask.sum())})"
        )

    # ------------------------------------------------------------- validation
    def validate(self, *, require_train: bool = True) -> "Graph":
        """Check shapes, dtypes, index range, sortedness, masks and labels.

        Raises :class:`DataError` with one line naming the graph, what was expected
        and what was found. Returns ``self`` so that loaders can ``return g.validate()``.
        """
        name = self.name
        if self.indptr.dtype != torch.int64 or self.indptr.dim() != 1 or self.indptr.numel() < 1:
            raise DataError(
                f"{name}: indptr must be a 1-D int64 tensor of length N+1, found "
                f"dtype {self.indptr.dtype} shape {tuple(self.indptr.shape)}"
            )
        n = self.num_nodes
        if self.indices.dtype != torch.int64 or self.indices.dim() != 1:
            raise DataError(
                f"{name}: indices must be a 1-D int64 tensor, found dtype "
                f"{self.indices.dtype} shape {tuple(self.indices.shape)}"
            )
        if int(self.indptr[0]) != 0 or int(self.indptr[-1]) != self.indices.numel():
            raise DataError(
                f"{name}: indptr must start at 0 and end at E={self.indices.numel()}, "
                f"found {int(self.indptr[0])} .. {int(self.indptr[-1])}"
            )
        if n and bool((self.indptr[1:] < self.indptr[:-1]).any()):
            raise DataError(f"{name}: indptr must be non-decreasing, found a decrease")
        if self.indices.numel():
            lo, hi = int(self.indices.min()), int(self.indices.max())
            if lo < 0 or hi >= n:
                raise DataError(
                    f"{name}: edge source ids must lie in [0, {n}), found range [{lo}, {hi}]"
                )
            # Sorted within each row: a decrease is only allowed at a row start.
            dec = self.indices[1:] < self.indices[:-1]
            if bool(dec.any()):
                row_start = torch.zeros(self.indices.numel(), dtype=torch.bool)
                starts = self.indptr[1:-1]
                starts = starts[starts < self.indices.numel()]
                row_start[starts] = True
                if bool((dec & ~row_start[1:]).any()):
                    raise DataError(f"{name}: indices must be sorted within each CSR row")
        f = self.features
        if not isinstance(f, (torch.Tensor, SparseFeatures)) or (isinstance(f, torch.Tensor)
                                                                 and f.layout != torch.strided):
            raise DataError(f"{name}: features must be a dense tensor or a SparseFeatures, found "
                            f"{type(f).__name__}{'' if not isinstance(f, torch.Tensor) else ' ' + str(f.layout)}")
        if f.dim() != 2 or f.shape[0] != n:
            raise DataError(
                f"{name}: features must have shape [N={n}, F], found {tuple(f.shape)}"
            )
        if f.dtype != torch.float32:
            raise DataError(f"{name}: features must be float32, found {f.dtype}")
        if isinstance(f, SparseFeatures):
            problem = f.check()
            if problem is not None:
                raise DataError(f"{name}: sparse features must be a canonical CSR: expected {problem}")
            if not f.all_finite():
                bad = int(torch.unique(f.row_index()[~torch.isfinite(f.values)]).numel())
                raise DataError(f"{name}: features must be finite, found NaN or Inf in {bad} rows")
        # Fast path: a finite sum implies finite entries; only a non-finite sum (NaN/Inf, or
        # an overflow of large finite values) pays for the element-wise check.
        elif f.numel() and not bool(torch.isfinite(f.sum())) and not bool(torch.isfinite(f).all()):
            bad = int((~torch.isfinite(f)).any(dim=1).sum())
            raise DataError(f"{name}: features must be finite, found NaN or Inf in {bad} rows")
        y = self.labels
        if y.dtype != torch.int64 or y.dim() != 1 or y.numel() != n:
            raise DataError(
                f"{name}: labels must be int64 of shape [N={n}], found dtype {y.dtype} "
                f"shape {tuple(y.shape)}"
            )
        if self.num_classes < 1:
            raise DataError(f"{name}: num_classes must be >= 1, found {self.num_classes}")
        if n and (int(y.min()) < -1 or int(y.max()) >= self.num_classes):
            raise DataError(
                f"{name}: labels must lie in [0, {self.num_classes}) or be -1 (no label), "
                f"found range [{int(y.min())}, {int(y.max())}]"
            )
        masks = {"train_mask": self.train_mask, "val_mask": self.val_mask, "test_mask": self.test_mask}
        for key, m in masks.items():
            if m.dtype != torch.bool or m.shape != (n,):
                raise DataError(
                    f"{name}: {key} must be bool of shape [N={n}], found dtype {m.dtype} "
                    f"shape {tuple(m.shape)}"
                )
            unlabeled = int((m & (y < 0)).sum())
            if unlabeled:
                raise DataError(f"{name}: {key} contains {unlabeled} vertices without a label (-1)")
        for a, b in (("train_mask", "val_mask"), ("train_mask", "test_mask"), ("val_mask", "test_mask")):
            both = int((masks[a] & masks[b]).sum())
            if both:
                raise DataError(f"{name}: {a} and {b} must not overlap, found {both} vertices in both")
        if require_train and not bool(self.train_mask.any()):
            raise DataError(f"{name}: the train set must not be empty, found 0 training vertices")
        return self

    # ------------------------------------------------------------ construction
    @classmethod
    def from_edge_index(
        cls,
        edge_index: Any,
        features: Any,
        labels: Any,
        *,
        num_nodes: int | None = None,
        train_mask: Any = None,
        val_mask: Any = None,
        test_mask: Any = None,
        num_classes: int | None = None,
        name: str = "graph",
    ) -> "Graph":
        """Build from a [2, E] (source, destination) edge list; duplicates are kept.

        Shapes: edge_index [2, E] (integer ids: float ids are refused, never truncated);
        features [N, F]; labels [N].
        """
        ei = torch.as_tensor(np.asarray(edge_index) if not isinstance(edge_index, torch.Tensor) else edge_index)
        if ei.dtype.is_floating_point or ei.dtype.is_complex or ei.dtype == torch.bool:
            raise DataError(f"{name}: edge_index must hold integer ids, found dtype {ei.dtype}")
        ei = ei.to(torch.int64).contiguous()
        if ei.dim() != 2 or ei.shape[0] != 2:
            raise DataError(f"{name}: edge_index must have shape [2, E], found {tuple(ei.shape)}")
        feats = sparse_of(features)
        if feats is None:
            feats = torch.as_tensor(np.asarray(features) if not isinstance(features, torch.Tensor) else features)
        n = int(num_nodes) if num_nodes is not None else int(feats.shape[0])
        if ei.numel():
            lo, hi = int(ei.min()), int(ei.max())
            if lo < 0 or hi >= n:
                raise DataError(f"{name}: edge ids must lie in [0, {n}), found range [{lo}, {hi}]")
        src, dst = ei[0], ei[1]
        indptr, indices = _csr_from_coo(src, dst, n)
        return cls._assemble(indptr, indices, feats, labels, train_mask, val_mask, test_mask, num_classes, name)

    @classmethod
    def from_scipy(
        cls,
        adj: Any,
        features: Any,
        labels: Any,
        *,
        train_mask: Any = None,
        val_mask: Any = None,
        test_mask: Any = None,
        num_classes: int | None = None,
        name: str = "graph",
        adj_is_in_csr: bool = True,
    ) -> "Graph":
        """Build from a scipy sparse adjacency.

        With ``adj_is_in_csr`` (default) entry (v, u) means edge u -> v, i.e. the
        matrix already is the in-edge CSR (for a symmetric matrix both readings agree).
        Otherwise entry (u, v) means u -> v and the matrix is transposed.
        """
        import scipy.sparse as sp

        if not sp.issparse(adj):
            raise DataError(f"{name}: adjacency must be a scipy sparse matrix, found {type(adj).__name__}")
        if adj.shape[0] != adj.shape[1]:
            raise DataError(f"{name}: adjacency must be square, found shape {adj.shape}")
        m = sp.csr_matrix(adj if adj_is_in_csr else adj.T)
        m.sort_indices()
        indptr = torch.from_numpy(m.indptr.astype(np.int64))
        indices = torch.from_numpy(m.indices.astype(np.int64))
        return cls._assemble(indptr, indices, features, labels, train_mask, val_mask, test_mask, num_classes, name)

    @classmethod
    def _assemble(cls, indptr, indices, features, labels, train_mask, val_mask, test_mask, num_classes, name) -> "Graph":
        feats = sparse_of(features)  # a sparse matrix stays sparse (float32)
        if feats is None:
            feats = torch.as_tensor(np.asarray(features) if not isinstance(features, torch.Tensor) else features)
            feats = feats.to(torch.float32).contiguous()
        n = int(indptr.numel() - 1)
        if feats.dim() != 2 or feats.shape[0] != n:
            raise DataError(f"{name}: features must have shape [N={n}, F], found {tuple(feats.shape)}")
        y = _as_long(labels).reshape(-1)
        if y.numel() != n:
            raise DataError(f"{name}: labels must have N={n} entries, found {y.numel()}")
        if num_classes is None:
            num_classes = int(y.max()) + 1 if y.numel() and int(y.max()) >= 0 else 1
        g = cls(
            indptr=indptr.to(torch.int64).contiguous(),
            indices=indices.to(torch.int64).contiguous(),
            features=feats,
            labels=y,
            train_mask=_as_mask(train_mask, n, "train", name),
            val_mask=_as_mask(val_mask, n, "val", name),
            test_mask=_as_mask(test_mask, n, "test", name),
            num_classes=int(num_classes),
            name=name,
        )
        return g

    # ------------------------------------------------------------ conversions
    def to_scipy(self):
        """scipy CSR [N, N] with entry (v, u) = multiplicity of edge u -> v."""
        import scipy.sparse as sp

        n = self.num_nodes
        data = np.ones(self.num_edges, dtype=np.float32)
        return sp.csr_matrix((data, self.indices.numpy(), self.indptr.numpy()), shape=(n, n))

    def to_pyg(self):
        """A ``torch_geometric.data.Data`` (edge_index rows = source, target); sparse
        features are densified (PyG layers take dense ``x``)."""
        from torch_geometric.data import Data  # optional dependency

        return Data(
            x=self.features.to_dense() if self.sparse_features else self.features,
            edge_index=self.edge_index(),
            y=self.labels,
            train_mask=self.train_mask,
            val_mask=self.val_mask,
            test_mask=self.test_mask,
            num_nodes=self.num_nodes,
        )

    @classmethod
    def from_pyg(cls, data: Any, *, name: str = "pyg", num_classes: int | None = None) -> "Graph":
        """From a ``torch_geometric.data.Data`` with x, edge_index, y and optional masks."""
        n = int(data.num_nodes)
        x = data.x if getattr(data, "x", None) is not None else torch.zeros(n, 0)
        y = data.y if getattr(data, "y", None) is not None else torch.full((n,), -1)
        if y.dim() > 1:
            y = y.reshape(-1)
        return cls.from_edge_index(
            data.edge_index, x, y, num_nodes=n,
            train_mask=getattr(data, "train_mask", None),
            val_mask=getattr(data, "val_mask", None),
            test_mask=getattr(data, "test_mask", None),
            num_classes=num_classes, name=name,
        )

    @classmethod
    def from_dgl(cls, g: Any, *, name: str = "dgl", num_classes: int | None = None,
                 feat_key: str = "feat", label_key: str = "label") -> "Graph":
        """From a DGL graph, read only through ``g.edges()``, ``g.num_nodes()`` and
        ``g.ndata``: DGL itself is never imported by gnnpipe."""
        src, dst = g.edges()
        nd = g.ndata
        n = int(g.num_nodes())

        def get(key: str, default: Any = None) -> Any:
            return nd[key] if key in nd else default

        return cls.from_edge_index(
            torch.stack([torch.as_tensor(src), torch.as_tensor(dst)]),
            get(feat_key, torch.zeros(n, 0)), get(label_key, torch.full((n,), -1)),
            num_nodes=n,
            train_mask=get("train_mask"), val_mask=get("val_mask"), test_mask=get("test_mask"),
            num_classes=num_classes, name=name,
        )

    # -------------------------------------------------------- transformations
    def _with_coo(self, src: torch.Tensor, dst: torch.Tensor) -> "Graph":
        indptr, indices = _csr_from_coo(src, dst, self.num_nodes)
        return self.replace(indptr=indptr, indices=indices)

    def symmetrize(self) -> "Graph":
        """Add the reverse of every edge and drop duplicate edges."""
        dst = self.dst_index()
        src = torch.cat([self.indices, dst])
        dst2 = torch.cat([dst, self.indices])
        return self._with_coo(src, dst2).remove_duplicate_edges()

    def remove_self_loops(self) -> "Graph":
        dst = self.dst_index()
        keep = self.indices != dst
        return self._with_coo(self.indices[keep], dst[keep])

    def add_self_loops(self) -> "Graph":
        """Add a self-loop to every vertex that has none."""
        g = self.remove_self_loops()
        ar = torch.arange(self.num_nodes)
        dst = g.dst_index()
        return g._with_coo(torch.cat([g.indices, ar]), torch.cat([dst, ar]))

    def remove_duplicate_edges(self) -> "Graph":
        """Keep one copy of every repeated edge (CSR rows are sorted, so repeats are adjacent)."""
        if self.num_edges == 0:
            return self
        dst = self.dst_index()
        n = max(self.num_nodes, 1)
        key = dst * n + self.indices
        keep = torch.ones(key.numel(), dtype=torch.bool)
        keep[1:] = key[1:] != key[:-1]
        return self._with_coo(self.indices[keep], dst[keep])

    def row_normalize_features(self) -> "Graph":
        """Features scaled so that every row sums to 1; all-zero rows stay zero. This is
        Kipf & Welling's (and GCNII's) preprocessing of bag-of-words features. Sparse
        features stay sparse (same pattern, scaled values)."""
        x = self.features
        if isinstance(x, SparseFeatures):
            return self.replace(features=x.row_normalize())
        s = x.sum(dim=1, keepdim=True)
        return self.replace(features=torch.where(s > 0, x / s.clamp_min(1e-12), x).contiguous())

    def is_symmetric(self) -> bool:
        a = self.to_scipy()
        return (a != a.T).nnz == 0


def _csr_from_coo(src: torch.Tensor, dst: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """CSR of in-edges (rows = dst, sorted sources) from COO edge lists.

    One sort of the key ``dst * n + src``: equal keys are identical edges, so an
    unstable numpy sort suffices (several times faster than a stable torch argsort).
    """
    src_np = src.to(torch.int64).numpy()
    dst_np = dst.to(torch.int64).numpy()
    key = np.sort(dst_np * max(n, 1) + src_np)
    indices = torch.from_numpy(key % max(n, 1))
    counts = np.bincount(dst_np, minlength=n) if dst_np.size else np.zeros(n, dtype=np.int64)
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.from_numpy(np.cumsum(counts))
    return indptr, indices
