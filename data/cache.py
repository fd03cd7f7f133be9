"""A fast binary form of :class:`Graph` and the converted-graph cache built on it.

Parsing a dataset (text, gzip, pickles, per-class splits) takes from a fraction of a second
to minutes; reading the converted graph back is one file read. The cache lives under
``$GNNPIPE_CACHE_DIR`` (default ``~/.cache/gnnpipe``); an entry is keyed by the loader
name, its options, the size and mtime of every source file and :data:`FORMAT_VERSION`,
so editing a source file or changing gnnpipe's conversion invalidates it.

Files use the checksummed layout of :mod:`gnnpipe.data.container` (magic
``GNNPIPEG``): the header lists the graph's name, ``num_classes`` and every array's
dtype, shape, offset and length in the payload, and the feature layout: a dense
``features`` array, or for sparse features (:class:`~gnnpipe.data.sparse.SparseFeatures`)
only their CSR arrays, so a bag-of-words matrix costs its non-zeros, not N x F; the
trailing SHA-256 covers header and payload. Reading memory-maps the file, so a cached load costs about one pass over its
pages (the hash). A file whose magic, version or checksum does not match is *corrupt*:
:func:`read_graph` raises :class:`DataError`, and :func:`cached_load` logs one warning and
rebuilds it. Writes are atomic (:mod:`gnnpipe.atomic`); temporaries a killed writer left
beside an entry are removed when the entry is next opened.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch

from gnnpipe.atomic import remove_stale_temporaries
from gnnpipe.data.container import read_container, write_container
from gnnpipe.data.graph import Graph
from gnnpipe.data.sparse import SparseFeatures
from gnnpipe.errors import DataError

__all__ = ["FORMAT_VERSION", "cache_dir", "cache_key", "write_graph", "read_graph", "cached_load"]

logger = logging.getLogger(__name__)

#: Bump whenever the binary layout or any loader's conversion changes.
#: 2: SHA-256 container (was a word sum over the payload); dtype checks and class-id
#: compaction in every format.
#: 3: sparse features stored as CSR arrays (``features_crow``, ``features_col``,
#: ``features_values``, narrowed losslessly) with the header's ``features`` entry
#: naming the layout.
FORMAT_VERSION = 3
_MAGIC = b"GNNPIPEG"
_ALIGN = 64


def cache_dir() -> Path:
    """The cache folder: ``$GNNPIPE_CACHE_DIR`` or ``~/.cache/gnnpipe``."""
    env = os.environ.get("GNNPIPE_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gnnpipe"


def _source_fingerprint(sources: Iterable[str | Path]) -> list[list[Any]]:
    out = []
    for s in sources:
        p = Path(s).resolve()
        st = p.stat()
        out.append([str(p), int(st.st_size), int(st.st_mtime_ns)])
    return out


def cache_key(loader: str, options: dict[str, Any], sources: Iterable[str | Path]) -> str:
    """Hex digest naming one cache entry (loader + options + source stats + version)."""
    blob = json.dumps(
        {"loader": loader, "options": options, "version": FORMAT_VERSION, "sources": _source_fingerprint(sources)},
        sort_keys=True,
        default=repr,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


# ------------------------------------------------------------------ binary form
def _narrowest(values: np.ndarray, candidates: tuple[Any, ...]) -> np.ndarray:
    """``values`` in the first dtype of ``candidates`` that holds every value exactly
    (the last candidate is the fallback)."""
    for dt in candidates[:-1]:
        info = np.iinfo(dt)
        if values.size == 0 or (values.min() >= info.min and values.max() <= info.max):
            narrow = values.astype(dt)
            if np.array_equal(narrow, values):
                return narrow
    return values.astype(candidates[-1], copy=False)


def _feature_arrays(features: Any) -> dict[str, np.ndarray]:
    """Dense: the [N, F] matrix; sparse: its CSR arrays (never N x F), each in the
    narrowest dtype that holds it exactly: column ids uint16 when F <= 65536, and the
    values of a bag-of-words matrix (small integer counts) uint8 or uint16. Reading
    widens them back (int64 ids, float32 values), so the round trip is exact."""
    if isinstance(features, SparseFeatures):
        f = features.cpu()
        values = f.values.contiguous().numpy()
        with np.errstate(invalid="ignore"):
            integral = bool(values.size) and bool(np.all(np.floor(values) == values))
        return {
            "features_crow": f.crow.numpy(),
            "features_col": _narrowest(f.col.numpy(), (np.uint16, np.int32, np.int64)),
            "features_values": _narrowest(values, (np.uint8, np.uint16, values.dtype)) if integral else values,
        }
    return {"features": features.contiguous().numpy()}


def _graph_arrays(graph: Graph) -> dict[str, np.ndarray]:
    return {
        "indptr": graph.indptr.numpy(),
        "indices": graph.indices.numpy(),
        **_feature_arrays(graph.features),
        "labels": graph.labels.numpy(),
        "train_mask": graph.train_mask.numpy().view(np.uint8),
        "val_mask": graph.val_mask.numpy().view(np.uint8),
        "test_mask": graph.test_mask.numpy().view(np.uint8),
    }


def write_graph(graph: Graph, path: str | Path) -> None:
    """Write ``graph`` to ``path`` atomically; every array 64-byte aligned, none copied."""
    fields: dict[str, Any] = {}
    chunks: list[Any] = []
    offset = 0
    for key, arr in _graph_arrays(graph).items():
        arr = np.ascontiguousarray(arr)
        pad = -arr.nbytes % _ALIGN
        fields[key] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": offset, "nbytes": arr.nbytes}
        chunks += [arr.reshape(-1).view(np.uint8), b"\0" * pad]
        offset += arr.nbytes + pad
    feats = graph.features
    layout = {"layout": "csr" if isinstance(feats, SparseFeatures) else "dense", "shape": list(feats.shape)}
    header = {"name": graph.name, "num_classes": int(graph.num_classes), "fields": fields, "payload_nbytes": offset,
              "features": layout}
    write_container(path, _MAGIC, FORMAT_VERSION, header, chunks)


def read_graph(path: str | Path) -> Graph:
    """Read a graph written by :func:`write_graph`; a damaged file raises DataError.

    The arrays are views of a copy-on-write memory map (file pages, no copy), writable
    by the caller without ever changing the file. Mapped file pages are much cheaper
    than freshly allocated memory for a large feature matrix.
    """
    src = str(path)
    header, payload = read_container(path, _MAGIC, FORMAT_VERSION)
    try:
        if payload.size != int(header["payload_nbytes"]):
            raise DataError(f"{src}: expected a payload of {header['payload_nbytes']} bytes, found {payload.size}")
        arrs: dict[str, torch.Tensor] = {}
        for key, fd in header["fields"].items():
            off, nbytes = int(fd["offset"]), int(fd["nbytes"])
            a = payload[off:off + nbytes].view(np.dtype(fd["dtype"])).reshape(fd["shape"])
            arrs[key] = torch.from_numpy(np.asarray(a))
        layout = header["features"]
        if layout["layout"] == "csr":
            features: Any = SparseFeatures(arrs["features_crow"], arrs["features_col"].to(torch.int64),
                                           arrs["features_values"].to(torch.float32), layout["shape"])
        elif layout["layout"] == "dense":
            features = arrs["features"]
        else:
            raise DataError(f"{src}: expected the feature layout 'csr' or 'dense', found {layout['layout']!r}")
        return Graph(
            indptr=arrs["indptr"],
            indices=arrs["indices"],
            features=features,
            labels=arrs["labels"],
            train_mask=arrs["train_mask"].view(torch.bool),
            val_mask=arrs["val_mask"].view(torch.bool),
            test_mask=arrs["test_mask"].view(torch.bool),
            num_classes=int(header["num_classes"]),
            name=str(header["name"]),
        )
    except DataError:
        raise
    except Exception as exc:  # a header of another shape (missing keys, bad shapes)
        raise DataError(f"{src}: expected a gnnpipe graph header, found a corrupt one "
                        f"({type(exc).__name__}: {exc})") from None


# ------------------------------------------------------------------ the cache
def cached_load(
    loader: str,
    options: dict[str, Any],
    sources: Iterable[str | Path],
    build: Callable[[], Graph],
    *,
    use_cache: bool = True,
) -> Graph:
    """Return the cached conversion of ``sources`` or build, validate and store it.

    ``loader`` and ``options`` (JSON-able) identify the conversion; ``sources`` are the
    files it reads. A corrupt entry is logged as a warning, never used, and rebuilt.
    A cache folder that cannot be written only costs the speed-up (warning).
    """
    if not use_cache:
        return build().validate(require_train=False)
    sources = list(sources)
    key = cache_key(loader, options, sources)
    safe_loader = "".join(c if c.isalnum() or c in "-_" else "_" for c in loader)
    path = cache_dir() / f"{safe_loader}-{key[:24]}.graph"
    remove_stale_temporaries(path)
    if path.exists():
        try:
            # No re-validation: the entry was written from a validated graph and its
            # SHA-256 matches, so it is byte for byte that graph.
            graph = read_graph(path)
            logger.info("cache hit for %s: %s", loader, path)
            return graph
        except DataError as exc:
            logger.warning("ignoring corrupt cache entry, rebuilding it: %s", exc)
    logger.info("cache miss for %s: converting %d source file(s)", loader, len(sources))
    graph = build().validate(require_train=False)
    try:
        write_graph(graph, path)
    except OSError as exc:
        logger.warning("could not write cache entry %s: %s", path, exc)
    return graph
