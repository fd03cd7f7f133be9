"""heterophilous-graphs ``.npz`` (Platonov et al. 2023): plain arrays with 10 stored splits."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnnpipe.data.formats._common import BASE, Format, check_split_index, finish, single_file, stored_mask
from gnnpipe.data.graph import Graph
from gnnpipe.data.options import LoadOptions
from gnnpipe.data.safe_pickle import read_npz
from gnnpipe.errors import DataError

__all__ = ["load_heterophilous_npz", "FORMAT"]

_KEYS = ("node_features", "node_labels", "edges", "train_masks", "val_masks", "test_masks")


def load_heterophilous_npz(path: Path, opts: LoadOptions) -> Graph:
    """``node_features``, ``node_labels``, ``edges`` [E, 2] stored once per undirected
    edge, and 10 fixed splits ``train_masks/val_masks/test_masks`` bool [10, N];
    ``split`` (default 0) picks one."""
    path = Path(path)
    d = read_npz(path, pickled_ok=False)
    for key in _KEYS:
        if not isinstance(d.get(key), np.ndarray):
            raise DataError(f"{path}: expected the array {key!r}, found keys {sorted(d)}")
    edges = d["edges"]
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise DataError(f"{path}: expected edges of shape [E, 2], found {edges.shape}")
    n = int(d["node_features"].shape[0])
    masks = []
    for key in ("train_masks", "val_masks", "test_masks"):
        m = stored_mask(d[key], f"{path}[{key}]", zero_one_ok=False)
        if m.ndim != 2 or m.shape[1] != n:
            raise DataError(f"{path}: expected {key} of shape [splits, N={n}], found {m.shape}")
        masks.append(m)
    k = check_split_index(0 if opts.split is None else opts.split, masks[0].shape[0], str(path))
    return finish(edges.T, d["node_features"], d["node_labels"], num_nodes=n, name=opts.name or path.stem,
                  source=str(path), opts=opts, masks=(masks[0][k], masks[1][k], masks[2][k]))


FORMAT = Format(
    "heterophilous", load_heterophilous_npz, single_file, "heterophilous-graphs .npz file",
    accepts=BASE | {"split"}, title="heterophilous", split="10 fixed (split=k)",
)
