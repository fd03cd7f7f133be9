"""Readers on small fixtures written in each on-disk layout, and their bad-input errors."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gnnpipe.data import Graph, list_datasets, load_dataset, load_path
from gnnpipe.errors import ConfigError, DataError
from tests.data.writers import (RING, RING_ATTR, write_geom_gcn, write_graphdata, write_hetero, write_linqs,
                                write_musae, write_planetoid, write_sparsegraph)

# ----------------------------------------------------------------------------- OGB
# The fixture writer and its arrays come from the `ogb` fixture (tests/data/conftest.py).

def _edge_set(g: Graph) -> set[tuple[int, int]]:
    return set(map(tuple, g.edge_index().T.tolist()))


def test_ogb_layout_loads_exactly(tmp_path, ogb):
    ogb.write(tmp_path)
    g = load_dataset("ogbn-arxiv", root=tmp_path)
    assert g.name == "ogbn-arxiv" and g.num_nodes == ogb.N
    assert torch.equal(g.features, torch.from_numpy(ogb.FEATS))
    assert torch.equal(g.labels, torch.from_numpy(ogb.LABELS))
    sym = {(int(a), int(b)) for a, b in ogb.EDGES} | {(int(b), int(a)) for a, b in ogb.EDGES}
    assert _edge_set(g) == sym
    for mask, key in ((g.train_mask, "train"), (g.val_mask, "valid"), (g.test_mask, "test")):
        assert mask.nonzero().flatten().tolist() == ogb.SPLIT[key]
    directed = load_dataset("ogbn-arxiv", root=tmp_path, symmetrize=False)  # arxiv: no inverse edges
    assert _edge_set(directed) == {(int(a), int(b)) for a, b in ogb.EDGES}


def test_ogb_products_adds_inverse_edges_and_uses_sales_ranking(tmp_path, ogb):
    ogb.write(tmp_path, name="ogbn-products", split_type="sales_ranking")
    g = load_dataset("ogbn-products", root=tmp_path, symmetrize=False)
    assert g.is_symmetric() and g.num_edges == 2 * len(ogb.EDGES)
    # The same folder through the format name and through load_path's guess.
    folder = tmp_path / "ogbn_products"
    for h in (load_dataset("ogb", root=folder), load_path(folder)):
        assert torch.equal(h.indices, load_dataset("ogbn-products", root=tmp_path).indices)


def test_ogb_missing_label_is_minus_one_and_in_no_mask(tmp_path, ogb):
    labels = np.array([0, 1, 2, 0, 1, 2, np.nan])
    d = ogb.write(tmp_path, labels=labels)
    ogb.gz(d / "split" / "time" / "test.csv.gz", "5\n")
    g = load_dataset("ogb", root=d)
    assert int(g.labels[6]) == -1 and g.test_mask.nonzero().flatten().tolist() == [5]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d, ogb: ogb.gz(d / "raw" / "edge.csv.gz", "0,1\n1,7\n2,3\n3,0\n4,5\n5,6\n6,4\n0,4\n"), "edge ids must lie in"),
        (lambda d, ogb: ogb.gz(d / "raw" / "edge.csv.gz", "0,1\n-1,2\n2,3\n3,0\n4,5\n5,6\n6,4\n0,4\n"), "edge ids must lie in"),
        (lambda d, ogb: ogb.gz(d / "raw" / "node-label.csv.gz", "0\n1\n2\n"), "node-label.csv.gz: expected N=7 rows"),
        (lambda d, ogb: ogb.gz(d / "raw" / "node-feat.csv.gz", "0,0,0\n" * 6), "node-feat.csv.gz: expected N=7 rows"),
        (lambda d, ogb: ogb.gz(d / "raw" / "node-feat.csv.gz", "0,nan,0\n" * 7), "finite"),
        (lambda d, ogb: ogb.gz(d / "raw" / "edge.csv.gz", "0,1\n1,2\n"), "expected 8 rows"),
        (lambda d, ogb: ogb.gz(d / "split" / "time" / "valid.csv.gz", "2\n3\n"), "must not overlap"),
        (lambda d, ogb: ogb.gz(d / "split" / "time" / "train.csv.gz", ""), "train set must not be empty"),
        (lambda d, ogb: (d / "raw" / "edge.csv.gz").write_bytes(gzip.compress(b"0,1\n" * 50)[:20]), "truncated or corrupt"),
        (lambda d, ogb: (d / "raw" / "num-node-list.csv.gz").unlink(), "num-node-list.csv.gz"),
    ],
)
def test_ogb_bad_input_is_one_line_data_error(tmp_path, damage, message, ogb):
    d = ogb.write(tmp_path)
    damage(d, ogb)
    with pytest.raises(DataError, match=message) as info:
        load_dataset("ogbn-arxiv", root=tmp_path, cache=False)
    assert "\n" not in str(info.value)


# ----------------------------------------------------------------------------- Planetoid
def test_planetoid_assembly_places_tx_rows_at_test_index_ids(tmp_path):
    allx, tx, test_idx = write_planetoid(tmp_path)
    g = load_dataset("planetoid", root=tmp_path, name="tiny", num_val=4)
    assert g.num_nodes == 10 and g.num_classes == 3
    feats = np.zeros((10, 4), dtype=np.float32)
    feats[:6] = allx
    feats[test_idx] = tx  # tx row i belongs to the i-th id of test.index
    assert torch.equal(g.features, torch.from_numpy(feats))
    assert g.labels.tolist() == [0, 1, 2, 0, 1, 2, -1, 1, 0, 2]
    assert g.train_mask.nonzero().flatten().tolist() == [0, 1]
    assert g.val_mask.nonzero().flatten().tolist() == [2, 3, 4, 5]
    assert g.test_mask.nonzero().flatten().tolist() == [7, 8, 9]
    assert g.is_symmetric() and (8, 8) in _edge_set(g) and (0, 9) in _edge_set(g) and (9, 0) in _edge_set(g)
    assert load_path(tmp_path, num_val=4).num_edges == g.num_edges


def test_planetoid_missing_file_is_named(tmp_path):
    write_planetoid(tmp_path)
    (tmp_path / "ind.tiny.allx").unlink()
    with pytest.raises(DataError, match=r"ind\.tiny\.allx"):
        load_dataset("planetoid", root=tmp_path, name="tiny", num_val=4)
    assert load_dataset("planetoid", root=tmp_path, name="tiny", structure_only=True, num_val=4).num_features == 0


def test_planetoid_truncated_pickle(tmp_path):
    write_planetoid(tmp_path)
    p = tmp_path / "ind.tiny.tx"
    p.write_bytes(p.read_bytes()[:40])
    with pytest.raises(DataError, match=r"ind\.tiny\.tx.*truncated or corrupt"):
        load_dataset("planetoid", root=tmp_path, name="tiny", num_val=4, cache=False)


# ----------------------------------------------------------------------------- npz layouts
def test_heterophilous_fixture(tmp_path):
    path = write_hetero(tmp_path / "h.npz")
    g = load_dataset("heterophilous", root=path)
    assert g.is_symmetric() and g.num_edges == 10
    assert torch.equal(g.features, torch.arange(12, dtype=torch.float32).reshape(6, 2))
    assert g.train_mask.nonzero().flatten().tolist() == [0, 1]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(edges=np.array([[0, 6]])), "edge ids must lie in"),
        (dict(edges=np.array([[-1, 2]])), "edge ids must lie in"),
        (dict(labels=np.array([0, 1, 0])), "labels must have N=6"),
        (dict(feats=np.array([[np.inf, 0.0]] * 6, dtype=np.float32)), "finite"),
        (dict(feats=np.array([[np.nan, 0.0]] * 6, dtype=np.float32)), "finite"),
        (dict(train=np.zeros((2, 6), dtype=bool)), "train set must not be empty"),
        (dict(val=np.stack([np.arange(6) < 2] * 2)), "must not overlap"),
    ],
)
def test_heterophilous_bad_input(tmp_path, kwargs, message):
    path = write_hetero(tmp_path / "bad.npz", **kwargs)
    with pytest.raises(DataError, match=message) as info:
        load_dataset("heterophilous", root=path)
    assert "\n" not in str(info.value)


def test_sparsegraph_both_key_layouts_and_missing_features(tmp_path):
    adj, attr, labels = RING, RING_ATTR, np.array([0, 1, 0, 1])
    write_sparsegraph(tmp_path / "a.npz")
    np.savez(tmp_path / "b.npz", **{"adj_matrix.data": adj.data, "adj_matrix.indices": adj.indices,
                                    "adj_matrix.indptr": adj.indptr, "adj_matrix.shape": adj.shape,
                                    "attr_matrix.data": attr.data, "attr_matrix.indices": attr.indices,
                                    "attr_matrix.indptr": attr.indptr, "attr_matrix.shape": attr.shape,
                                    "labels": labels})
    write_sparsegraph(tmp_path / "c.npz", with_attr=False)
    a = load_dataset("sparsegraph", root=tmp_path / "a.npz", train_per_class=1, val_per_class=1)
    b = load_path(tmp_path / "b.npz", train_per_class=1, val_per_class=1)
    c = load_dataset("sparsegraph", root=tmp_path / "c.npz", train_per_class=1, val_per_class=1)
    for g in (a, b, c):
        assert _edge_set(g) == {(0, 1), (1, 2), (2, 3), (3, 0), (1, 0), (2, 1), (3, 2), (0, 3)}
    assert torch.equal(a.features, torch.from_numpy(attr.toarray())) and torch.equal(b.features, a.features)
    assert torch.equal(c.features, torch.eye(4))
    ones = load_dataset("sparsegraph", root=tmp_path / "c.npz", missing_features="ones", train_per_class=1)
    assert torch.equal(ones.features, torch.ones(4, 1))
    assert (int(a.train_mask.sum()), int(a.val_mask.sum()), int(a.test_mask.sum())) == (2, 2, 0)


def test_per_class_split_is_seeded_and_disjoint(tmp_path):
    write_hetero(tmp_path / "x.npz")
    y = torch.tensor([0, 1, 2] * 30)
    from gnnpipe.data.splits import per_class_split

    a = per_class_split(y, 3, train_per_class=5, val_per_class=7, seed=1)
    b = per_class_split(y, 3, train_per_class=5, val_per_class=7, seed=1)
    c = per_class_split(y, 3, train_per_class=5, val_per_class=7, seed=2)
    assert all(torch.equal(u, v) for u, v in zip(a, b)) and not torch.equal(a[0], c[0])
    tr, va, te = a
    assert torch.bincount(y[tr]).tolist() == [5, 5, 5] and torch.bincount(y[va]).tolist() == [7, 7, 7]
    assert not bool((tr & va).any() | (tr & te).any() | (va & te).any()) and bool((tr | va | te).all())


# ----------------------------------------------------------------------------- text layouts
def test_geom_gcn_text_dense_and_index_features(tmp_path):
    dense = write_geom_gcn(tmp_path / "dense")
    g = load_dataset("geom-gcn", root=dense, train_per_class=1, val_per_class=0)
    assert torch.equal(g.features, torch.tensor([[1.0, 0, 0], [0, 1, 1], [0, 0, 1]]))
    assert g.labels.tolist() == [0, 1, 1] and g.num_edges == 4
    film = write_geom_gcn(tmp_path / "film", features="node_id\tfeature(feature_amount:4)\tlabel\n"
                          "0\t3,1\t0\n1\t0\t1\n2\t4,4\t1\n", edges="node_id\tnode_id\n0\t1\n")
    h = load_path(film, train_per_class=1, val_per_class=0)
    assert torch.equal(h.features, torch.tensor([[0.0, 1, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 1]]))


def test_musae_fixture(tmp_path):
    write_musae(tmp_path)
    g = load_dataset("musae", root=tmp_path, prefix="toy", train_per_class=1, val_per_class=0)
    assert torch.equal(g.features, torch.tensor([[1.0, 0, 1], [0, 1, 0], [0, 0, 0], [0, 0, 1]]))
    assert g.labels.tolist() == [0, 1, 0, 1] and g.num_edges == 6
    (tmp_path / "toy_edges.csv").write_text("id_1,id_2\n0,1\n1,4\n")
    with pytest.raises(DataError, match="edge ids must lie in"):
        load_dataset("musae", root=tmp_path, prefix="toy", cache=False)


def test_linqs_tgz_fixture_without_extraction(tmp_path):
    path = write_linqs(tmp_path / "toy.tgz")
    g = load_path(path, train_per_class=1, val_per_class=0)
    assert torch.equal(g.features, torch.tensor([[1.0, 0], [0, 1], [1, 1]]))
    assert g.labels.tolist() == [0, 1, 0]
    assert _edge_set(g) == {(0, 1), (1, 0), (1, 2), (2, 1)}  # the citation of a missing paper is dropped


# ----------------------------------------------------------------------------- registry
def test_unknown_name_lists_known_names():
    with pytest.raises(DataError) as info:
        load_dataset("no-such-graph", root=".")
    msg = str(info.value)
    assert "no-such-graph" in msg and all(n in msg for n in list_datasets())


def test_root_from_environment_and_missing_root(tmp_path, monkeypatch, ogb):
    monkeypatch.delenv("GNNPIPE_DATA_ROOT", raising=False)
    with pytest.raises(DataError, match="GNNPIPE_DATA_ROOT"):
        load_dataset("cora")
    with pytest.raises(DataError, match="does-not-exist"):
        load_dataset("cora", root=tmp_path / "does-not-exist")
    with pytest.raises(DataError, match=r"planetoid.*no such path"):
        load_dataset("cora", root=tmp_path)  # root exists, the folder does not
    (tmp_path / "planetoid").mkdir()
    with pytest.raises(DataError, match=r"ind\.cora\.x"):
        load_dataset("cora", root=tmp_path)  # the folder exists, its files do not
    ogb.write(tmp_path)
    monkeypatch.setenv("GNNPIPE_DATA_ROOT", str(tmp_path))
    assert load_dataset("ogbn-arxiv").num_nodes == ogb.N


def test_unknown_option_is_config_error(tmp_path, ogb):
    ogb.write(tmp_path)
    with pytest.raises(ConfigError, match="bogus"):
        load_dataset("ogbn-arxiv", root=tmp_path, bogus=1)
    with pytest.raises(ConfigError, match="bogus"):
        load_dataset("synthetic", num_nodes=100, bogus=1)


def test_list_datasets_covers_every_shared_folder():
    names = list_datasets()
    assert names == sorted(names) and "synthetic" in names
    for n in ("cora", "citeseer", "pubmed", "gnnbench-cora", "cora_ml", "amazon_photo", "tolokers",
              "geom-film", "facebook", "linqs-citeseer", "polblogs", "ogbn-arxiv", "ogbn-products"):
        assert n in names


@pytest.mark.parametrize(
    "adj, attr, labels, message",
    [
        (np.arange(4), sp.eye(3, format="csr"), np.zeros(3, np.int32), "expected a scipy sparse adjacency"),
        (sp.eye(3, format="csr"), sp.eye(2, format="csr"), np.zeros(3, np.int32), "features must have shape"),
        (sp.eye(3, format="csr"), sp.eye(3, format="csr"), np.zeros(4, np.int32), "labels must have N=3"),
        (sp.csr_matrix(np.ones((2, 3))), sp.eye(2, format="csr"), np.zeros(2, np.int32), "square"),
    ],
)
def test_graphdata_bad_input(tmp_path, adj, attr, labels, message):
    path = write_graphdata(tmp_path / "bad.npz", adj, attr, labels)
    with pytest.raises(DataError, match=message):
        load_dataset("graphdata", root=path)


def test_gz_table_blocks_give_the_same_array(tmp_path, ogb):
    """Block-wise parsing (tiny blocks here) equals parsing the whole text at once."""
    from gnnpipe.data.formats.ogb import read_gz_table

    rng = np.random.default_rng(0)
    table = rng.integers(0, 1000, size=(500, 3))
    ogb.gz(tmp_path / "t.csv.gz", "".join(",".join(map(str, r)) + "\n" for r in table))
    for block in (7, 64, 1 << 20):
        assert np.array_equal(read_gz_table(tmp_path / "t.csv.gz", np.int64, block_bytes=block), table)
    ogb.gz(tmp_path / "ragged.csv.gz", "1,2\n3,4\n5\n")
    with pytest.raises(DataError, match="ragged"):
        read_gz_table(tmp_path / "ragged.csv.gz", np.int64, block_bytes=4)
