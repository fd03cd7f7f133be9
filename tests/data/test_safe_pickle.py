"""The restricted unpickler: data files never run code."""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp

from gnnpipe.data.formats.graphdata import load_graphdata_npz
from gnnpipe.data.formats.planetoid import load_planetoid
from gnnpipe.data.options import LoadOptions
from gnnpipe.data.safe_pickle import read_npz, safe_pickle_load
from gnnpipe.errors import DataError


class _RunsCode:
    """Pickles to a call of os.system: loading it with plain pickle would run the command."""

    def __init__(self, cmd: str) -> None:
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


class _NamesOtherClass:
    def __reduce__(self):
        return (zipfile.ZipFile, ("x",))


def test_allowed_objects_round_trip():
    m = sp.random(5, 4, density=0.5, format="csr", random_state=0, dtype=np.float32)
    dd = defaultdict(list, {0: [1, 2], 3: [0]})
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        got = safe_pickle_load(pickle.dumps(m, protocol=protocol), source="m")
        assert (got != m).nnz == 0 and got.dtype == m.dtype
        arr = np.arange(12, dtype=np.int32).reshape(3, 4)
        assert np.array_equal(safe_pickle_load(pickle.dumps(arr, protocol=protocol), source="a"), arr)
        assert safe_pickle_load(pickle.dumps(dd, protocol=protocol), source="d") == dd


@pytest.mark.parametrize("obj, cls", [(_RunsCode("true"), "system"), (_NamesOtherClass(), "zipfile.ZipFile")])
def test_forbidden_class_is_refused_with_file_and_class(obj, cls):
    with pytest.raises(DataError, match=cls) as info:
        safe_pickle_load(pickle.dumps(obj), source="some/file.pkl")
    assert "some/file.pkl" in str(info.value)


def test_planetoid_pickle_naming_os_system_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "ran"
    for part in ("x", "y", "tx", "ty", "allx", "ally", "graph"):
        (tmp_path / f"ind.evil.{part}").write_bytes(pickle.dumps(_RunsCode(f"touch {marker}")))
    (tmp_path / "ind.evil.test.index").write_text("0\n")
    with pytest.raises(DataError) as info:
        load_planetoid(tmp_path, LoadOptions(name="evil"))
    msg = str(info.value)
    assert "ind.evil." in msg and f"{os.system.__module__}.system" in msg
    assert not marker.exists()


def _npz_with_object(path, **arrays):
    """An .npz whose members are written by np.save (object arrays pickled)."""
    with zipfile.ZipFile(path, "w") as zf:
        for key, value in arrays.items():
            buf = io.BytesIO()
            np.save(buf, value, allow_pickle=True)
            zf.writestr(f"{key}.npy", buf.getvalue())


def test_graphdata_object_array_naming_os_system_is_refused(tmp_path):
    marker = tmp_path / "ran"
    evil = np.empty((), dtype=object)
    evil[()] = _RunsCode(f"touch {marker}")
    path = tmp_path / "evil.npz"
    _npz_with_object(path, adj_matrix=evil, node_attr=evil, node_label=np.zeros(3, dtype=np.int32))
    with pytest.raises(DataError) as info:
        load_graphdata_npz(path, LoadOptions())
    assert str(path) in str(info.value) and "system" in str(info.value)
    assert not marker.exists()


def test_graphdata_npz_with_sparse_objects_loads(tmp_path):
    adj = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=np.float32))
    attr = sp.csr_matrix(np.eye(3, dtype=np.float32))
    a, b = np.empty((), dtype=object), np.empty((), dtype=object)
    a[()], b[()] = adj, attr
    path = tmp_path / "ok.npz"
    _npz_with_object(path, adj_matrix=a, node_attr=b, node_label=np.array([0, 1, 1], dtype=np.int32))
    d = read_npz(path)
    assert (d["adj_matrix"] != adj).nnz == 0 and np.array_equal(d["node_label"], [0, 1, 1])
    g = load_graphdata_npz(path, LoadOptions(train_per_class=1, val_per_class=0))
    assert g.is_symmetric() and g.num_edges == 4
    assert np.array_equal(g.features.numpy(), np.eye(3, dtype=np.float32))


def test_pickled_entries_are_skipped_when_not_allowed(tmp_path):
    evil = np.empty((), dtype=object)
    evil[()] = _RunsCode("true")
    path = tmp_path / "mixed.npz"
    _npz_with_object(path, metadata=evil, labels=np.arange(3))
    d = read_npz(path, pickled_ok=False)
    assert d["metadata"] is None and np.array_equal(d["labels"], np.arange(3))


def test_truncated_pickle_and_npz_are_data_errors(tmp_path):
    data = pickle.dumps(np.arange(100))
    with pytest.raises(DataError, match="truncated or corrupt"):
        safe_pickle_load(data[: len(data) // 2], source="half.pkl")
    path = tmp_path / "half.npz"
    buf = io.BytesIO()
    np.savez(buf, a=np.arange(1000))
    path.write_bytes(buf.getvalue()[:300])
    with pytest.raises(DataError, match="half.npz"):
        read_npz(path)
