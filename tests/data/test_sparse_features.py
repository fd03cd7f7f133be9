"""Sparse (CSR) features: the SparseFeatures type, the loaders' density rule and the
``sparse_features`` / ``sparse_threshold`` options, validation, row normalisation and
the converted-graph cache (exact round trip, an entry of the non-zeros only)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gnnpipe.data import Graph, load_dataset
from gnnpipe.data.cache import cache_dir, read_graph, write_graph
from gnnpipe.data.sparse import DEFAULT_SPARSE_THRESHOLD, SparseFeatures, choose_layout
from gnnpipe.errors import DataError

from .writers import write_graphdata, write_hetero


def _matrix(n: int = 30, f: int = 20, density: float = 0.1, seed: int = 0, integral: bool = False) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    v = torch.randint(1, 5, (n, f), generator=gen).float() if integral else torch.randn(n, f, generator=gen)
    x = v * (torch.rand(n, f, generator=gen) < density)
    x[2] = 0.0
    return x


def _graph(x: torch.Tensor, seed: int = 0) -> Graph:
    n = x.shape[0]
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, size=(2, 4 * n))
    return Graph.from_edge_index(ei, x, rng.integers(0, 3, n), train_mask=np.arange(n) < 10,
                                 test_mask=np.arange(n) >= 20, name="bow").validate()


# ------------------------------------------------------------------ the type
def test_round_trips_and_row_selection_match_dense():
    x = _matrix()
    s = SparseFeatures.from_dense(x)
    assert s.check() is None and s.shape == x.shape and s.dtype == torch.float32 and s.nnz == int((x != 0).sum())
    assert torch.equal(s.to_dense(), x)
    assert torch.equal(SparseFeatures.from_scipy(sp.csr_matrix(x.numpy())).to_dense(), x)
    assert torch.equal(SparseFeatures.from_torch(x.to_sparse_coo()).to_dense(), x)
    assert torch.equal(torch.from_numpy(s.to_scipy().toarray()), x)
    idx = torch.tensor([4, 2, 2, 29, -1, 0])
    for rows in (idx, idx.tolist(), np.asarray(idx)):
        assert torch.equal(s[rows].to_dense(), x[idx])
    assert torch.equal(s.index_select(0, idx.abs()).to_dense(), x.index_select(0, idx.abs()))
    mask = x[:, 0] != 0
    assert torch.equal(s[mask].to_dense(), x[mask])
    for sl in (slice(3, 17), slice(None, None, 3), slice(25, 99), slice(10, 5)):
        assert torch.equal(s[sl].to_dense(), x[sl])
    assert torch.equal(s[torch.tensor([], dtype=torch.int64)].to_dense(), x[:0])
    assert all(s[idx].check() is None for _ in range(1))
    with pytest.raises(IndexError):
        s[:, 1:3]
    with pytest.raises(IndexError):
        s[torch.tensor([30])]


def test_to_dtype_device_pickle_and_equality():
    s = SparseFeatures.from_dense(_matrix())
    d = s.to(torch.float64)
    assert d.dtype == torch.float64 and torch.equal(d.to_dense(), s.to_dense().double())
    assert s.to(device="cpu", dtype=torch.float32) is s  # nothing to change: the same object
    assert s.to("cpu", torch.float64).dtype == torch.float64 and s.double().equal(d)
    assert pickle.loads(pickle.dumps(s)).equal(s)
    assert s.equal(s.to_dense()) and not s.equal(s.to_dense() + 1)
    with pytest.raises(TypeError, match="to_dense"):
        np.asarray(s)


def test_choose_layout_follows_the_threshold():
    x = _matrix(density=0.05)
    density = float((x != 0).float().mean())
    assert isinstance(choose_layout(x, "auto"), SparseFeatures)
    assert isinstance(choose_layout(x, "auto", threshold=density / 2), torch.Tensor)
    assert isinstance(choose_layout(x, True), SparseFeatures)
    dense = _matrix(density=0.9)
    assert isinstance(choose_layout(dense, "auto"), torch.Tensor)
    assert choose_layout(dense, "auto") is dense  # already dense: no copy
    assert isinstance(choose_layout(sp.csr_matrix(dense.numpy()), "auto"), torch.Tensor)
    assert isinstance(choose_layout(sp.csr_matrix(x.numpy()), False), torch.Tensor)
    with pytest.raises(ValueError, match="sparse_features"):
        choose_layout(x, "maybe")


def test_graph_validate_and_layout_conversion():
    x = _matrix()
    g = _graph(x)
    s = g.with_feature_layout(True)
    assert s.sparse_features and not g.sparse_features and s.validate() is s
    assert torch.equal(s.features.to_dense(), g.features) and s.num_features == g.num_features
    assert s.with_feature_layout(True) is s and g.with_feature_layout(False) is g
    assert torch.equal(s.with_feature_layout(False).features, g.features)
    assert s.feature_density == pytest.approx(g.feature_density)
    f = s.features
    cases = [
        (SparseFeatures(f.crow, f.col, f.values.double(), f.shape), "float32"),
        (SparseFeatures(f.crow, f.col, torch.where(torch.arange(f.nnz) == 3, float("nan"), f.values), f.shape),
         "finite"),
        (SparseFeatures(f.crow, f.col, f.values, (x.shape[0] + 1, x.shape[1])), "shape"),
        (SparseFeatures(f.crow, f.col.flip(0), f.values, f.shape), "ascending"),
        (SparseFeatures(f.crow, f.col, torch.where(torch.arange(f.nnz) == 0, 0.0, f.values), f.shape), "zeros"),
        (SparseFeatures(f.crow, f.col + x.shape[1], f.values, f.shape), "column indices"),
        (x.to_sparse_csr(), "SparseFeatures"),
    ]
    for bad, needle in cases:
        with pytest.raises(DataError, match=needle) as exc:
            s.replace(features=bad).validate()
        assert "\n" not in str(exc.value)


def test_constructors_keep_a_sparse_matrix_sparse():
    x = _matrix()
    n = x.shape[0]
    ei = np.stack([np.arange(n), np.roll(np.arange(n), 1)])
    g = Graph.from_edge_index(ei, sp.csr_matrix(x.numpy()), np.zeros(n, np.int64))
    assert g.sparse_features and torch.equal(g.features.to_dense(), x)
    adj = sp.csr_matrix((np.ones(n), (ei[1], ei[0])), shape=(n, n))
    h = Graph.from_scipy(adj, sp.csr_matrix(x.numpy()), np.zeros(n, np.int64))
    assert h.sparse_features and h.features.equal(g.features)
    assert Graph.from_edge_index(ei, x, np.zeros(n, np.int64)).sparse_features is False
    assert torch.equal(g.to_pyg().x, x)


def test_row_normalize_sparse_equals_dense():
    x = _matrix(integral=True, density=0.3)
    x[4, :] = 0.0
    g = _graph(x)
    dense = g.row_normalize_features().features
    sparse = g.with_feature_layout(True).row_normalize_features()
    assert sparse.sparse_features
    assert torch.equal(sparse.features.to_dense(), dense)  # integer counts: exact sums


# ------------------------------------------------------------------ loaders
def _write_bow(path, n: int, f: int, density: float, *, scipy_attr: bool = True, seed: int = 0):
    x = _matrix(n, f, density=density, seed=seed, integral=True).numpy()
    rng = np.random.default_rng(seed)
    adj = sp.csr_matrix((np.ones(3 * n, np.float32), (rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n))),
                        shape=(n, n))
    write_graphdata(path, adj, sp.csr_matrix(x) if scipy_attr else x, np.arange(n) % 3)
    return x


@pytest.mark.parametrize("scipy_attr", [True, False])
def test_loader_keeps_csr_at_low_density_and_dense_above(tmp_path, scipy_attr):
    opts = dict(train_per_class=2, val_per_class=2)
    low = _write_bow(tmp_path / "low.npz", 60, 40, 0.04, scipy_attr=scipy_attr)
    high = _write_bow(tmp_path / "high.npz", 60, 40, 0.5, scipy_attr=scipy_attr, seed=1)
    g = load_dataset("graphdata", root=tmp_path / "low.npz", **opts)
    assert g.sparse_features and g.features.density <= DEFAULT_SPARSE_THRESHOLD
    assert torch.equal(g.features.to_dense(), torch.from_numpy(low))
    h = load_dataset("graphdata", root=tmp_path / "high.npz", **opts)
    assert not h.sparse_features and torch.equal(h.features, torch.from_numpy(high))
    # The options override the rule, through the cache (hit) and without it.
    for cache in (True, False):
        forced_dense = load_dataset("graphdata", root=tmp_path / "low.npz", sparse_features=False, cache=cache, **opts)
        assert not forced_dense.sparse_features and torch.equal(forced_dense.features, torch.from_numpy(low))
        forced = load_dataset("graphdata", root=tmp_path / "high.npz", sparse_features=True, cache=cache, **opts)
        assert forced.sparse_features and torch.equal(forced.features.to_dense(), torch.from_numpy(high))
        strict = load_dataset("graphdata", root=tmp_path / "low.npz", sparse_threshold=0.001, cache=cache, **opts)
        assert not strict.sparse_features
        loose = load_dataset("graphdata", root=tmp_path / "high.npz", sparse_threshold=0.9, cache=cache, **opts)
        assert loose.sparse_features
    normed = load_dataset("graphdata", root=tmp_path / "low.npz", normalize_features=True, **opts)
    assert normed.sparse_features and torch.equal(normed.features.to_dense(),
                                                  g.with_feature_layout(False).row_normalize_features().features)


def test_dense_file_features_at_low_density_become_csr(tmp_path):
    n = 6
    feats = np.zeros((n, 30), np.float32)
    feats[0, 3] = feats[4, 7] = 2.0
    write_hetero(tmp_path / "h.npz", feats=feats)
    g = load_dataset("heterophilous", root=tmp_path / "h.npz", split=0)
    assert g.sparse_features and torch.equal(g.features.to_dense(), torch.from_numpy(feats))


def test_option_values_are_checked_and_take_strings():
    g = load_dataset("synthetic", num_nodes=80, seed=1, sparse_features="true")
    assert g.sparse_features and g.features.density == 1.0
    assert not load_dataset("synthetic", num_nodes=80, seed=1).sparse_features  # Gaussian: dense
    with pytest.raises(DataError, match="option sparse_features"):
        load_dataset("synthetic", num_nodes=80, sparse_features="sometimes")
    with pytest.raises(DataError, match="option sparse_threshold"):
        load_dataset("synthetic", num_nodes=80, sparse_threshold=-0.5)


def test_coauthor_cs_is_sparse_and_its_cache_entry_small(datasets_root):
    g = load_dataset("coauthor_cs", root=datasets_root)
    assert g.sparse_features and g.features.shape == (18333, 6805) and g.features.nnz == 1092079
    (entry,) = [p for p in cache_dir().iterdir() if p.suffix == ".graph"]
    assert entry.stat().st_size < 8e6  # dense it was 18,333 x 6,805 x 4 bytes = 499 MB
    again = load_dataset("coauthor_cs", root=datasets_root)  # a cache hit
    assert again.features.equal(g.features) and torch.equal(again.indices, g.indices)


# ------------------------------------------------------------------ cache
@pytest.mark.parametrize("values", ["float", "small_int", "wide_int", "negative_int"])
def test_cache_round_trips_sparse_features_exactly(tmp_path, values):
    x = _matrix(n=50, f=300, density=0.05, integral=values != "float")
    if values == "wide_int":
        x = x * 40000.0
    elif values == "negative_int":
        x = -x
    g = _graph(x).with_feature_layout(True)
    write_graph(g, tmp_path / "g.graph")
    h = read_graph(tmp_path / "g.graph")
    assert h.sparse_features and h.validate() is h
    assert h.features.equal(g.features)
    assert h.features.col.dtype == torch.int64 and h.features.values.dtype == torch.float32
    for k in ("indptr", "indices", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(h, k), getattr(g, k))
    dense_path = tmp_path / "d.graph"
    write_graph(g.with_feature_layout(False), dense_path)
    assert (tmp_path / "g.graph").stat().st_size < dense_path.stat().st_size / 2
    assert torch.equal(read_graph(dense_path).features, x)
