"""MUSAE (Rozemberczki et al.): ``<prefix>_edges.csv``, ``<prefix>.json``, ``<prefix>_target.csv``."""

from __future__ import annotations

import csv
import json
import logging
from itertools import chain
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gnnpipe.data.formats._common import BASE, SEEDED, Format, finish, int_array, numeric_table, reading
from gnnpipe.data.graph import Graph
from gnnpipe.data.options import LoadOptions
from gnnpipe.errors import DataError

__all__ = ["load_musae", "musae_files", "FORMAT"]

logger = logging.getLogger(__name__)


def musae_files(folder: Path, opts: LoadOptions) -> list[Path]:
    """The edge csv, the feature JSON and the target csv of ``opts.prefix``."""
    folder, prefix = Path(folder), opts.prefix
    return [folder / f"{prefix}_edges.csv", folder / f"{prefix}.json", folder / f"{prefix}_target.csv"]


def _targets(target_file: Path) -> tuple[np.ndarray, np.ndarray]:
    """Node ids and their label strings from the target csv (Facebook: ``id`` /
    ``page_type``; Twitch: ``new_id`` / ``mature``). Shapes: -> int64 [N], str [N]."""
    with reading(target_file, "a MUSAE target csv"):
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
        ids = np.array([p[0] for p in pairs], dtype=np.int64)
    return ids, np.array([p[1] for p in pairs])


def _features(feat_file: Path, n: int) -> sp.csr_matrix:
    """Binary bag of the feature ids listed per vertex (width = largest id + 1), as a
    scipy CSR (never N x F dense: the finisher picks the layout); ids that are not
    integers are refused. Shapes: -> float32 [N, F]."""
    with reading(feat_file, "a MUSAE JSON of integer feature-id lists"):
        raw = json.loads(feat_file.read_bytes())
        if not isinstance(raw, dict):
            raise DataError(f"{feat_file}: expected a JSON object of node id -> feature ids, "
                            f"found {type(raw).__name__}")
        rows_in = np.array(list(raw.keys()), dtype=np.int64)
        lens = np.fromiter((len(v) for v in raw.values()), dtype=np.int64, count=len(raw))
        cols = int_array(chain.from_iterable(raw.values()), f"{feat_file} feature ids")
    if rows_in.size and (rows_in.min() < 0 or rows_in.max() >= n):
        raise DataError(f"{feat_file}: expected node ids in [0, {n}), found range [{rows_in.min()}, {rows_in.max()}]")
    if cols.size and cols.min() < 0:
        raise DataError(f"{feat_file}: expected non-negative feature ids, found {int(cols.min())}")
    width = int(cols.max()) + 1 if cols.size else 0
    feats = sp.csr_matrix((np.ones(cols.size, np.float32), (np.repeat(rows_in, lens), cols)), shape=(n, width))
    feats.sum_duplicates()
    feats.data[:] = 1.0  # a bag of ids: an id listed twice is still 1
    return feats


def load_musae(folder: Path, opts: LoadOptions) -> Graph:
    """A MUSAE dataset: classes are the sorted distinct label strings of the target csv,
    features the binary bags of :func:`_features`, edges the csv's id pairs. Seeded
    per-class split."""
    edge_file, feat_file, target_file = musae_files(folder, opts)
    name = opts.name or opts.prefix
    ids, label_text = _targets(target_file)
    n = ids.size
    if n == 0 or ids.min() < 0 or ids.max() >= n or np.unique(ids).size != n:
        raise DataError(f"{target_file}: expected node ids forming 0..N-1 (N={n}), found another set")
    names, codes = np.unique(label_text, return_inverse=True)
    labels = np.empty(n, dtype=np.int64)
    labels[ids] = codes
    feats = _features(feat_file, n)
    with reading(edge_file, "a MUSAE edge csv"):
        edges = numeric_table(edge_file.read_bytes(), np.int64, str(edge_file), skip_header=True)
    if edges.size and edges.shape[1] != 2:
        raise DataError(f"{edge_file}: expected 2 columns, found {edges.shape[1]}")
    logger.debug("%s classes: %s", name, list(names))
    return finish(edges.reshape(-1, 2).T, feats, labels, num_nodes=n, name=name, source=str(Path(folder)),
                  opts=opts)


FORMAT = Format(
    "musae", load_musae, musae_files, "folder with <prefix>_edges.csv etc. (option prefix=)",
    accepts=BASE | SEEDED | {"prefix"}, required=frozenset({"prefix"}), title="MUSAE", split="seeded per class",
)
