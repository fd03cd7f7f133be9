"""Writers of tiny datasets in each on-disk layout, for the reader tests.

Every writer takes the arrays it writes as overridable keywords, so a test can write a
file that differs from a valid one in exactly one array (a wrong dtype, a bad id).
OGB's writer is the ``ogb`` fixture of conftest.py.
"""

from __future__ import annotations

import io
import pickle
import tarfile
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp


def write_planetoid(folder: Path, name: str = "tiny", **parts: Any):
    """A 10-vertex Planetoid set: train 0-1, 'allx' 0-5, test.index 9 7 8 (6 is an
    isolated test-range id with no tx row, like CiteSeer's). ``parts`` replace pickled
    parts (``ally=...``, ``graph=...``). Returns allx, tx (dense) and the test ids."""
    f = 4
    allx = sp.csr_matrix(np.arange(6 * f, dtype=np.float32).reshape(6, f))
    ally = np.eye(3, dtype=np.int32)[[0, 1, 2, 0, 1, 2]]
    test_idx = [9, 7, 8]
    tx = sp.csr_matrix(100 + np.arange(3 * f, dtype=np.float32).reshape(3, f))
    ty = np.eye(3, dtype=np.int32)[[2, 1, 0]]
    graph = defaultdict(list, {0: [1, 9], 1: [0], 2: [3], 3: [2, 7], 9: [0], 7: [3], 8: [8]})
    objs = {"x": allx[:2], "y": ally[:2], "allx": allx, "ally": ally, "tx": tx, "ty": ty, "graph": graph, **parts}
    for part, obj in objs.items():
        (folder / f"ind.{name}.{part}").write_bytes(pickle.dumps(obj, protocol=2))
    (folder / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_idx))
    return allx.toarray(), tx.toarray(), test_idx


def split_masks(n: int, ids: list[int], splits: int = 2) -> np.ndarray:
    """bool [splits, N]: the vertices ``ids`` in every split."""
    return np.stack([np.isin(np.arange(n), ids)] * splits)


def write_hetero(path: Path, n: int = 6, edges=None, feats=None, labels=None, train=None, val=None, test=None) -> Path:
    """A heterophilous-graphs .npz of a 6-vertex path with 2 stored splits."""
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]) if edges is None else edges
    feats = np.arange(n * 2, dtype=np.float32).reshape(n, 2) if feats is None else feats
    labels = np.array([0, 1] * (n // 2)) if labels is None else labels
    np.savez(path, node_features=feats, node_labels=labels, edges=edges,
             train_masks=split_masks(n, [0, 1]) if train is None else train,
             val_masks=split_masks(n, [2]) if val is None else val,
             test_masks=split_masks(n, [3, 4, 5]) if test is None else test)
    return path


def write_graphdata(path: Path, adj: Any, attr: Any, labels: Any) -> Path:
    """A GraphData .npz: non-array values become pickled 0-d object arrays."""
    with zipfile.ZipFile(path, "w") as zf:
        for key, value in (("adj_matrix", adj), ("node_attr", attr), ("node_label", labels)):
            if not isinstance(value, np.ndarray):
                box = np.empty((), dtype=object)
                box[()] = value
                value = box
            buf = io.BytesIO()
            np.save(buf, value, allow_pickle=True)
            zf.writestr(f"{key}.npy", buf.getvalue())
    return path


RING = sp.csr_matrix(np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]], dtype=np.float32))
RING_ATTR = sp.csr_matrix(np.array([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=np.float32))


def write_sparsegraph(path: Path, *, labels=None, with_attr: bool = True, **arrays: Any) -> Path:
    """A gnn-benchmark style .npz of a 4-vertex directed ring; ``arrays`` replace or add keys."""
    keys: dict[str, Any] = {"adj_data": RING.data, "adj_indices": RING.indices, "adj_indptr": RING.indptr,
                            "adj_shape": RING.shape, "labels": np.array([0, 1, 0, 1]) if labels is None else labels}
    if with_attr:
        keys.update(attr_data=RING_ATTR.data, attr_indices=RING_ATTR.indices, attr_indptr=RING_ATTR.indptr,
                    attr_shape=RING_ATTR.shape)
    np.savez(path, **{**keys, **arrays})
    return path


GEOM_FEATURES = "node_id\tfeature\tlabel\n1\t0,1,1\t1\n0\t1,0,0\t0\n2\t0,0,1\t1\n"
GEOM_EDGES = "node_id\tnode_id\n0\t1\n1\t2\n1\t2\n"


def write_geom_gcn(folder: Path, features: str = GEOM_FEATURES, edges: str = GEOM_EDGES) -> Path:
    """A 3-vertex Geom-GCN raw-text folder (dense features)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "out1_node_feature_label.txt").write_text(features)
    (folder / "out1_graph_edges.txt").write_text(edges)
    return folder


MUSAE_EDGES = "id_1,id_2\n0,1\n1,2\n2,3\n"
MUSAE_FEATURES = '{"0": [0, 2], "1": [1], "2": [], "3": [2, 2]}'
MUSAE_TARGET = ('id,facebook_id,page_name,page_type\n0,11,"A, Inc.",company\n1,12,B,tvshow\n2,13,C,company\n'
                '3,14,D,tvshow\n')


def write_musae(folder: Path, prefix: str = "toy", edges: str = MUSAE_EDGES, features: str = MUSAE_FEATURES,
                target: str = MUSAE_TARGET) -> Path:
    """A 4-vertex MUSAE (Facebook-style) dataset."""
    (folder / f"{prefix}_edges.csv").write_text(edges)
    (folder / f"{prefix}.json").write_text(features)
    (folder / f"{prefix}_target.csv").write_text(target)
    return folder


LINQS_CONTENT = "p1\t1\t0\tA\np2\t0\t1\tB\np3\t1\t1\tA\n"
LINQS_CITES = "p1\tp2\np2\tp3\np3\tmissing\n"


def write_linqs(path: Path, content: str = LINQS_CONTENT, cites: str = LINQS_CITES) -> Path:
    """A LINQS .tgz with members toy/toy.content and toy/toy.cites."""
    with tarfile.open(path, "w:gz") as tf:
        for member, text in (("toy/toy.content", content), ("toy/toy.cites", cites)):
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path
