"""Graph: validation and conversions against scipy / brute-force references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gnnpipe.data import read_graph, write_graph
from gnnpipe.data import Graph
from gnnpipe.errors import DataError


def _random_graph(n: int = 30, e: int = 120, f: int = 5, seed: int = 0, loops: bool = True) -> Graph:
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, size=(2, e))
    if loops:
        ei[:, :5] = np.arange(5)  # a few self-loops
    ei[:, 5:8] = ei[:, 8:11]  # a few duplicates
    x = rng.standard_normal((n, f)).astype(np.float32)
    y = rng.integers(0, 3, size=n)
    return Graph.from_edge_index(ei, x, y, train_mask=np.arange(n) < 10, val_mask=(np.arange(n) >= 10) & (np.arange(n) < 20),
                                 test_mask=np.arange(n) >= 20, name="rand")


def _dense(g: Graph) -> np.ndarray:
    """[N, N] multiplicity matrix, entry (v, u) = number of edges u -> v."""
    a = np.zeros((g.num_nodes, g.num_nodes), dtype=np.int64)
    src, dst = g.edge_index().numpy()
    np.add.at(a, (dst, src), 1)
    return a


def test_from_edge_index_builds_sorted_in_csr_with_duplicates():
    rng = np.random.default_rng(1)
    ei = rng.integers(0, 30, size=(2, 120))
    g = Graph.from_edge_index(ei, np.zeros((30, 2)), np.zeros(30, dtype=np.int64), train_mask=np.arange(30) < 3)
    ref = np.zeros((30, 30), dtype=np.int64)
    np.add.at(ref, (ei[1], ei[0]), 1)
    assert np.array_equal(_dense(g), ref)
    assert torch.equal(g.in_degree, torch.from_numpy(ref.sum(1)))
    for v in range(30):
        row = g.indices[g.indptr[v]:g.indptr[v + 1]]
        assert torch.equal(row, torch.sort(row).values)
    g.validate()


def test_from_scipy_both_orientations():
    rng = np.random.default_rng(2)
    a = sp.random(20, 20, density=0.2, random_state=3, format="csr")
    x, y = rng.standard_normal((20, 3)), rng.integers(0, 2, 20)
    g_in = Graph.from_scipy(a, x, y)  # entry (v, u) means u -> v
    g_out = Graph.from_scipy(a, x, y, adj_is_in_csr=False)  # entry (u, v) means u -> v
    ref = (a.toarray() != 0).astype(np.int64)
    assert np.array_equal(_dense(g_in), ref)
    assert np.array_equal(_dense(g_out), ref.T)
    assert np.array_equal(g_in.to_scipy().toarray(), ref)


def test_symmetrize_self_loops_and_duplicates_match_dense_references():
    g = _random_graph()
    a = _dense(g)
    sym = g.symmetrize()
    assert np.array_equal(_dense(sym), ((a + a.T) > 0).astype(np.int64))
    assert sym.is_symmetric() and not g.is_symmetric()
    no_loop = g.remove_self_loops()
    ref = a.copy()
    np.fill_diagonal(ref, 0)
    assert np.array_equal(_dense(no_loop), ref)
    with_loop = g.add_self_loops()
    ref2 = ref.copy()
    np.fill_diagonal(ref2, 1)
    assert np.array_equal(_dense(with_loop), ref2)
    dedup = g.remove_duplicate_edges()
    assert np.array_equal(_dense(dedup), (a > 0).astype(np.int64))
    for h in (sym, no_loop, with_loop, dedup):
        h.validate()
        assert torch.equal(h.features, g.features) and torch.equal(h.labels, g.labels)


def test_pyg_round_trip():
    pytest.importorskip("torch_geometric")
    g = _random_graph()
    data = g.to_pyg()
    assert torch.equal(data.edge_index, g.edge_index())
    h = Graph.from_pyg(data, num_classes=g.num_classes)
    for field in ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(h, field), getattr(g, field)), field
    assert h.num_classes == g.num_classes


class _FakeDGLGraph:
    """The three things gnnpipe reads from a DGL graph: edges(), num_nodes(), ndata."""

    def __init__(self, src, dst, n, ndata):
        self._src, self._dst, self._n, self.ndata = src, dst, n, ndata

    def edges(self):
        return self._src, self._dst

    def num_nodes(self):
        return self._n


def test_from_dgl_reads_edges_num_nodes_and_ndata():
    g = _random_graph()
    src, dst = g.edge_index()
    fake = _FakeDGLGraph(src, dst, g.num_nodes, {
        "feat": g.features, "label": g.labels,
        "train_mask": g.train_mask, "val_mask": g.val_mask, "test_mask": g.test_mask,
    })
    h = Graph.from_dgl(fake)
    for field in ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(h, field), getattr(g, field)), field
    bare = Graph.from_dgl(_FakeDGLGraph(src, dst, g.num_nodes, {}))
    assert bare.num_features == 0 and bool((bare.labels == -1).all())


def test_with_masks_accepts_index_lists():
    g = _random_graph()
    h = g.with_masks(np.array([0, 3]), np.array([5]), torch.arange(20, 30))
    assert h.train_mask.nonzero().flatten().tolist() == [0, 3]
    assert h.val_mask.nonzero().flatten().tolist() == [5]
    assert h.test_mask.nonzero().flatten().tolist() == list(range(20, 30))


def _broken(g: Graph, **changes) -> Graph:
    return g.replace(**changes)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(indices=torch.tensor([0, 1, 99])), "edge source ids must lie in"),
        (dict(indices=torch.tensor([0, -1, 2])), "edge source ids must lie in"),
        (dict(features=torch.zeros(7, 2)), "features must have shape"),
        (dict(features=torch.tensor([[0.0, float("nan")]] * 4)), "finite"),
        (dict(features=torch.tensor([[0.0, float("inf")]] * 4)), "finite"),
        (dict(labels=torch.tensor([0, 1, 0])), "labels must be int64 of shape"),
        (dict(labels=torch.tensor([0, 1, 5, 0])), "labels must lie in"),
        (dict(train_mask=torch.zeros(4, dtype=torch.bool)), "train set must not be empty"),
        (dict(val_mask=torch.tensor([True, False, False, False])), "must not overlap"),
        (dict(indptr=torch.tensor([0, 2, 1, 3, 3])), "non-decreasing"),
        (dict(indices=torch.tensor([1, 0, 2])), "sorted within each CSR row"),
    ],
)
def test_validate_rejects(changes, message):
    good = Graph.from_edge_index(
        torch.tensor([[0, 1, 2], [0, 0, 2]]), torch.zeros(4, 2), torch.tensor([0, 1, 0, 1]),
        train_mask=torch.tensor([True, False, False, False]), test_mask=torch.tensor([False, False, True, True]),
        name="tiny",
    )
    good.validate()
    with pytest.raises(DataError, match=message) as info:
        _broken(good, **changes).validate()
    assert str(info.value).startswith("tiny:") and "\n" not in str(info.value)


def test_from_edge_index_rejects_out_of_range_and_mismatched_lengths():
    with pytest.raises(DataError, match="edge ids must lie in"):
        Graph.from_edge_index([[0, 4], [1, 0]], np.zeros((4, 1)), np.zeros(4))
    with pytest.raises(DataError, match="edge ids must lie in"):
        Graph.from_edge_index([[0, -1], [1, 0]], np.zeros((4, 1)), np.zeros(4))
    with pytest.raises(DataError, match="labels must have N=4"):
        Graph.from_edge_index([[0], [1]], np.zeros((4, 1)), np.zeros(3))


@pytest.mark.parametrize("edge_index", [[[0.0, 1.5], [1.0, 0.0]], torch.tensor([[0.0, 1.0], [1.0, 0.0]]),
                                        np.array([[True, False], [False, True]])])
def test_from_edge_index_refuses_ids_that_are_not_integers(edge_index):
    with pytest.raises(DataError, match="edge_index must hold integer ids, found dtype") as info:
        Graph.from_edge_index(edge_index, np.zeros((4, 1)), np.zeros(4, dtype=np.int64))
    assert str(info.value).startswith("graph:") and "\n" not in str(info.value)


def test_save_load_round_trip(tmp_path):
    g = _random_graph()
    write_graph(g, tmp_path / "g.graph")
    h = read_graph(tmp_path / "g.graph")
    for field in ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(h, field), getattr(g, field)), field
    assert (h.num_classes, h.name) == (g.num_classes, g.name)
    h.features[0, 0] = 123.0  # copy-on-write mapping: writable, the file is unchanged
    assert torch.equal(read_graph(tmp_path / "g.graph").features, g.features)
