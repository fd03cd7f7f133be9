"""LINQS ``.tgz`` tarballs (``<name>.content`` + ``<name>.cites``), read without extracting."""

from __future__ import annotations

import logging
import tarfile
from pathlib import Path

import numpy as np

from gnnpipe.data.formats._common import BASE, SEEDED, Format, finish, numeric_table, reading, single_file
from gnnpipe.data.graph import Graph
from gnnpipe.data.options import LoadOptions
from gnnpipe.errors import DataError

__all__ = ["load_linqs_tgz", "FORMAT"]

logger = logging.getLogger(__name__)

_ROW = "'<paper_id> <features...> <class>' rows"


def _content(path: Path, content: str) -> tuple[list[str], np.ndarray, list[str]]:
    """Paper ids, features and class strings of ``.content``. Shapes: features float32 [N, F]."""
    lines = [ln for ln in content.splitlines() if ln.strip()]
    # Split off the id and the class once per line; numpy parses all feature columns.
    heads = [ln.split(None, 1) for ln in lines]
    if any(len(h) != 2 for h in heads):
        raise DataError(f"{path}: expected {_ROW}, found a short row")
    bodies = [h[1].rsplit(None, 1) for h in heads]
    if any(len(b) != 2 for b in bodies):
        raise DataError(f"{path}: expected {_ROW}, found a short row")
    width = len(bodies[0][0].split())
    table = "\n".join(b[0] for b in bodies).encode()
    try:  # LINQS word indicators are 0/1: integer parsing is ~4x faster than float
        feats = numeric_table(table, np.int64, str(path)).astype(np.float32)
    except DataError:
        feats = numeric_table(table, np.float32, str(path))
    if feats.shape != (len(lines), width):
        raise DataError(f"{path}: expected .content rows of {width} features, found shape {feats.shape}")
    return [h[0] for h in heads], feats, [b[1] for b in bodies]


def load_linqs_tgz(path: Path, opts: LoadOptions) -> Graph:
    """A LINQS ``.tgz`` (``<name>.content``: ``paper_id features... class``; ``<name>.cites``:
    ``cited citing``), read with :mod:`tarfile` without extracting. Vertices are numbered in
    ``.content`` order; a citation naming a paper absent from ``.content`` is dropped (logged).
    The edge of line ``a b`` is ``a -> b`` (cited -> citing). Seeded per-class split."""
    path = Path(path)
    with reading(path, "a LINQS .tgz with .content and .cites members"):
        with tarfile.open(path, "r:*") as tf:
            members = {Path(m.name).suffix: m for m in tf.getmembers() if m.isfile()}
            if ".content" not in members or ".cites" not in members:
                raise DataError(f"{path}: expected members *.content and *.cites, found {sorted(m for m in members)}")
            content = tf.extractfile(members[".content"]).read().decode()
            cites = tf.extractfile(members[".cites"]).read().decode()
        paper, feats, classes = _content(path, content)
    index = {p: i for i, p in enumerate(paper)}
    if len(index) != len(paper):
        raise DataError(f"{path}: expected distinct paper ids in .content, found {len(paper) - len(index)} repeats")
    names, labels = np.unique(np.array(classes), return_inverse=True)
    pairs = [ln.split() for ln in cites.splitlines() if ln.strip()]
    if any(len(p) != 2 for p in pairs):
        raise DataError(f"{path}: expected two paper ids per .cites line, found another count")
    src = np.array([index.get(a, -1) for a, _ in pairs], dtype=np.int64)
    dst = np.array([index.get(b, -1) for _, b in pairs], dtype=np.int64)
    keep = (src >= 0) & (dst >= 0)
    if not keep.all():
        logger.info("%s: dropped %d citations naming papers absent from .content", path, int((~keep).sum()))
    return finish(np.stack([src[keep], dst[keep]]), feats, labels, num_nodes=len(paper),
                  name=opts.name or path.name.split(".")[0], source=str(path), opts=opts)


FORMAT = Format(
    "linqs", load_linqs_tgz, single_file, "LINQS .tgz file",
    accepts=BASE | SEEDED, title="LINQS tgz", split="seeded per class",
)
