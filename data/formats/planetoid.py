"""Planetoid ``ind.<name>.*`` files (Cora, CiteSeer, PubMed), assembled as the GCN loader does."""

from __future__ import annotations

from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from gnnpipe.data.formats._common import BASE, Format, check_dtype, finish, int_array, reading, require
from gnnpipe.data.formats.geom_gcn import geom_gcn_masks, geom_gcn_split_file
from gnnpipe.data.graph import Graph
from gnnpipe.data.options import LoadOptions
from gnnpipe.data.safe_pickle import safe_pickle_load
from gnnpipe.errors import DataError

__all__ = ["load_planetoid", "planetoid_files", "FORMAT"]

_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
_LABEL_PARTS = ("y", "ty", "ally")


def _split(opts: LoadOptions) -> int | str:
    return "public" if opts.split is None else opts.split


def planetoid_files(folder: Path, opts: LoadOptions) -> list[Path]:
    """The ``ind.<name>.*`` files read (no feature files with ``structure_only``), plus
    the Geom-GCN split file when ``split=k``."""
    parts = ("y", "ty", "ally", "graph", "test.index") if opts.structure_only else _PARTS
    files = [Path(folder) / f"ind.{opts.name}.{p}" for p in parts]
    if _split(opts) != "public" and opts.splits_dir is not None:
        files.append(geom_gcn_split_file(opts.splits_dir, opts.name, _split(opts)))
    return files


def _one_hot(loaded: dict[str, Any], files: dict[str, Path]) -> tuple[np.ndarray, ...]:
    """y, ty, ally as 2-D integer one-hot arrays (a float or string array is refused)."""
    out = []
    for part in _LABEL_PARTS:
        a = loaded[part]
        if not isinstance(a, np.ndarray) or a.ndim != 2:
            raise DataError(f"{files[part]}: expected a 2-D one-hot label array, found {type(a).__name__} "
                            f"{getattr(a, 'shape', '')}")
        check_dtype(a.dtype, str(files[part]), "integer one-hot labels", "biu")
        out.append(a)
    return tuple(out)


def load_planetoid(folder: Path, opts: LoadOptions) -> Graph:
    """Planetoid ``ind.<name>.*`` files with the public split, assembled as the GCN loader does.

    Features = allx rows then tx rows placed at the ids of ``test.index``; train = the
    first ``len(y)`` vertices, val = the next ``num_val`` (500, the standard), test = the
    ids in ``test.index``. Test-range ids with no tx row (CiteSeer's 15 isolated
    vertices) get a zero feature row, label -1 and no mask. ``split=k`` (with
    ``splits_dir``) uses the Geom-GCN 60/20/20 split ``k`` instead
    (``<name>_split_0.6_0.2_<k>.npz``, Planetoid vertex order); vertices without a label
    are dropped from its masks. ``structure_only=True`` reads no feature file (features
    [N, 0]): PubMed's graph, labels and split remain usable when ``ind.pubmed.allx`` is
    missing. The class count is the one-hot width.
    """
    folder, name = Path(folder), opts.name
    files = dict(zip(_PARTS, (folder / f"ind.{name}.{p}" for p in _PARTS)))
    for p in planetoid_files(folder, opts):
        require(p, f"the Planetoid file {p.name}")
    loaded: dict[str, Any] = {}
    for part in ("y", "ty", "ally", "graph") + (() if opts.structure_only else ("x", "tx", "allx")):
        with reading(files[part], f"a Planetoid pickle ind.{name}.{part}"):
            loaded[part] = safe_pickle_load(files[part].read_bytes(), source=str(files[part]))
    with reading(files["test.index"], "one integer vertex id per line"):
        test_idx = np.array(files["test.index"].read_bytes().split(), dtype=np.int64)
    y, ty, ally = _one_hot(loaded, files)
    if ty.shape[0] != test_idx.size:
        raise DataError(f"{files['ty']}: expected {test_idx.size} rows (one per test.index line), found {ty.shape[0]}")
    if test_idx.size and test_idx.min() < 0:
        raise DataError(f"{files['test.index']}: expected non-negative vertex ids, found {int(test_idx.min())}")
    n = int(max(ally.shape[0], int(test_idx.max()) + 1 if test_idx.size else 0))
    labels = np.full(n, -1, dtype=np.int64)
    has = ally.sum(1) > 0
    labels[: ally.shape[0]][has] = ally.argmax(1)[has]
    has_t = ty.sum(1) > 0
    labels[test_idx[has_t]] = ty.argmax(1)[has_t]
    if opts.structure_only:
        feats: Any = np.zeros((n, 0), dtype=np.float32)
    else:
        for part in ("tx", "allx"):
            if not (sp.issparse(loaded[part]) or isinstance(loaded[part], np.ndarray)):
                raise DataError(f"{files[part]}: expected a feature matrix, found {type(loaded[part]).__name__}")
            check_dtype(loaded[part].dtype, str(files[part]), "numeric features", "biuf")
        allx, tx = sp.csr_matrix(loaded["allx"]), sp.csr_matrix(loaded["tx"])
        if tx.shape[0] != test_idx.size:
            raise DataError(f"{files['tx']}: expected {test_idx.size} rows (one per test.index line), "
                            f"found {tx.shape[0]}")
        feats = np.zeros((n, allx.shape[1]), dtype=np.float32)
        feats[: allx.shape[0]] = allx.toarray()
        feats[test_idx] = tx.toarray()
    adj = loaded["graph"]
    if not isinstance(adj, dict):
        raise DataError(f"{files['graph']}: expected a dict of adjacency lists, found {type(adj).__name__}")
    with reading(files["graph"], "a dict of integer adjacency lists"):
        src = int_array(chain.from_iterable([k] * len(v) for k, v in adj.items()), f"{files['graph']} vertex ids")
        dst = int_array(chain.from_iterable(adj.values()), f"{files['graph']} neighbour ids")
    if _split(opts) == "public":
        n_train = int(y.shape[0])
        train = np.zeros(n, dtype=bool)
        train[:n_train] = True
        val = np.zeros(n, dtype=bool)
        val[n_train:n_train + opts.num_val] = True
        test = np.zeros(n, dtype=bool)
        test[test_idx] = True
    else:
        if opts.splits_dir is None:
            raise DataError(f"{name} split: split={_split(opts)!r} needs splits_dir (the Geom-GCN splits folder), "
                            "found none")
        train, val, test = (m & (labels >= 0) for m in geom_gcn_masks(opts.splits_dir, name, _split(opts), n))
    return finish(np.stack([src, dst]), feats, labels, num_nodes=n, name=name, source=str(folder), opts=opts,
                  masks=(train, val, test), num_classes=int(ally.shape[1]))


FORMAT = Format(
    "planetoid", load_planetoid, planetoid_files, "folder with ind.<name>.* (option name=)",
    accepts=BASE | {"structure_only", "num_val", "split", "splits_dir"}, required=frozenset({"name"}),
    title="Planetoid", split="public (or split=k: Geom-GCN 60/20/20)",
)
