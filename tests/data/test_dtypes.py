"""Stored arrays of the wrong dtype are refused in every format, ids that are not integers
are refused (never truncated), and class ids are compacted in one shared place."""

from __future__ import annotations

import json
import logging
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp

from gnnpipe.data import load_dataset
from tests.data.writers import (RING, split_masks, write_geom_gcn, write_graphdata, write_hetero, write_linqs,
                                write_musae, write_planetoid, write_sparsegraph)
from gnnpipe.errors import DataError

N = 6  # vertices of the heterophilous fixture


def _hetero(tmp_path, **kw):
    return "heterophilous", write_hetero(tmp_path / "h.npz", **kw), {}


def _sparse(tmp_path, **kw):
    return "sparsegraph", write_sparsegraph(tmp_path / "s.npz", **kw), {"train_per_class": 1}


def _graphdata(tmp_path, adj=RING, attr=np.eye(4, dtype=np.float32), labels=np.array([0, 1, 0, 1])):
    return "graphdata", write_graphdata(tmp_path / "g.npz", adj, attr, labels), {"train_per_class": 1}


def _planetoid(tmp_path, **parts):
    write_planetoid(tmp_path, **parts)
    return "planetoid", tmp_path, {"name": "tiny", "num_val": 4}


def _planetoid_index(tmp_path, text):
    fmt, root, options = _planetoid(tmp_path)
    (root / "ind.tiny.test.index").write_text(text)
    return fmt, root, options


def _geom(tmp_path, **kw):
    return "geom-gcn", write_geom_gcn(tmp_path / "geom", **kw), {"train_per_class": 1, "val_per_class": 0}


def _musae(tmp_path, **kw):
    return "musae", write_musae(tmp_path, **kw), {"prefix": "toy", "train_per_class": 1}


def _linqs(tmp_path, **kw):
    return "linqs", write_linqs(tmp_path / "l.tgz", **kw), {"train_per_class": 1}


def _ogb(tmp_path, ogb, **kw):
    return "ogb", ogb.write(tmp_path, **kw), {}


def _ogb_gz(tmp_path, ogb, relpath, text):
    d = ogb.write(tmp_path)
    ogb.gz(d / relpath, text)
    return "ogb", d, {}


CASES = {
    # heterophilous .npz: plain arrays
    "hetero float labels": (lambda t, o: _hetero(t, labels=np.array([0.0, 1.0] * 3)), "integer class ids"),
    "hetero string labels": (lambda t, o: _hetero(t, labels=np.array(["a", "b"] * 3)), "integer class ids"),
    "hetero float edges": (lambda t, o: _hetero(t, edges=np.array([[0, 1], [1.5, 2]])), "integer edge ids"),
    "hetero string features": (lambda t, o: _hetero(t, feats=np.array([["a", "b"]] * N)), "numeric features"),
    "hetero int masks": (lambda t, o: _hetero(t, train=split_masks(N, [0, 1]).astype(np.int64)), "bool mask"),
    "hetero float masks": (lambda t, o: _hetero(t, val=split_masks(N, [2]).astype(np.float32)), "bool mask"),
    "hetero string masks": (lambda t, o: _hetero(t, test=np.array([["a"] * N] * 2)), "bool mask"),
    # SparseGraph .npz: CSR parts
    "sparse float labels": (lambda t, o: _sparse(t, labels=np.array([0.0, 1, 0, 1])), "integer class ids"),
    "sparse float adj ids": (lambda t, o: _sparse(t, adj_indices=RING.indices.astype(np.float64)), "integer ids"),
    "sparse string features": (lambda t, o: _sparse(t, with_attr=False, attr_matrix=np.array([["x"]] * 4)),
                               "numeric features"),
    "sparse string attr_data": (lambda t, o: _sparse(t, attr_data=np.array(list("abcd"))), "numeric matrix entries"),
    "sparse float indptr": (lambda t, o: _sparse(t, adj_indptr=RING.indptr.astype(np.float64)), "integer ids"),
    # GraphData .npz: pickled matrices
    "graphdata float labels": (lambda t, o: _graphdata(t, labels=np.array([0.0, 1, 0, 1])), "integer class ids"),
    "graphdata string labels": (lambda t, o: _graphdata(t, labels=np.array(list("abab"))), "integer class ids"),
    "graphdata string features": (lambda t, o: _graphdata(t, attr=np.array([["x"]] * 4)), "numeric features"),
    "graphdata complex adjacency": (lambda t, o: _graphdata(t, adj=sp.csr_matrix(np.eye(4, dtype=np.float32))
                                                           .astype(np.complex64)), "numeric adjacency"),
    # Planetoid pickles
    "planetoid float one-hot": (lambda t, o: _planetoid(t, ally=np.eye(3, dtype=np.float32)[[0, 1, 2, 0, 1, 2]]),
                                "integer one-hot labels"),
    "planetoid float neighbour": (lambda t, o: _planetoid(t, graph=defaultdict(list, {0: [1.5], 1: [0]})),
                                  "integer ids"),
    "planetoid string neighbour": (lambda t, o: _planetoid(t, graph=defaultdict(list, {0: ["1"], 1: [0]})),
                                   "integer ids"),
    "planetoid string features": (lambda t, o: _planetoid(t, allx=np.array([["a"] * 4] * 6)), "numeric features"),
    "planetoid fractional test id": (lambda t, o: _planetoid_index(t, "9\n7.5\n8\n"), "integer vertex id"),
    # Geom-GCN text
    "geom fractional label": (lambda t, o: _geom(t, features="h\th\th\n0\t1,0\t0\n1\t0,1\t1.5\n"), "1.5"),
    "geom fractional feature": (lambda t, o: _geom(t, features="h\th\th\n0\t1.5,0\t0\n1\t0,1\t1\n"), "1.5"),
    "geom fractional edge": (lambda t, o: _geom(t, edges="s\td\n0\t1\n1\t1.5\n"),
                             "expected a table of integers, found '1.5'"),
    # MUSAE csv + JSON
    "musae fractional edge": (lambda t, o: _musae(t, edges="a,b\n0,1\n1,2.5\n"),
                              "expected a table of integers, found '2.5'"),
    "musae float feature id": (lambda t, o: _musae(t, features='{"0": [0.5], "1": [], "2": [], "3": []}'),
                               "integer ids"),
    # LINQS tgz
    "linqs text feature": (lambda t, o: _linqs(t, content="p1\t1\tA\np2\tyes\tB\n", cites="p1\tp2\n"),
                           "expected a table of numbers, found 'yes'"),
    # OGB gzip csv
    "ogb fractional label": (lambda t, o: _ogb_gz(t, o, "raw/node-label.csv.gz", "0\n1\n2\n0\n1.5\n2\n0\n"),
                             "integer class ids"),
    "ogb fractional edge": (lambda t, o: _ogb_gz(t, o, "raw/edge.csv.gz", "0,1\n1,2\n2,3\n3,0\n4,5\n5,6\n6,4\n0,4.5\n"),
                            "expected a table of integers, found '4.5'"),
    "ogb text feature": (lambda t, o: _ogb_gz(t, o, "raw/node-feat.csv.gz", "a,b,c\n" * 7),
                         "expected a table of numbers, found 'a'"),
    "ogb fractional split id": (lambda t, o: _ogb_gz(t, o, "split/time/valid.csv.gz", "3\n4.5\n"),
                                "expected a table of integers, found '4.5'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_wrong_dtype_is_refused_with_one_line_naming_the_file(tmp_path, ogb, case):
    write, message = CASES[case]
    fmt, root, options = write(tmp_path, ogb)
    with pytest.raises(DataError, match=message) as info:
        load_dataset(fmt, root=root, cache=False, **options)
    msg = str(info.value)
    assert "\n" not in msg and str(tmp_path) in msg


def test_geom_gcn_split_masks_must_be_bool_or_zero_one(tmp_path):
    folder = write_geom_gcn(tmp_path / "toy")
    splits = tmp_path / "splits"
    splits.mkdir()
    ok = np.array([1, 0, 0], dtype=np.uint8), np.array([0, 1, 0], dtype=np.uint8), np.array([0, 0, 1], dtype=np.uint8)
    np.savez(splits / "toy_split_0.6_0.2_0.npz", train_mask=ok[0], val_mask=ok[1], test_mask=ok[2])
    g = load_dataset("geom-gcn", root=folder, splits_dir=splits, cache=False)  # uint8 0/1: the upstream files
    assert g.train_mask.tolist() == [True, False, False] and g.test_mask.tolist() == [False, False, True]
    for bad, message in ((ok[0].astype(np.float32), "bool mask"), (ok[0] * 2, "0/1 mask")):
        np.savez(splits / "toy_split_0.6_0.2_0.npz", train_mask=bad, val_mask=ok[1], test_mask=ok[2])
        with pytest.raises(DataError, match=message):
            load_dataset("geom-gcn", root=folder, splits_dir=splits, cache=False)


@pytest.mark.parametrize("labels, expected", [
    ([1_000_000] * N, [0] * N),
    ([3, 7, 3, 7, 3, 7], [0, 1, 0, 1, 0, 1]),
    ([-5, 2, -1, 4, 2, 4], [-1, 0, -1, 1, 0, 1]),
])
def test_labels_that_skip_ids_are_compacted_with_one_info_line(tmp_path, caplog, labels, expected):
    train = split_masks(N, [1]) if expected[0] < 0 else None
    val = split_masks(N, [3]) if expected[0] < 0 else None
    test = split_masks(N, [4, 5]) if expected[0] < 0 else None
    path = write_hetero(tmp_path / "h.npz", labels=np.array(labels), train=train, val=val, test=test)
    with caplog.at_level(logging.INFO, logger="gnnpipe.data.formats._common"):
        g = load_dataset("heterophilous", root=path, cache=False)
    assert g.labels.tolist() == expected and g.num_classes == max(expected) + 1
    assert len([r for r in caplog.records if "renumbering" in r.getMessage()]) == 1


def test_compact_labels_log_nothing(tmp_path, caplog):
    path = write_hetero(tmp_path / "h.npz", labels=np.array([0, 1, 2, 0, 1, 2]))
    with caplog.at_level(logging.INFO, logger="gnnpipe.data.formats._common"):
        g = load_dataset("heterophilous", root=path, cache=False)
    assert g.labels.tolist() == [0, 1, 2, 0, 1, 2] and g.num_classes == 3
    assert not [r for r in caplog.records if "renumbering" in r.getMessage()]


def test_ogb_labels_are_compacted_too(tmp_path, ogb):
    d = ogb.write(tmp_path, labels=np.array([5, 9, 5, 9, 5, 9, 5]))
    g = load_dataset("ogb", root=d, cache=False)
    assert g.labels.tolist() == [0, 1, 0, 1, 0, 1, 0] and g.num_classes == 2


def test_musae_json_must_map_ids_to_lists(tmp_path):
    write_musae(tmp_path, features=json.dumps({"0": 3}))
    with pytest.raises(DataError, match="toy.json"):
        load_dataset("musae", root=tmp_path, prefix="toy", cache=False)


def _lenient_fromstring(text, dtype, sep):
    """``np.fromstring`` as numpy before 2.3 parses: an integer table reads ``1.5`` as
    1, and the parse stops, silently, at a token it cannot read."""
    out = []
    for tok in text.split():
        try:
            out.append(int(float(tok)) if np.dtype(dtype).kind in "iu" else float(tok))
        except ValueError:
            break
    return np.array(out, dtype=dtype)


@pytest.mark.parametrize("text,dtype,message", [
    (b"0 1\n1 1.5\n", np.int64, "expected a table of integers, found '1.5'"),
    (b"0 1\n1 2e3\n", np.int64, "expected a table of integers, found '2e3'"),
    (b"0.5 1\nyes 2\n", np.float32, "expected a table of numbers, found 'yes'"),
])
def test_numeric_tables_are_refused_whatever_numpys_parser_does(monkeypatch, text, dtype, message):
    from gnnpipe.data.formats import _common

    for parse in (np.fromstring, _lenient_fromstring):
        monkeypatch.setattr(_common.np, "fromstring", parse)
        with pytest.raises(DataError, match=message):
            _common.numeric_table(text, dtype, "edges.txt")


def test_a_well_formed_integer_table_parses_with_either_parser(monkeypatch):
    from gnnpipe.data.formats import _common

    for parse in (np.fromstring, _lenient_fromstring):
        monkeypatch.setattr(_common.np, "fromstring", parse)
        table = _common.numeric_table(b"0,1\n-2\t+3\n", np.int64, "edges.csv")
        assert table.tolist() == [[0, 1], [-2, 3]] and table.dtype == np.int64
