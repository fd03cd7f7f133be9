"""Geom-GCN raw text (``out1_node_feature_label.txt``, ``out1_graph_edges.txt``) and its
fixed 60/20/20 split files, which the Planetoid reader uses too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from gnnpipe.data.formats._common import (BASE, SEEDED, Format, check_split_index, finish, numeric_table, reading,
                                           stored_mask)
from gnnpipe.data.graph import Graph
from gnnpipe.data.options import LoadOptions
from gnnpipe.data.safe_pickle import read_npz
from gnnpipe.errors import DataError

__all__ = ["load_geom_gcn", "geom_gcn_files", "geom_gcn_split_file", "geom_gcn_masks", "FORMAT"]

#: Geom-GCN ships ten splits per dataset.
NUM_SPLITS = 10


def geom_gcn_split_file(splits_dir: str | Path, name: str, split: int) -> Path:
    """``<splits_dir>/<name>_split_0.6_0.2_<split>.npz``."""
    return Path(splits_dir) / f"{name}_split_0.6_0.2_{split}.npz"


def geom_gcn_masks(splits_dir: str | Path, name: str, split: Any, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three masks of Geom-GCN split file ``split`` (0..9), stored as bool or 0/1 uint8.

    Shapes: -> three bool [N].
    """
    sf = geom_gcn_split_file(splits_dir, name, check_split_index(split, NUM_SPLITS, f"{name} split"))
    d = read_npz(sf, pickled_ok=False)
    keys = ("train_mask", "val_mask", "test_mask")
    if not all(isinstance(d.get(k), np.ndarray) for k in keys):
        raise DataError(f"{sf}: expected train_mask/val_mask/test_mask arrays, found keys {sorted(d)}")
    masks = tuple(stored_mask(d[k], f"{sf}[{k}]", zero_one_ok=True).reshape(-1) for k in keys)
    if any(m.shape != (n,) for m in masks):
        raise DataError(f"{sf}: expected masks of length N={n}, found {[m.shape[0] for m in masks]}")
    return masks  # type: ignore[return-value]


def _split(opts: LoadOptions) -> int | str:
    return 0 if opts.split is None else opts.split


def geom_gcn_files(folder: Path, opts: LoadOptions) -> list[Path]:
    """The two text files, plus the split file when ``splits_dir`` is given."""
    folder = Path(folder)
    files = [folder / "out1_node_feature_label.txt", folder / "out1_graph_edges.txt"]
    if opts.splits_dir is not None:
        files.append(geom_gcn_split_file(opts.splits_dir, opts.name or folder.name, _split(opts)))
    return files


def _features(header: str, ids: np.ndarray, lists: list[np.ndarray], feat_file: Path) -> Any:
    """Dense 0/1 rows, or (film, announced by ``feature_amount:F`` in the header) lists of
    non-zero column ids, read into a scipy CSR (the finisher picks the layout).
    Shapes: -> float32 [N, F]."""
    n = ids.size
    m = re.search(r"feature_amount:(\d+)", header)
    if m:
        lens = np.array([a.size for a in lists])
        cols = np.concatenate(lists) if lists else np.zeros(0, np.int64)
        if cols.size and cols.min() < 0:
            raise DataError(f"{feat_file}: expected non-negative feature ids, found {int(cols.min())}")
        f = max(int(m.group(1)), int(cols.max()) + 1 if cols.size else 0)
        feats = sp.csr_matrix((np.ones(cols.size, np.float32), (np.repeat(ids, lens), cols)), shape=(n, f))
        feats.sum_duplicates()
        feats.data[:] = 1.0  # a list of non-zero ids: an id listed twice is still 1
        return feats
    widths = {a.size for a in lists}
    if len(widths) != 1:
        raise DataError(f"{feat_file}: expected dense feature rows of one width, found widths {sorted(widths)[:5]}")
    feats = np.zeros((n, widths.pop()), dtype=np.float32)
    feats[ids] = np.stack(lists)
    return feats


def load_geom_gcn(folder: Path, opts: LoadOptions) -> Graph:
    """Geom-GCN raw text: ``out1_node_feature_label.txt`` (``id<TAB>features<TAB>label``,
    features a dense 0/1 list, or for film a list of non-zero indices, announced by a
    ``feature_amount`` header) and ``out1_graph_edges.txt`` (``src<TAB>dst``). Ids,
    labels and feature entries are parsed as integers (``1.5`` is refused).

    With ``splits_dir`` the fixed 60/20/20 split ``<name>_split_0.6_0.2_<split>.npz`` is
    used, otherwise the seeded per-class split.
    """
    folder = Path(folder)
    name = opts.name or folder.name
    feat_file, edge_file = folder / "out1_node_feature_label.txt", folder / "out1_graph_edges.txt"
    with reading(feat_file, "Geom-GCN 'node_id<TAB>features<TAB>label' lines of integers"):
        lines = feat_file.read_text().splitlines()
        header, rows = lines[0], [ln.split("\t") for ln in lines[1:] if ln.strip()]
        if any(len(r) != 3 for r in rows):
            raise DataError(f"{feat_file}: expected 3 tab-separated columns on every line, found another count")
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        labels_in = np.array([r[2] for r in rows], dtype=np.int64)
        lists = [np.array(r[1].split(","), dtype=np.int64) if r[1] else np.zeros(0, np.int64) for r in rows]
    n = len(rows)
    if n == 0 or ids.min() < 0 or ids.max() >= n or np.unique(ids).size != n:
        raise DataError(f"{feat_file}: expected node ids forming 0..N-1 (N={n}), found another set")
    feats = _features(header, ids, lists, feat_file)
    labels = np.empty(n, dtype=np.int64)
    labels[ids] = labels_in
    with reading(edge_file, "Geom-GCN 'src<TAB>dst' lines"):
        edges = numeric_table(edge_file.read_bytes(), np.int64, str(edge_file), skip_header=True)
    if edges.size and edges.shape[1] != 2:
        raise DataError(f"{edge_file}: expected 2 columns, found {edges.shape[1]}")
    masks = geom_gcn_masks(opts.splits_dir, name, _split(opts), n) if opts.splits_dir is not None else None
    return finish(edges.reshape(-1, 2).T, feats, labels, num_nodes=n, name=name, source=str(folder), opts=opts,
                  masks=masks)


FORMAT = Format(
    "geom-gcn", load_geom_gcn, geom_gcn_files, "folder with out1_*.txt (option splits_dir=)",
    accepts=BASE | SEEDED | {"split", "splits_dir"}, title="Geom-GCN text",
    split="seeded per class (or splits_dir: 10 fixed, split=k)",
)
