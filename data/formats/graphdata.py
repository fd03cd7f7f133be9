"""GraphData ``.npz`` (EdisonLeeeee/GraphData): pickled scipy matrices in 0-d object arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gnnpipe.data.formats._common import BASE, SEEDED, Format, finish, scipy_edges, single_file
from gnnpipe.data.graph import Graph
from gnnpipe.data.options import LoadOptions
from gnnpipe.data.safe_pickle import read_npz
from gnnpipe.errors import DataError

__all__ = ["load_graphdata_npz", "FORMAT"]

_KEYS = ("adj_matrix", "node_attr", "node_label")


def load_graphdata_npz(path: Path, opts: LoadOptions) -> Graph:
    """A GraphData ``.npz``: ``adj_matrix`` and ``node_attr`` are 0-d object arrays holding
    pickled scipy matrices (read with the restricted unpickler), ``node_label`` an
    integer array (BlogCatalog and Flickr count classes from 1: compacted by the
    finisher). ``metadata`` is never read. Seeded per-class split."""
    path = Path(path)
    d = read_npz(path, keys=set(_KEYS))
    for key in _KEYS:
        if key not in d:
            raise DataError(f"{path}: expected the key {key!r}, found keys {sorted(d)}")
    adj, attr, labels = (d[k] for k in _KEYS)
    edges = scipy_edges(adj, f"{path}[adj_matrix]")
    if not (sp.issparse(attr) or isinstance(attr, np.ndarray)):
        raise DataError(f"{path}: expected node_attr to be a matrix, found {type(attr).__name__}")
    if not isinstance(labels, np.ndarray):
        raise DataError(f"{path}: expected node_label to be an array, found {type(labels).__name__}")
    return finish(edges, attr, labels, num_nodes=int(adj.shape[0]), name=opts.name or path.stem,
                  source=str(path), opts=opts)


FORMAT = Format(
    "graphdata", load_graphdata_npz, single_file, "GraphData .npz file",
    accepts=BASE | SEEDED, title="GraphData npz", split="seeded per class",
)
