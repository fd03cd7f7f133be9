"""A fast binary form of :class:`Graph` and the converted-graph cache built on it.

Parsing a dataset (text, gzip, pickles, per-class splits) takes from a fraction of a second
to minutes; reading the converted graph back is one file read. The cache lives under
``$GNNPIPE_CACHE_DIR`` (default ``~/.cache/gnnpipe``); an entry is keyed by the loader
name, its options, the size and mtime of every source file and :data:`FORMAT_VERSION`,
so editing a source file or changing gnnpipe's conversion invalidates it.

File layout (little-endian)::

    b"GNNPIPEG" | uint32 format version | uint64 header length | header JSON | payload

The header lists every array's dtype, shape, offset and length in the payload, the
payload length and a checksum (wrap-around sum of its 64-bit words). Reading
memory-maps the file, so a cached load costs about one pass over its pages. A file whose
magic, version, length or checksum does not match is *corrupt*: :func:`read_graph`
raises :class:`DataError`, and :func:`cached_load` logs a warning and rebuilds it.
Writes go to a temporary file in the same folder followed by :func:`os.replace`, so a
crash never leaves a half-written entry under the final name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch

from gnnpipe.atomic import atomic_open
from gnnpipe.data.graph import Graph
from gnnpipe.errors import DataError

__all__ = ["FORMAT_VERSION", "cache_dir", "cache_key", "write_graph", "read_graph", "cached_load"]

logger = logging.getLogger(__name__)

#: Bump whenever the binary layout or any loader's conversion changes.
FORMAT_VERSION = 1
_MAGIC = b"GNNPIPEG"
_PREFIX = struct.Struct("<8sIQ")
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
def _graph_arrays(graph: Graph) -> dict[str, np.ndarray]:
    return {
        "indptr": graph.indptr.numpy(),
        "indices": graph.indices.numpy(),
        "features": graph.features.contiguous().numpy(),
        "labels": graph.labels.numpy(),
        "train_mask": graph.train_mask.numpy().view(np.uint8),
        "val_mask": graph.val_mask.numpy().view(np.uint8),
        "test_mask": graph.test_mask.numpy().view(np.uint8),
    }


def _word_sum(buf: Any) -> int:
    """Wrap-around sum of the 64-bit words of ``buf`` (length a multiple of 8).

    Memory-bandwidth fast, unlike CRC-32 on hundreds of MB; it detects truncation and
    any change that alters the sum (the writes are atomic, so this guards against
    damage on disk, not against an adversary)."""
    words = np.frombuffer(buf, dtype="<u8")
    return int(np.add.reduce(words, dtype=np.uint64)) if words.size else 0


def write_graph(graph: Graph, path: str | Path) -> None:
    """Write ``graph`` to ``path`` atomically (temp file in the same folder + os.replace)."""
    path = Path(path)
    arrays = _graph_arrays(graph)
    fields: dict[str, Any] = {}
    offset = 0
    for key, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        arrays[key] = arr
        fields[key] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": offset, "nbytes": arr.nbytes}
        offset += -(-arr.nbytes // _ALIGN) * _ALIGN
    payload_len = offset
    checksum = 0
    for arr in arrays.values():
        checksum = (checksum + _array_word_sum(arr)) % (1 << 64)
    header = {
        "name": graph.name,
        "num_classes": int(graph.num_classes),
        "fields": fields,
        "payload_nbytes": payload_len,
        "checksum": checksum,
    }
    hbytes = json.dumps(header, sort_keys=True).encode()
    with atomic_open(path, "wb") as f:
        f.write(_PREFIX.pack(_MAGIC, FORMAT_VERSION, len(hbytes)))
        f.write(hbytes)
        for arr in arrays.values():
            f.write(arr.reshape(-1).view(np.uint8).data)  # no copy of large arrays
            f.write(b"\0" * (-arr.nbytes % _ALIGN))


def _array_word_sum(arr: np.ndarray) -> int:
    """:func:`_word_sum` of the array's bytes zero-padded to a multiple of 8, without a copy."""
    raw = arr.reshape(-1).view(np.uint8)
    whole = raw.size - raw.size % 8
    total = _word_sum(raw[:whole])
    if whole < raw.size:
        tail = np.zeros(8, dtype=np.uint8)
        tail[: raw.size - whole] = raw[whole:]
        total += _word_sum(tail)
    return total % (1 << 64)


def read_graph(path: str | Path) -> Graph:
    """Read a graph written by :func:`write_graph`; a damaged file raises DataError.

    The file is memory-mapped copy-on-write: the arrays are views of the mapping (file
    pages, no copy), writable by the caller without ever changing the file. Mapped file
    pages are much cheaper than freshly allocated memory for a large feature matrix.
    """
    path = Path(path)
    src = str(path)
    try:
        size = path.stat().st_size
        if size < _PREFIX.size:
            raise DataError(f"{src}: expected a gnnpipe graph file, found only {size} bytes (truncated)")
        mm = np.memmap(path, dtype=np.uint8, mode="c", shape=(size,))
    except OSError as exc:
        raise DataError(f"{src}: expected a gnnpipe graph file, found an unreadable file ({exc})") from None
    magic, version, hlen = _PREFIX.unpack_from(mm[:_PREFIX.size].tobytes(), 0)
    if magic != _MAGIC:
        raise DataError(f"{src}: expected a gnnpipe graph file (magic {_MAGIC!r}), found magic {bytes(magic)!r}")
    if version != FORMAT_VERSION:
        raise DataError(f"{src}: expected graph format version {FORMAT_VERSION}, found version {version}")
    try:
        start = _PREFIX.size + hlen
        if start > size:
            raise DataError(f"{src}: expected a header of {hlen} bytes, found the file ends first (truncated)")
        header = json.loads(mm[_PREFIX.size:start].tobytes())
        payload = mm[start:]
        if payload.size != int(header["payload_nbytes"]):
            raise DataError(
                f"{src}: expected a payload of {header['payload_nbytes']} bytes, found {payload.size} (truncated)"
            )
        if _word_sum(payload) != int(header["checksum"]):
            raise DataError(f"{src}: payload checksum mismatch (corrupt file)")
        arrs: dict[str, torch.Tensor] = {}
        for key, fd in header["fields"].items():
            off, nbytes = int(fd["offset"]), int(fd["nbytes"])
            a = payload[off:off + nbytes].view(np.dtype(fd["dtype"])).reshape(fd["shape"])
            arrs[key] = torch.from_numpy(np.asarray(a))
        graph = Graph(
            indptr=arrs["indptr"],
            indices=arrs["indices"],
            features=arrs["features"],
            labels=arrs["labels"],
            train_mask=arrs["train_mask"].view(torch.bool),
            val_mask=arrs["val_mask"].view(torch.bool),
            test_mask=arrs["test_mask"].view(torch.bool),
            num_classes=int(header["num_classes"]),
            name=str(header["name"]),
        )
    except DataError:
        raise
    except Exception as exc:  # malformed header JSON, missing keys, bad shapes
        raise DataError(f"{src}: expected a gnnpipe graph file, found a corrupt header ({type(exc).__name__}: {exc})") from None
    return graph


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
    if path.exists():
        try:
            # No re-validation: the entry was written from a validated graph and its CRC
            # matches, so it is byte for byte that graph.
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
