"""Fixtures of tests/data: a writer for the OGB node-property layout."""

from __future__ import annotations

import gzip
from types import SimpleNamespace

import numpy as np
import pytest

N_OGB = 7
OGB_EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 4], [0, 4]])
OGB_FEATS = np.arange(N_OGB * 3, dtype=np.float32).reshape(N_OGB, 3) / 7.0
OGB_LABELS = np.array([0, 1, 2, 0, 1, 2, 0])
OGB_SPLIT = {"train": [0, 1, 2], "valid": [3, 4], "test": [5, 6]}


def _gz(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        fh.write(text)


def _rows(a) -> str:
    a = np.asarray(a)
    a = a.reshape(len(a), -1)
    return "".join(",".join(repr(float(v)) if a.dtype.kind == "f" else str(int(v)) for v in row) + "\n" for row in a)


def write_ogb(root, name="ogbn-arxiv", split_type="time", labels=OGB_LABELS, edges=OGB_EDGES, n=N_OGB):
    """The layout the ogb package leaves on disk: <root>/<name with - as _>/raw, split/<type>."""
    d = root / name.replace("-", "_")
    _gz(d / "raw" / "edge.csv.gz", _rows(edges))
    _gz(d / "raw" / "num-node-list.csv.gz", f"{n}\n")
    _gz(d / "raw" / "num-edge-list.csv.gz", f"{len(edges)}\n")
    _gz(d / "raw" / "node-feat.csv.gz", _rows(OGB_FEATS))
    _gz(d / "raw" / "node-label.csv.gz", _rows(labels))
    for s, idx in OGB_SPLIT.items():
        _gz(d / "split" / split_type / f"{s}.csv.gz", _rows(idx))
    return d


@pytest.fixture
def ogb() -> SimpleNamespace:
    """The OGB fixture writer and the arrays it writes."""
    return SimpleNamespace(write=write_ogb, gz=_gz, N=N_OGB, EDGES=OGB_EDGES, FEATS=OGB_FEATS,
                           LABELS=OGB_LABELS, SPLIT=OGB_SPLIT)
