"""SparseGraph ``.npz`` (gnn-benchmark, ppnp, Nettack's PolBlogs): CSR parts as plain arrays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from gnnpipe.data.formats._common import BASE, SEEDED, Format, check_dtype, finish, scipy_edges, single_file
from gnnpipe.data.graph import Graph
from gnnpipe.data.options import LoadOptions
from gnnpipe.data.safe_pickle import read_npz
from gnnpipe.errors import DataError

__all__ = ["load_sparsegraph_npz", "FORMAT"]


def _csr_from_parts(d: dict[str, Any], prefix: str, what: str) -> sp.csr_matrix | None:
    """A CSR from ``<prefix>_{data,indices,indptr,shape}`` or ``<prefix>.{...}`` keys
    (None when the keys are absent); ids stored as floats are refused."""
    for sep in ("_", "."):
        keys = [f"{prefix}{sep}{k}" for k in ("data", "indices", "indptr", "shape")]
        if all(k in d for k in keys):
            data, indices, indptr, shape = (np.asarray(d[k]) for k in keys)
            check_dtype(data.dtype, f"{what}[{keys[0]}]", "numeric matrix entries", "biuf")
            for key, arr in zip(keys[1:], (indices, indptr, shape)):
                check_dtype(arr.dtype, f"{what}[{key}]", "integer ids", "iu")
            try:
                return sp.csr_matrix((data, indices, indptr), shape=tuple(int(s) for s in shape))
            except ValueError as exc:
                raise DataError(f"{what}: expected a consistent CSR in {prefix}*, found {exc}") from None
    return None


def load_sparsegraph_npz(path: Path, opts: LoadOptions) -> Graph:
    """A SparseGraph ``.npz`` (gnn-benchmark ``adj_*``/``attr_*`` keys or ppnp dotted
    ``adj_matrix.*``/``attr_matrix.*`` keys, ``labels``); also PolBlogs.

    A file without attributes gets ``missing_features``: ``"identity"`` (one-hot vertex
    id, the usual choice for PolBlogs) or ``"ones"`` (one constant column). Pickled
    entries (ppnp's ``metadata``) are never unpickled. Seeded per-class split.
    """
    path = Path(path)
    d = read_npz(path, pickled_ok=False)
    adj = _csr_from_parts(d, "adj", str(path))
    if adj is None:
        adj = _csr_from_parts(d, "adj_matrix", str(path))
    if adj is None:
        raise DataError(f"{path}: expected adj_data/adj_indices/adj_indptr/adj_shape (or adj_matrix.*) keys, "
                        f"found {sorted(d)}")
    attr = _csr_from_parts(d, "attr", str(path))
    if attr is None:
        attr = _csr_from_parts(d, "attr_matrix", str(path))
    if attr is None and isinstance(d.get("attr_matrix"), np.ndarray):
        attr = d["attr_matrix"]
    n = int(adj.shape[0])
    if attr is None:
        # The identity as a scipy matrix: never N x N dense (1/N non-zero: kept sparse).
        attr = (sp.identity(n, dtype=np.float32, format="csr") if opts.missing_features == "identity"
                else np.ones((n, 1), np.float32))
    if not isinstance(d.get("labels"), np.ndarray):
        raise DataError(f"{path}: expected a 'labels' array, found keys {sorted(d)}")
    return finish(scipy_edges(adj, str(path)), attr, d["labels"], num_nodes=n, name=opts.name or path.stem,
                  source=str(path), opts=opts)


FORMAT = Format(
    "sparsegraph", load_sparsegraph_npz, single_file, "SparseGraph .npz file",
    accepts=BASE | SEEDED | {"missing_features"}, title="SparseGraph npz", split="seeded per class",
)
