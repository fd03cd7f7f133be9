"""Readers for the public on-disk graph formats, each returning a validated :class:`Graph`.

Every reader takes the path of the file or folder it reads (so users can point it at
their own data) plus keyword options, and never caches: the registry
(:mod:`gnnpipe.data.registry`) adds the cache. Conventions shared by all readers:

- ``symmetrize=True`` (default) returns the undirected graph (every edge in both
  directions, duplicates dropped, self-loops kept as the file has them); with
  ``symmetrize=False`` an edge ``a b`` (edge list) or a matrix entry ``(a, b)`` is the
  directed edge ``a -> b`` ("b aggregates from a").
- Formats without a stored split get the seeded per-class split of
  :func:`gnnpipe.data.splits.per_class_split` (options ``seed=0``, ``train_per_class=20``,
  ``val_per_class=30``; the rest of the labelled vertices are test).
- Formats with fixed splits take ``split=k``.
- Pickle-based files go through :mod:`gnnpipe.data.safe_pickle`; every low-level read
  failure (missing, truncated or corrupt file) becomes one :class:`DataError` line
  naming the file.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import json
import logging
import re
import tarfile
import warnings
import zipfile
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import scipy.sparse as sp
import torch

from gnnpipe.data.graph import Graph
from gnnpipe.data.safe_pickle import read_npz, safe_pickle_load
from gnnpipe.data.splits import per_class_split
from gnnpipe.errors import DataError

__all__ = [
    "load_planetoid",
    "load_sparsegraph_npz",
    "load_graphdata_npz",
    "load_heterophilous_npz",
    "load_geom_gcn",
    "load_musae",
    "load_linqs_tgz",
    "load_ogb",
    "FORMATS",
    "Format",
]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------ helpers
@contextlib.contextmanager
def _reading(path: str | Path, what: str) -> Iterator[None]:
    """Turn any low-level read failure inside the block into one DataError line."""
    try:
        yield
    except DataError:
        raise
    except FileNotFoundError as exc:
        missing = exc.filename or path
        raise DataError(f"{missing}: expected {what}, found no such file") from None
    except (OSError, EOFError, ValueError, KeyError, IndexError, TypeError, zipfile.BadZipFile,
            tarfile.TarError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(
            f"{path}: expected {what}, found a truncated or corrupt file ({type(exc).__name__}: {exc})"
        ) from None


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        raise DataError(f"{path}: expected {what}, found no such file")
    return path


def _finish(
    edge_index: np.ndarray | torch.Tensor,
    features: Any,
    labels: Any,
    *,
    num_nodes: int,
    name: str,
    symmetrize: bool,
    masks: tuple[Any, Any, Any] | None = None,
    num_classes: int | None = None,
    seed: int = 0,
    train_per_class: int = 20,
    val_per_class: int = 30,
) -> Graph:
    """Assemble, symmetrise, split (when the file has no split) and validate.

    Shapes: edge_index [2, E] (source, destination); features [N, F]; labels [N].
    """
    if sp.issparse(features):
        features = features.toarray()
    feats = np.asarray(features)
    if feats.ndim != 2 or feats.shape[0] != num_nodes:
        raise DataError(f"{name}: features must have shape [N={num_nodes}, F], found {tuple(feats.shape)}")
    y = np.asarray(labels).reshape(-1)
    if y.shape[0] != num_nodes:
        raise DataError(f"{name}: labels must have N={num_nodes} entries, found {y.shape[0]}")
    graph = Graph.from_edge_index(
        torch.as_tensor(np.asarray(edge_index, dtype=np.int64)), feats, y.astype(np.int64),
        num_nodes=num_nodes, num_classes=num_classes, name=name,
    )
    if symmetrize:
        graph = graph.symmetrize()
    if masks is None:
        masks = per_class_split(graph.labels, graph.num_classes, train_per_class=train_per_class,
                                val_per_class=val_per_class, seed=seed)
    return graph.with_masks(*masks).validate()


def _scipy_edges(adj: Any, what: str) -> np.ndarray:
    """[2, E] edge list (row -> column) of a square scipy matrix."""
    if not sp.issparse(adj):
        raise DataError(f"{what}: expected a scipy sparse adjacency matrix, found {type(adj).__name__}")
    if adj.shape[0] != adj.shape[1]:
        raise DataError(f"{what}: expected a square adjacency matrix, found shape {adj.shape}")
    coo = sp.coo_matrix(adj)
    keep = coo.data != 0
    return np.stack([coo.row[keep], coo.col[keep]]).astype(np.int64)


def _compact_labels(labels: np.ndarray, what: str) -> np.ndarray:
    """Class ids renumbered to 0..C-1 in order when some ids are unused (GraphData's
    BlogCatalog and Flickr count classes from 1). Negative ids stay -1 (no label)."""
    y = np.asarray(labels).reshape(-1).astype(np.int64)
    known = y >= 0
    present = np.unique(y[known])
    if present.size and present[-1] != present.size - 1:
        logger.info("%s: renumbering class ids %s to 0..%d", what, present.tolist(), present.size - 1)
        out = np.full_like(y, -1)
        out[known] = np.searchsorted(present, y[known])
        return out
    return np.where(known, y, -1)


def _check_split_index(split: int, count: int, what: str) -> int:
    if isinstance(split, bool) or not isinstance(split, (int, np.integer)) or not 0 <= int(split) < count:
        raise DataError(f"{what}: split must be an integer in [0, {count - 1}], found {split!r}")
    return int(split)


def _numeric_table(data: bytes, dtype: Any, what: str, *, skip_header: bool = False) -> np.ndarray:
    """Parse a comma/whitespace separated numeric table into a 2-D array [rows, width].

    Vectorised: commas become spaces and numpy parses the whole buffer at once; the
    number count must equal rows x width of the first row, so a truncated or
    non-numeric row is detected.
    """
    if skip_header:
        nl = data.find(b"\n")
        data = data[nl + 1:] if nl >= 0 else b""
    text = data.replace(b",", b" ").strip()
    if not text:
        return np.zeros((0, 0), dtype=dtype)
    nl = text.find(b"\n")
    width = len((text if nl < 0 else text[:nl]).split())
    rows = text.count(b"\n") + 1
    with warnings.catch_warnings():
        # numpy warns and stops at the first token it cannot parse; the count check reports it.
        warnings.simplefilter("ignore", DeprecationWarning)
        flat = np.fromstring(text, dtype=dtype, sep=" ")
    if width == 0 or flat.size != width * rows:
        raise DataError(f"{what}: expected {rows} rows of {width} numbers, found {flat.size} numbers in all")
    return flat.reshape(rows, width)


# ------------------------------------------------------------------ Planetoid
_PLANETOID_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


def planetoid_files(folder: str | Path, *, name: str, structure_only: bool = False, split: str | int = "public",
                    splits_dir: str | Path | None = None, **_: Any) -> list[Path]:
    parts = ("y", "ty", "ally", "graph", "test.index") if structure_only else _PLANETOID_PARTS
    files = [Path(folder) / f"ind.{name}.{p}" for p in parts]
    if split != "public" and splits_dir is not None:
        files.append(geom_gcn_split_file(splits_dir, name, split))
    return files


def load_planetoid(
    folder: str | Path,
    *,
    name: str,
    symmetrize: bool = True,
    structure_only: bool = False,
    num_val: int = 500,
    split: str | int = "public",
    splits_dir: str | Path | None = None,
) -> Graph:
    """Planetoid ``ind.<name>.*`` files with the public split, assembled as the GCN loader does.

    Features = allx rows then tx rows placed at the ids of ``test.index``; train = the first
    ``len(y)`` vertices, val = the next ``num_val`` (500, the standard), test = the ids in
    ``test.index``. Test-range ids
    with no tx row (CiteSeer's 15 isolated vertices) get a zero feature row, label -1 and no
    mask. ``split=k`` (with ``splits_dir``) uses the Geom-GCN 60/20/20 split ``k`` instead
    (``<name>_split_0.6_0.2_<k>.npz``, Planetoid vertex order); vertices without a label
    are dropped from its masks. ``structure_only=True`` reads no feature file (features [N, 0]): PubMed's graph,
    labels and split remain usable when ``ind.pubmed.allx`` is missing.
    """
    folder = Path(folder)
    files = dict(zip(_PLANETOID_PARTS, (folder / f"ind.{name}.{p}" for p in _PLANETOID_PARTS)))
    for p in planetoid_files(folder, name=name, structure_only=structure_only):
        _require(p, f"the Planetoid file {p.name}")
    loaded: dict[str, Any] = {}
    for part in ("y", "ty", "ally", "graph") + (() if structure_only else ("x", "tx", "allx")):
        with _reading(files[part], f"a Planetoid pickle ind.{name}.{part}"):
            loaded[part] = safe_pickle_load(files[part].read_bytes(), source=str(files[part]))
    with _reading(files["test.index"], "one vertex id per line"):
        test_idx = np.array(files["test.index"].read_bytes().split(), dtype=np.int64)
    ally, ty, y = (np.asarray(loaded[k]) for k in ("ally", "ty", "y"))
    if ty.shape[0] != test_idx.size:
        raise DataError(f"{files['ty']}: expected {test_idx.size} rows (one per test.index line), found {ty.shape[0]}")
    if test_idx.size and test_idx.min() < 0:
        raise DataError(f"{files['test.index']}: expected non-negative vertex ids, found {int(test_idx.min())}")
    n = int(max(ally.shape[0], int(test_idx.max()) + 1 if test_idx.size else 0))
    num_classes = int(ally.shape[1])
    labels = np.full(n, -1, dtype=np.int64)
    has = ally.sum(1) > 0
    labels[: ally.shape[0]][has] = ally.argmax(1)[has]
    has_t = ty.sum(1) > 0
    labels[test_idx[has_t]] = ty.argmax(1)[has_t]
    if structure_only:
        feats = np.zeros((n, 0), dtype=np.float32)
    else:
        allx, tx = sp.csr_matrix(loaded["allx"]), sp.csr_matrix(loaded["tx"])
        if tx.shape[0] != test_idx.size:
            raise DataError(f"{files['tx']}: expected {test_idx.size} rows (one per test.index line), found {tx.shape[0]}")
        feats = np.zeros((n, allx.shape[1]), dtype=np.float32)
        feats[: allx.shape[0]] = allx.toarray()
        feats[test_idx] = tx.toarray()
    adj = loaded["graph"]
    if not isinstance(adj, dict):
        raise DataError(f"{files['graph']}: expected a dict of adjacency lists, found {type(adj).__name__}")
    src = np.fromiter(chain.from_iterable([k] * len(v) for k, v in adj.items()), dtype=np.int64)
    dst = np.fromiter(chain.from_iterable(adj.values()), dtype=np.int64)
    if split == "public":
        n_train = int(y.shape[0])
        train = np.zeros(n, dtype=bool)
        train[:n_train] = True
        val = np.zeros(n, dtype=bool)
        val[n_train:n_train + num_val] = True
        test = np.zeros(n, dtype=bool)
        test[test_idx] = True
    else:
        if splits_dir is None:
            raise DataError(f"{name} split: split={split!r} needs splits_dir (the Geom-GCN splits folder), found none")
        train, val, test = (m & (labels >= 0) for m in _geom_gcn_masks(splits_dir, name, split, n))
    return _finish(np.stack([src, dst]), feats, labels, num_nodes=n, name=name, symmetrize=symmetrize,
                   masks=(train, val, test), num_classes=num_classes)


# ------------------------------------------------------------------ npz formats
def _csr_from_parts(d: dict[str, Any], prefix: str, what: str) -> sp.csr_matrix | None:
    """A CSR from ``<prefix>_{data,indices,indptr,shape}`` or ``<prefix>.{...}`` keys."""
    for sep in ("_", "."):
        keys = [f"{prefix}{sep}{k}" for k in ("data", "indices", "indptr", "shape")]
        if all(k in d for k in keys):
            data, indices, indptr, shape = (d[k] for k in keys)
            try:
                return sp.csr_matrix((data, indices, indptr), shape=tuple(int(s) for s in shape))
            except ValueError as exc:
                raise DataError(f"{what}: expected a consistent CSR in {prefix}*, found {exc}") from None
    return None


def load_sparsegraph_npz(
    path: str | Path,
    *,
    name: str | None = None,
    symmetrize: bool = True,
    missing_features: str = "identity",
    seed: int = 0,
    train_per_class: int = 20,
    val_per_class: int = 30,
) -> Graph:
    """A SparseGraph ``.npz`` (gnn-benchmark ``adj_*``/``attr_*`` keys or ppnp dotted
    ``adj_matrix.*``/``attr_matrix.*`` keys, ``labels``); also PolBlogs.

    A file without attributes gets ``missing_features``: ``"identity"`` (one-hot vertex
    id, the usual choice for PolBlogs) or ``"ones"`` (one constant column). Pickled
    entries (ppnp's ``metadata``) are never unpickled. Seeded per-class split.
    """
    path = Path(path)
    name = name or path.stem
    d = read_npz(path, pickled_ok=False)
    adj = _csr_from_parts(d, "adj", str(path))
    if adj is None:
        adj = _csr_from_parts(d, "adj_matrix", str(path))
    if adj is None:
        raise DataError(f"{path}: expected adj_data/adj_indices/adj_indptr/adj_shape (or adj_matrix.*) keys, found {sorted(d)}")
    attr = _csr_from_parts(d, "attr", str(path))
    if attr is None:
        attr = _csr_from_parts(d, "attr_matrix", str(path))
    if attr is None and isinstance(d.get("attr_matrix"), np.ndarray):
        attr = d["attr_matrix"]
    n = int(adj.shape[0])
    if attr is None:
        if missing_features == "identity":
            attr = np.eye(n, dtype=np.float32)
        elif missing_features == "ones":
            attr = np.ones((n, 1), dtype=np.float32)
        else:
            raise DataError(f"missing_features: expected 'identity' or 'ones', found {missing_features!r}")
    if "labels" not in d or not isinstance(d["labels"], np.ndarray):
        raise DataError(f"{path}: expected a 'labels' array, found keys {sorted(d)}")
    return _finish(_scipy_edges(adj, str(path)), attr, _compact_labels(d["labels"], str(path)), num_nodes=n, name=name, symmetrize=symmetrize,
                   seed=seed, train_per_class=train_per_class, val_per_class=val_per_class)


def load_graphdata_npz(
    path: str | Path,
    *,
    name: str | None = None,
    symmetrize: bool = True,
    seed: int = 0,
    train_per_class: int = 20,
    val_per_class: int = 30,
) -> Graph:
    """A GraphData ``.npz``: ``adj_matrix`` and ``node_attr`` are 0-d object arrays holding
    pickled scipy matrices (read with the restricted unpickler), ``node_label`` an int array.
    ``metadata`` is never read. Seeded per-class split."""
    path = Path(path)
    name = name or path.stem
    d = read_npz(path, keys={"adj_matrix", "node_attr", "node_label"})
    for key in ("adj_matrix", "node_attr", "node_label"):
        if key not in d:
            raise DataError(f"{path}: expected the key {key!r}, found keys {sorted(d)}")
    adj, attr = d["adj_matrix"], d["node_attr"]
    edges = _scipy_edges(adj, f"{path}[adj_matrix]")
    n = int(adj.shape[0])
    if not (sp.issparse(attr) or isinstance(attr, np.ndarray)):
        raise DataError(f"{path}: expected node_attr to be a matrix, found {type(attr).__name__}")
    return _finish(edges, attr, _compact_labels(d["node_label"], str(path)), num_nodes=n, name=name,
                   symmetrize=symmetrize, seed=seed, train_per_class=train_per_class, val_per_class=val_per_class)


def load_heterophilous_npz(
    path: str | Path, *, name: str | None = None, split: int = 0, symmetrize: bool = True
) -> Graph:
    """A heterophilous-graphs ``.npz`` (Platonov et al. 2023): ``node_features``,
    ``node_labels``, ``edges`` [E, 2] stored once per undirected edge, and 10 fixed splits
    ``train_masks/val_masks/test_masks`` [10, N]; ``split`` picks one."""
    path = Path(path)
    name = name or path.stem
    d = read_npz(path, pickled_ok=False)
    keys = ("node_features", "node_labels", "edges", "train_masks", "val_masks", "test_masks")
    for key in keys:
        if not isinstance(d.get(key), np.ndarray):
            raise DataError(f"{path}: expected the array {key!r}, found keys {sorted(d)}")
    edges = d["edges"]
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise DataError(f"{path}: expected edges of shape [E, 2], found {edges.shape}")
    n = int(d["node_features"].shape[0])
    masks = []
    for key in ("train_masks", "val_masks", "test_masks"):
        m = d[key]
        if m.ndim != 2 or m.shape[1] != n:
            raise DataError(f"{path}: expected {key} of shape [splits, N={n}], found {m.shape}")
        masks.append(m)
    k = _check_split_index(split, masks[0].shape[0], str(path))
    return _finish(edges.T, d["node_features"], d["node_labels"], num_nodes=n, name=name, symmetrize=symmetrize,
                   masks=tuple(m[k] != 0 for m in masks))


# ------------------------------------------------------------------ Geom-GCN raw text
def geom_gcn_split_file(splits_dir: str | Path, name: str, split: int) -> Path:
    return Path(splits_dir) / f"{name}_split_0.6_0.2_{split}.npz"


def _geom_gcn_masks(splits_dir: str | Path, name: str, split: Any, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three bool [N] masks of Geom-GCN split file ``split`` (0..9)."""
    sf = geom_gcn_split_file(splits_dir, name, _check_split_index(split, 10, f"{name} split"))
    d = read_npz(sf, pickled_ok=False)
    try:
        masks = tuple(np.asarray(d[k]).reshape(-1) != 0 for k in ("train_mask", "val_mask", "test_mask"))
    except KeyError:
        raise DataError(f"{sf}: expected train_mask/val_mask/test_mask, found keys {sorted(d)}") from None
    if any(m.shape != (n,) for m in masks):
        raise DataError(f"{sf}: expected masks of length N={n}, found {[m.shape[0] for m in masks]}")
    return masks  # type: ignore[return-value]


def geom_gcn_files(folder: str | Path, *, splits_dir: str | Path | None = None, split: int = 0,
                   name: str | None = None, **_: Any) -> list[Path]:
    folder = Path(folder)
    files = [folder / "out1_node_feature_label.txt", folder / "out1_graph_edges.txt"]
    if splits_dir is not None:
        files.append(geom_gcn_split_file(splits_dir, name or folder.name, split))
    return files


def load_geom_gcn(
    folder: str | Path,
    *,
    name: str | None = None,
    splits_dir: str | Path | None = None,
    split: int = 0,
    symmetrize: bool = True,
    seed: int = 0,
    train_per_class: int = 20,
    val_per_class: int = 30,
) -> Graph:
    """Geom-GCN raw text: ``out1_node_feature_label.txt`` (``id<TAB>features<TAB>label``,
    features a dense 0/1 list, or for film a list of non-zero indices, announced by a
    ``feature_amount`` header) and ``out1_graph_edges.txt`` (``src<TAB>dst``).

    With ``splits_dir`` the fixed 60/20/20 split ``<name>_split_0.6_0.2_<split>.npz`` is
    used, otherwise the seeded per-class split.
    """
    folder = Path(folder)
    name = name or folder.name
    feat_file, edge_file = folder / "out1_node_feature_label.txt", folder / "out1_graph_edges.txt"
    with _reading(feat_file, "Geom-GCN 'node_id<TAB>features<TAB>label' lines"):
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
    m = re.search(r"feature_amount:(\d+)", header)
    if m:  # film: lists of non-zero feature indices
        lens = np.array([a.size for a in lists])
        cols = np.concatenate(lists) if lists else np.zeros(0, np.int64)
        f = max(int(m.group(1)), int(cols.max()) + 1 if cols.size else 0)
        feats = np.zeros((n, f), dtype=np.float32)
        feats.reshape(-1)[np.repeat(ids, lens) * f + cols] = 1.0  # flat index: fast
    else:
        widths = {a.size for a in lists}
        if len(widths) != 1:
            raise DataError(f"{feat_file}: expected dense feature rows of one width, found widths {sorted(widths)[:5]}")
        feats = np.zeros((n, widths.pop()), dtype=np.float32)
        feats[ids] = np.stack(lists)
    labels = np.empty(n, dtype=np.int64)
    labels[ids] = labels_in
    with _reading(edge_file, "Geom-GCN 'src<TAB>dst' lines"):
        edges = _numeric_table(edge_file.read_bytes(), np.int64, str(edge_file), skip_header=True)
    if edges.size and edges.shape[1] != 2:
        raise DataError(f"{edge_file}: expected 2 columns, found {edges.shape[1]}")
    masks = _geom_gcn_masks(splits_dir, name, split, n) if splits_dir is not None else None
    return _finish(edges.reshape(-1, 2).T, feats, labels, num_nodes=n, name=name, symmetrize=symmetrize,
                   masks=masks, seed=seed, train_per_class=train_per_class, val_per_class=val_per_class)


# ------------------------------------------------------------------ MUSAE
def musae_files(folder: str | Path, *, prefix: str, **_: Any) -> list[Path]:
    folder = Path(folder)
    return [folder / f"{prefix}_edges.csv", folder / f"{prefix}.json", folder / f"{prefix}_target.csv"]


def load_musae(
    folder: str | Path,
    *,
    prefix: str,
    name: str | None = None,
    symmetrize: bool = True,
    seed: int = 0,
    train_per_class: int = 20,
    val_per_class: int = 30,
) -> Graph:
    """MUSAE ``<prefix>_edges.csv`` / ``<prefix>.json`` / ``<prefix>_target.csv``.

    Features: binary bag of the feature ids listed per vertex in the JSON (width = largest
    id + 1). Label: ``page_type`` (Facebook, node id column ``id``) or ``mature`` (Twitch,
    node id column ``new_id``); classes are the sorted distinct label strings.
    """
    edge_file, feat_file, target_file = musae_files(folder, prefix=prefix)
    name = name or prefix
    with _reading(target_file, "a MUSAE target csv"):
        with open(target_file, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            cols = reader.fieldnames or []
            if "page_type" in cols:
                id_col, label_col = "id", "page_type"
            elif "mature" in cols and "new_id" in cols:
                id_col, label_col = "new_id", "mature"
            else:
                raise DataError(f"{target_file}: expected a page_type or mature/new_id column, found {cols}")
            pairs = [(row[id_col], row[label_col]) for row in reader]
    n = len(pairs)
    ids = np.array([p[0] for p in pairs], dtype=np.int64)
    if n == 0 or ids.min() < 0 or ids.max() >= n or np.unique(ids).size != n:
        raise DataError(f"{target_file}: expected node ids forming 0..N-1 (N={n}), found another set")
    names, codes = np.unique(np.array([p[1] for p in pairs]), return_inverse=True)
    labels = np.empty(n, dtype=np.int64)
    labels[ids] = codes
    with _reading(feat_file, "a MUSAE JSON of feature-id lists"):
        raw = json.loads(feat_file.read_bytes())
        if not isinstance(raw, dict):
            raise DataError(f"{feat_file}: expected a JSON object of node id -> feature ids, found {type(raw).__name__}")
        rows_in = np.array(list(raw.keys()), dtype=np.int64)
        lens = np.fromiter((len(v) for v in raw.values()), dtype=np.int64, count=len(raw))
        cols = np.fromiter(chain.from_iterable(raw.values()), dtype=np.int64, count=int(lens.sum()))
    if rows_in.size and (rows_in.min() < 0 or rows_in.max() >= n):
        raise DataError(f"{feat_file}: expected node ids in [0, {n}), found range [{rows_in.min()}, {rows_in.max()}]")
    if cols.size and cols.min() < 0:
        raise DataError(f"{feat_file}: expected non-negative feature ids, found {int(cols.min())}")
    feats = np.zeros((n, int(cols.max()) + 1 if cols.size else 0), dtype=np.float32)
    feats.reshape(-1)[np.repeat(rows_in, lens) * feats.shape[1] + cols] = 1.0  # flat index: fast
    with _reading(edge_file, "a MUSAE edge csv"):
        edges = _numeric_table(edge_file.read_bytes(), np.int64, str(edge_file), skip_header=True)
    if edges.size and edges.shape[1] != 2:
        raise DataError(f"{edge_file}: expected 2 columns, found {edges.shape[1]}")
    logger.debug("%s classes: %s", name, list(names))
    return _finish(edges.reshape(-1, 2).T, feats, labels, num_nodes=n, name=name, symmetrize=symmetrize,
                   seed=seed, train_per_class=train_per_class, val_per_class=val_per_class)


# ------------------------------------------------------------------ LINQS tarball
def load_linqs_tgz(
    path: str | Path,
    *,
    name: str | None = None,
    symmetrize: bool = True,
    seed: int = 0,
    train_per_class: int = 20,
    val_per_class: int = 30,
) -> Graph:
    """A LINQS ``.tgz`` (``<name>.content``: ``paper_id features... class``; ``<name>.cites``:
    ``cited citing``), read with :mod:`tarfile` without extracting. Vertices are numbered in
    ``.content`` order; a citation naming a paper absent from ``.content`` is dropped (logged).
    The edge of line ``a b`` is ``a -> b`` (cited -> citing). Seeded per-class split."""
    path = Path(path)
    name = name or path.name.split(".")[0]
    with _reading(path, "a LINQS .tgz with .content and .cites members"):
        with tarfile.open(path, "r:*") as tf:
            members = {Path(m.name).suffix: m for m in tf.getmembers() if m.isfile()}
            if ".content" not in members or ".cites" not in members:
                raise DataError(f"{path}: expected members *.content and *.cites, found {sorted(m for m in members)}")
            content = tf.extractfile(members[".content"]).read().decode()
            cites = tf.extractfile(members[".cites"]).read().decode()
        lines = [ln for ln in content.splitlines() if ln.strip()]
        # Split off the id and the class once per line; numpy parses all feature columns.
        heads = [ln.split(None, 1) for ln in lines]
        if any(len(h) != 2 for h in heads):
            raise DataError(f"{path}: expected '<paper_id> <features...> <class>' rows, found a short row")
        paper = [h[0] for h in heads]
        bodies = [h[1].rsplit(None, 1) for h in heads]
        if any(len(b) != 2 for b in bodies):
            raise DataError(f"{path}: expected '<paper_id> <features...> <class>' rows, found a short row")
        width = len(bodies[0][0].split())
        table = "\n".join(b[0] for b in bodies).encode()
        try:  # LINQS word indicators are 0/1: integer parsing is ~4x faster than float
            feats = _numeric_table(table, np.int64, str(path)).astype(np.float32)
        except DataError:
            feats = _numeric_table(table, np.float32, str(path))
        if feats.shape != (len(lines), width):
            raise DataError(f"{path}: expected .content rows of {width} features, found shape {feats.shape}")
    index = {p: i for i, p in enumerate(paper)}
    if len(index) != len(paper):
        raise DataError(f"{path}: expected distinct paper ids in .content, found {len(paper) - len(index)} repeats")
    names, labels = np.unique(np.array([b[1] for b in bodies]), return_inverse=True)
    pairs = [ln.split() for ln in cites.splitlines() if ln.strip()]
    if any(len(p) != 2 for p in pairs):
        raise DataError(f"{path}: expected two paper ids per .cites line, found another count")
    src = np.array([index.get(a, -1) for a, _ in pairs], dtype=np.int64)
    dst = np.array([index.get(b, -1) for _, b in pairs], dtype=np.int64)
    keep = (src >= 0) & (dst >= 0)
    if not keep.all():
        logger.info("%s: dropped %d citations naming papers absent from .content", path, int((~keep).sum()))
    return _finish(np.stack([src[keep], dst[keep]]), feats, labels, num_nodes=len(paper), name=name,
                   symmetrize=symmetrize, seed=seed, train_per_class=train_per_class, val_per_class=val_per_class)


# ------------------------------------------------------------------ OGB node property prediction
#: Per-dataset facts from ogb/nodeproppred/master.csv: (split folder, add_inverse_edge).
OGB_META: dict[str, tuple[str, bool]] = {
    "ogbn-arxiv": ("time", False),
    "ogbn-products": ("sales_ranking", True),
    "ogbn-mag": ("time", False),
}


def ogb_dir(root: str | Path, name: str) -> Path:
    """``<root>/<name with - replaced by _>``, the folder the ``ogb`` package creates."""
    return Path(root) / name.replace("-", "_")


def _ogb_split_type(folder: Path, split_type: str | None) -> str:
    if split_type is not None:
        return split_type
    kinds = sorted(p.name for p in (folder / "split").iterdir() if p.is_dir()) if (folder / "split").is_dir() else []
    if len(kinds) != 1:
        raise DataError(f"{folder / 'split'}: expected exactly one split folder (or the option split_type), found {kinds}")
    return kinds[0]


def ogb_files(folder: str | Path, *, split_type: str | None = None, **_: Any) -> list[Path]:
    folder = Path(folder)
    raw = folder / "raw"
    files = [raw / f for f in ("edge.csv.gz", "num-node-list.csv.gz", "num-edge-list.csv.gz", "node-label.csv.gz")]
    if (raw / "node-feat.csv.gz").exists():
        files.append(raw / "node-feat.csv.gz")
    kind = _ogb_split_type(folder, split_type)
    files += [folder / "split" / kind / f"{s}.csv.gz" for s in ("train", "valid", "test")]
    return files


def _read_gz_table(path: Path, dtype: Any, *, block_bytes: int = 64 << 20) -> np.ndarray:
    """A gzip csv as a 2-D array, parsed in blocks of whole lines (~``block_bytes`` of
    text each), so that peak memory is the result plus one block, not the whole text
    several times over (ogbn-products' files are GBs of text)."""
    _require(path, "an OGB gzip csv")
    parts: list[np.ndarray] = []
    with _reading(path, "a gzip-compressed csv"):
        with gzip.open(path, "rb") as fh:
            rest = b""
            while True:
                chunk = fh.read(block_bytes)
                data = rest + chunk
                if not chunk:
                    rest = b""
                else:
                    cut = data.rfind(b"\n") + 1
                    data, rest = data[:cut], data[cut:]
                if data.strip():
                    parts.append(_numeric_table(data, dtype, str(path)))
                if not chunk:
                    break
    if not parts:
        return np.zeros((0, 0), dtype=dtype)
    widths = {p.shape[1] for p in parts}
    if len(widths) != 1:
        raise DataError(f"{path}: expected rows of one width, found widths {sorted(widths)}")
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def load_ogb(
    folder: str | Path,
    *,
    name: str | None = None,
    split_type: str | None = None,
    add_inverse_edge: bool | None = None,
    symmetrize: bool = True,
) -> Graph:
    """An OGB node-property dataset in the layout the ``ogb`` package leaves on disk::

        <folder>/raw/edge.csv.gz            E rows "src,dst" (one direction per undirected pair)
        <folder>/raw/num-node-list.csv.gz   one row: N
        <folder>/raw/num-edge-list.csv.gz   one row: E
        <folder>/raw/node-feat.csv.gz       N rows of F floats (optional)
        <folder>/raw/node-label.csv.gz      N rows: class id (empty / nan = no label)
        <folder>/split/<split_type>/{train,valid,test}.csv.gz   vertex ids, one per row

    ``folder`` is ``<root>/ogbn_arxiv`` etc. ``split_type`` defaults to the dataset's
    (``time`` for arxiv, ``sales_ranking`` for products) or the only folder under split/.
    ``add_inverse_edge`` (default from master.csv, False otherwise) only matters with
    ``symmetrize=False``.
    """
    folder = Path(folder)
    name = name or folder.name.replace("_", "-")
    meta = OGB_META.get(name)
    if split_type is None and meta is not None and (folder / "split" / meta[0]).is_dir():
        split_type = meta[0]
    if add_inverse_edge is None:
        add_inverse_edge = meta[1] if meta else False
    raw = folder / "raw"
    n_list = _read_gz_table(raw / "num-node-list.csv.gz", np.int64).reshape(-1)
    e_list = _read_gz_table(raw / "num-edge-list.csv.gz", np.int64).reshape(-1)
    if n_list.size != 1 or e_list.size != 1:
        raise DataError(f"{raw}: expected a single graph (one row in num-node-list/num-edge-list), found {n_list.size}")
    n, e = int(n_list[0]), int(e_list[0])
    edges = _read_gz_table(raw / "edge.csv.gz", np.int64)
    if edges.shape[0] != e or (e and edges.shape[1] != 2):
        raise DataError(f"{raw / 'edge.csv.gz'}: expected {e} rows of 2 ids (num-edge-list), found shape {edges.shape}")
    if (raw / "node-feat.csv.gz").exists():
        feats = _read_gz_table(raw / "node-feat.csv.gz", np.float32)
        if feats.shape[0] != n:
            raise DataError(f"{raw / 'node-feat.csv.gz'}: expected N={n} rows, found {feats.shape[0]}")
    else:
        feats = np.zeros((n, 0), dtype=np.float32)
    lab = _read_gz_table(raw / "node-label.csv.gz", np.float64)
    if lab.shape[0] != n or (n and lab.shape[1] != 1):
        raise DataError(f"{raw / 'node-label.csv.gz'}: expected N={n} rows of one label, found shape {lab.shape}")
    lab = lab.reshape(-1)
    labels = np.where(np.isfinite(lab), lab, -1).astype(np.int64)
    kind = _ogb_split_type(folder, split_type)
    masks = []
    for s in ("train", "valid", "test"):
        idx = _read_gz_table(folder / "split" / kind / f"{s}.csv.gz", np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise DataError(f"{folder / 'split' / kind / (s + '.csv.gz')}: expected vertex ids in [0, {n}), found "
                            f"range [{idx.min()}, {idx.max()}]")
        masks.append(idx)
    ei = edges.T
    if add_inverse_edge and not symmetrize:
        ei = np.concatenate([ei, ei[::-1]], axis=1)
    return _finish(ei, feats, labels, num_nodes=n, name=name, symmetrize=symmetrize, masks=tuple(masks))


# ------------------------------------------------------------------ format table
@dataclass(frozen=True)
class Format:
    """A reader and the list of files it reads (for the cache key)."""

    name: str
    load: Callable[..., Graph]
    files: Callable[..., list[Path]]
    doc: str


def _single_file(path: str | Path, **_: Any) -> list[Path]:
    return [Path(path)]


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("planetoid", load_planetoid, planetoid_files, "folder with ind.<name>.* (option name=)"),
        Format("sparsegraph", load_sparsegraph_npz, _single_file, "SparseGraph .npz file"),
        Format("graphdata", load_graphdata_npz, _single_file, "GraphData .npz file"),
        Format("heterophilous", load_heterophilous_npz, _single_file, "heterophilous-graphs .npz file"),
        Format("geom-gcn", load_geom_gcn, geom_gcn_files, "folder with out1_*.txt (option splits_dir=)"),
        Format("musae", load_musae, musae_files, "folder with <prefix>_edges.csv etc. (option prefix=)"),
        Format("linqs", load_linqs_tgz, _single_file, "LINQS .tgz file"),
        Format("ogb", load_ogb, ogb_files, "OGB dataset folder with raw/ and split/"),
    )
}
