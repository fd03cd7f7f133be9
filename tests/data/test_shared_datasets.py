"""Every shared dataset loads with the statistics that /work/shared/datasets/README.md states.

Undirected edges are counted as README does: unique unordered pairs {u, v}, u != v, after
symmetrising; self-loops separately. Seeded splits are checked against the per-class rule
(20 train / 30 val per class, rest test) computed from the README's label counts.
"""

from __future__ import annotations

import pytest
import torch

from gnnpipe.data import load_dataset
from gnnpipe.data.sparse import SparseFeatures
from gnnpipe.errors import DataError

# name: (nodes, undirected edges, self-loops, features, classes, label counts or None,
#        fixed split (train, val, test) or None for the seeded per-class split)
README = {
    "cora": (2708, 5278, 0, 1433, 7, [351, 217, 418, 818, 426, 298, 180], (140, 500, 1000)),
    "citeseer": (3327, 4552, 124, 3703, 6, [249, 590, 668, 701, 596, 508], (120, 500, 1000)),
    "gnnbench-cora": (2708, 5278, 0, 1433, 7, [298, 418, 818, 426, 217, 180, 351], None),
    "gnnbench-citeseer": (3312, 4536, 124, 3703, 6, [249, 596, 701, 508, 668, 590], None),
    "cora_ml": (2995, 8158, 0, 2879, 7, [354, 402, 452, 442, 857, 193, 295], None),
    "graphdata-cora_ml": (2995, 8158, 0, 2879, 7, None, None),
    "amazon_photo": (7650, 119081, 1, 745, 8, None, None),
    "coauthor_cs": (18333, 81894, 0, 6805, 15, None, None),
    "citeseer_full": (4230, 5337, 0, 602, 6, None, None),
    "dblp": (17716, 52867, 0, 1639, 4, None, None),
    "acm": (3025, 13128, 0, 1870, 3, None, None),
    "uai": (3067, 28308, 6, 4973, 19, None, None),
    "blogcatalog": (5196, 171743, 0, 8189, 6, None, None),
    "flickr_lane": (7575, 239738, 0, 12047, 9, None, None),
    "minesweeper": (10000, 39402, 0, 7, 2, None, (5000, 2500, 2500)),
    "tolokers": (11758, 519000, 0, 10, 2, None, (5879, 2939, 2940)),
    "actor": (7600, 26659, 0, 932, 5, None, (3648, 2432, 1520)),
    "cornell": (183, 277, 0, 1703, 5, [38, 16, 30, 82, 17], (87, 59, 37)),
    "texas": (183, 279, 0, 1703, 5, None, (87, 59, 37)),
    "wisconsin": (251, 450, 0, 1703, 5, None, (120, 80, 51)),
    "geom-cornell": (183, 277, 3, 1703, 5, [33, 1, 18, 101, 30], (87, 59, 37)),
    "geom-texas": (183, 279, 16, 1703, 5, [33, 1, 18, 101, 30], (87, 59, 37)),
    "geom-wisconsin": (251, 450, 16, 1703, 5, [10, 70, 118, 32, 21], (120, 80, 51)),
    "geom-film": (7600, 26659, 93, 932, 5, [853, 1337, 1630, 1815, 1965], (3648, 2432, 1520)),
    # MUSAE classes are the sorted label strings: company, government, politician, tvshow;
    # Twitch False, True. Width = largest feature id + 1 (README: max id 4713 / 3169).
    "facebook": (22470, 170823, 179, 4714, 4, [6495, 6880, 5768, 3327], None),
    "twitch_de": (9498, 153138, 0, 3170, 2, [3756, 5742], None),
    "twitch_engb": (7126, 35324, 0, 3170, 2, [3238, 3888], None),
    "polblogs": (1490, 16715, 3, 1490, 2, [758, 732], None),  # identity features
}

# LINQS: the README states nodes, features and classes (and line counts) only.
LINQS = {"linqs-cora": (2708, 1433, 7), "linqs-citeseer": (3312, 3703, 6)}


def _edge_stats(g) -> tuple[int, int]:
    no_loops = g.remove_self_loops()
    assert no_loops.num_edges % 2 == 0
    return no_loops.num_edges // 2, g.num_edges - no_loops.num_edges


@pytest.mark.parametrize("name", sorted(README))
def test_shared_dataset_statistics(datasets_root, name):
    nodes, undirected, loops, feats, classes, counts, split = README[name]
    g = load_dataset(name, root=datasets_root, cache=False)
    assert g.name == name
    assert g.num_nodes == nodes
    assert g.is_symmetric()
    assert _edge_stats(g) == (undirected, loops)
    assert g.num_features == feats
    assert g.num_classes == classes
    assert g.features.dtype == torch.float32
    labelled = g.labels[g.labels >= 0]
    label_counts = torch.bincount(labelled, minlength=classes)
    if counts is not None:
        assert label_counts.tolist() == counts
    sizes = (int(g.train_mask.sum()), int(g.val_mask.sum()), int(g.test_mask.sum()))
    if split is None:  # seeded per-class split: 20 / 30 per class, rest test
        c = label_counts
        expected = (int(c.clamp(max=20).sum()), int((c - 20).clamp(min=0, max=30).sum()),
                    int((c - 50).clamp(min=0).sum()))
        assert sizes == expected
    else:
        assert sizes == split


def test_citeseer_isolated_test_range_ids(datasets_root):
    """CiteSeer's 15 test-range ids without tx/ty rows: zero features, label -1, no mask."""
    g = load_dataset("citeseer", root=datasets_root, cache=False)
    unlabelled = g.labels < 0
    assert int(unlabelled.sum()) == 15
    assert not bool((g.train_mask | g.val_mask | g.test_mask)[unlabelled].any())
    assert g.sparse_features  # 0.85 % non-zero: CSR (gnnpipe.data.sparse)
    assert torch.equal(g.features[unlabelled].to_dense(), torch.zeros(15, g.num_features))
    assert g.features.nnz == 105165  # README: nnz of the feature matrix


def test_cora_feature_nnz_and_public_split_ranges(datasets_root):
    g = load_dataset("cora", root=datasets_root, cache=False)
    assert g.sparse_features and g.features.nnz == 49216
    ar = torch.arange(g.num_nodes)
    assert torch.equal(g.train_mask, ar < 140)
    assert torch.equal(g.val_mask, (ar >= 140) & (ar < 640))


@pytest.mark.parametrize("name", sorted(LINQS))
def test_linqs_tarballs(datasets_root, name):
    nodes, feats, classes = LINQS[name]
    g = load_dataset(name, root=datasets_root, cache=False)
    assert (g.num_nodes, g.num_features, g.num_classes) == (nodes, feats, classes)
    assert g.is_symmetric()


def test_linqs_cora_matches_gnnbench_cora_graph(datasets_root):
    """Both are the LINQS Cora (2708 papers, 5429 links): the same number of undirected edges."""
    a = load_dataset("linqs-cora", root=datasets_root, cache=False)
    b = load_dataset("gnnbench-cora", root=datasets_root, cache=False)
    assert _edge_stats(a) == _edge_stats(b)


def test_pubmed_partial_refuses_naming_missing_allx(datasets_root):
    with pytest.raises(DataError, match=r"ind\.pubmed\.allx"):
        load_dataset("pubmed", root=datasets_root, cache=False)


def test_pubmed_structure_only(datasets_root):
    g = load_dataset("pubmed", root=datasets_root, structure_only=True, cache=False)
    assert g.num_nodes == 19717 and g.num_features == 0 and g.num_classes == 3
    assert _edge_stats(g) == (44324, 3)
    assert torch.bincount(g.labels).tolist() == [4103, 7739, 7875]
    assert (int(g.train_mask.sum()), int(g.val_mask.sum()), int(g.test_mask.sum())) == (60, 500, 1000)


def test_heterophilous_split_option_selects_stored_mask(datasets_root):
    import numpy as np

    raw = np.load(datasets_root / "heterophilous" / "minesweeper.npz")
    g = load_dataset("minesweeper", root=datasets_root, split=3, cache=False)
    assert torch.equal(g.train_mask, torch.from_numpy(raw["train_masks"][3]))
    assert torch.equal(g.test_mask, torch.from_numpy(raw["test_masks"][3]))
    with pytest.raises(DataError, match="split"):
        load_dataset("minesweeper", root=datasets_root, split=10, cache=False)


def test_geom_gcn_split_matches_split_file(datasets_root):
    import numpy as np

    raw = np.load(datasets_root / "geom-gcn" / "splits" / "wisconsin_split_0.6_0.2_7.npz")
    g = load_dataset("geom-wisconsin", root=datasets_root, split=7, cache=False)
    assert torch.equal(g.val_mask, torch.from_numpy(raw["val_mask"] != 0))


@pytest.mark.parametrize("name, sizes", [("cora", (1192, 796, 497)), ("citeseer", (1596, 1065, 666))])
def test_planetoid_geom_gcn_split(datasets_root, name, sizes):
    """README: Geom-GCN split 0 sizes (of all vertices); unlabelled vertices are dropped."""
    import numpy as np

    raw = np.load(datasets_root / "geom-gcn" / "splits" / f"{name}_split_0.6_0.2_0.npz")
    g = load_dataset(name, root=datasets_root, split=0, cache=False)
    for mask, key, size in zip((g.train_mask, g.val_mask, g.test_mask), ("train_mask", "val_mask", "test_mask"), sizes):
        stored = torch.from_numpy(raw[key] != 0)
        assert int(stored.sum()) == size
        assert torch.equal(mask, stored & (g.labels >= 0))


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid_matches_torch_geometric_reader(datasets_root, name):
    """Full-tensor comparison with PyG's own reader of the same ind.* files (a reference
    implementation of the GCN assembly; it unpickles with plain pickle, fine for these
    known files in a test). PyG drops self-loops and labels the 15 CiteSeer gaps 0."""
    pyg_io = pytest.importorskip("torch_geometric.io.planetoid")
    ref = pyg_io.read_planetoid_data(str(datasets_root / "planetoid"), name)
    g = load_dataset(name, root=datasets_root, cache=False)
    assert torch.equal(g.features.to_dense(), ref.x)
    labelled = g.labels >= 0
    assert torch.equal(g.labels[labelled], ref.y[labelled])
    for ours, theirs in ((g.train_mask, ref.train_mask), (g.val_mask, ref.val_mask), (g.test_mask, ref.test_mask)):
        assert torch.equal(ours, theirs)
    ref_edges = torch.cat([ref.edge_index, ref.edge_index.flip(0)], dim=1)
    ref_key = torch.unique(ref_edges[1] * g.num_nodes + ref_edges[0])
    src, dst = g.remove_self_loops().edge_index()
    assert torch.equal(dst * g.num_nodes + src, ref_key)  # our CSR order is (dst, src) sorted


def _dense(x):
    return x.to_dense() if isinstance(x, SparseFeatures) else x


def _undirected_key(rows, cols, n):
    """Sorted unique keys dst * n + src of the symmetrised edge set without self-loops."""
    keep = rows != cols
    r, c = torch.as_tensor(rows[keep], dtype=torch.int64), torch.as_tensor(cols[keep], dtype=torch.int64)
    return torch.unique(torch.cat([r * n + c, c * n + r]))


def _our_key(g):
    src, dst = g.remove_self_loops().edge_index()
    return dst * g.num_nodes + src


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # plain pickle names scipy.sparse.csr
def test_graphdata_matches_plain_numpy_reading(datasets_root):
    """Against np.load(allow_pickle=True) of the same (known, trusted) file."""
    import numpy as np

    raw = np.load(datasets_root / "graphdata" / "acm.npz", allow_pickle=True)
    adj, attr = raw["adj_matrix"].item(), raw["node_attr"].item()
    g = load_dataset("acm", root=datasets_root, cache=False)
    assert torch.equal(g.features.to_dense(), torch.from_numpy(attr.toarray().astype(np.float32)))
    assert torch.equal(g.labels, torch.from_numpy(raw["node_label"].astype(np.int64)))
    coo = adj.tocoo()
    assert torch.equal(_our_key(g), _undirected_key(coo.row, coo.col, g.num_nodes))


def test_heterophilous_and_sparsegraph_match_raw_arrays(datasets_root):
    import numpy as np
    import scipy.sparse as sp

    raw = np.load(datasets_root / "heterophilous" / "tolokers.npz")
    g = load_dataset("tolokers", root=datasets_root, cache=False)
    assert torch.equal(_dense(g.features), torch.from_numpy(raw["node_features"]))
    assert torch.equal(_our_key(g), _undirected_key(raw["edges"][:, 0], raw["edges"][:, 1], g.num_nodes))
    raw = np.load(datasets_root / "gnn-benchmark" / "cora.npz")
    g = load_dataset("gnnbench-cora", root=datasets_root, cache=False)
    adj = sp.csr_matrix((raw["adj_data"], raw["adj_indices"], raw["adj_indptr"]), shape=tuple(raw["adj_shape"])).tocoo()
    attr = sp.csr_matrix((raw["attr_data"], raw["attr_indices"], raw["attr_indptr"]), shape=tuple(raw["attr_shape"]))
    assert torch.equal(g.features.to_dense(), torch.from_numpy(attr.toarray()))
    assert torch.equal(g.labels, torch.from_numpy(raw["labels"].astype(np.int64)))
    assert torch.equal(_our_key(g), _undirected_key(adj.row, adj.col, g.num_nodes))
