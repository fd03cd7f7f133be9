"""Disk cache of partitions, so that METIS runs once per graph and parameter set.

Location: ``<cache root>/partitions`` where the cache root is
:func:`gnnpipe.data.cache.cache_dir` (``$GNNPIPE_CACHE_DIR``, default
``~/.cache/gnnpipe``).

Key: SHA-256 over :data:`FORMAT_VERSION`, the graph's N and its in-edge CSR
(``indptr``, ``indices``: everything METIS' input is derived from), ``num_parts``,
``method``, ``seed``, the vertex weights (their bytes, or none) and the pymetis version
(another METIS build may partition differently). Features, labels and masks are *not*
hashed: they cannot change a partition, and only the per-vertex part ids are stored;
the permutation, the reordered graph and the plans are rebuilt from them around the
current graph, so a feature change can never make a cached entry wrong.

Files use the checksummed layout of :mod:`gnnpipe.data.container` (magic
``GNNPPART``), the same as the converted-graph cache: the header holds the key and the
parameters, the payload the parts int64 [N], and the trailing SHA-256 covers both. An
entry whose checksum, key, length or part range does not match is corrupt: it is logged
as one warning, never used, and rebuilt. Writes are atomic (:mod:`gnnpipe.atomic`);
temporaries a killed writer left beside an entry are removed when it is next opened.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from gnnpipe.atomic import remove_stale_temporaries
from gnnpipe.data.cache import cache_dir
from gnnpipe.data.container import read_container, write_container
from gnnpipe.data.graph import Graph
from gnnpipe.errors import DataError
from gnnpipe.partition.core import Partition

__all__ = ["FORMAT_VERSION", "partition_cache_dir", "partition_key", "cached_partition",
           "write_partition", "read_partition", "CorruptEntry"]

logger = logging.getLogger(__name__)

#: Bump whenever the file layout or the meaning of a stored partition changes.
#: 2: the shared SHA-256 container of gnnpipe.data.container.
FORMAT_VERSION = 2
_MAGIC = b"GNNPPART"


class CorruptEntry(Exception):
    """A cache file that must not be used (internal: always caught and rebuilt)."""


def partition_cache_dir(root: str | Path | None = None) -> Path:
    """``root / "partitions"``; ``root`` defaults to the gnnpipe cache root."""
    return Path(root).expanduser() / "partitions" if root is not None else cache_dir() / "partitions"


def _method_version(method: str) -> str:
    if method == "metis":
        import pymetis

        return f"pymetis-{getattr(pymetis, 'version', '?')}"
    return "builtin"


def partition_key(
    graph: Graph, num_parts: int, method: str, seed: int, vertex_weights: torch.Tensor | None
) -> str:
    """Hex SHA-256 naming one cache entry (see the module docstring for what it covers).

    Shapes: vertex_weights int64 [N] or None."""
    h = hashlib.sha256()
    params = {
        "format": FORMAT_VERSION,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "num_parts": int(num_parts),
        "method": method,
        "seed": int(seed),
        "weights": vertex_weights is not None,
        "impl": _method_version(method),
    }
    h.update(json.dumps(params, sort_keys=True).encode())
    h.update(graph.indptr.to(torch.int64).contiguous().numpy().tobytes())
    h.update(graph.indices.to(torch.int64).contiguous().numpy().tobytes())
    if vertex_weights is not None:
        h.update(vertex_weights.to(torch.int64).contiguous().numpy().tobytes())
    return h.hexdigest()


def write_partition(partition: Partition, key: str, path: str | Path) -> None:
    """Write ``partition`` under ``key`` to ``path`` atomically."""
    header = {
        "key": key,
        "num_nodes": partition.num_nodes,
        "num_parts": partition.num_parts,
        "method": partition.method,
        "seed": partition.seed,
    }
    parts = np.ascontiguousarray(partition.parts.to(torch.int64).numpy().astype("<i8"))
    write_container(path, _MAGIC, FORMAT_VERSION, header, [parts])


def read_partition(path: str | Path, key: str) -> Partition:
    """Read the entry at ``path``; raise :class:`CorruptEntry` (one line naming the
    file) unless its checksum, key and contents are all valid."""
    try:
        header, payload = read_container(path, _MAGIC, FORMAT_VERSION)
    except DataError as exc:
        raise CorruptEntry(str(exc)) from None
    try:
        num_nodes, num_parts = int(header["num_nodes"]), int(header["num_parts"])
        stored_key, method, seed = str(header["key"]), str(header["method"]), int(header["seed"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptEntry(f"{path}: bad header ({type(exc).__name__}: {exc})") from None
    if stored_key != key:
        raise CorruptEntry(f"{path}: key {stored_key[:16]}... belongs to another graph or parameter set")
    if payload.size != 8 * num_nodes:
        raise CorruptEntry(f"{path}: payload of {payload.size} bytes, expected {8 * num_nodes}")
    parts = torch.from_numpy(payload.view("<i8").astype(np.int64))
    if num_nodes and (int(parts.min()) < 0 or int(parts.max()) >= num_parts):
        raise CorruptEntry(f"{path}: part ids out of range")
    return Partition.from_parts(parts, num_parts, method=method, seed=seed)


def cached_partition(
    graph: Graph,
    num_parts: int,
    method: str,
    seed: int,
    vertex_weights: torch.Tensor | None,
    build: Callable[[], Partition],
    *,
    cache_root: str | Path | None = None,
) -> Partition:
    """The cached partition for these parameters, or ``build()`` stored for next time.

    A corrupt or mismatching entry is logged as a warning and rebuilt; a folder that
    cannot be written costs only the speed-up (warning)."""
    key = partition_key(graph, num_parts, method, seed, vertex_weights)
    path = partition_cache_dir(cache_root) / f"{method}-{num_parts}-{key[:32]}.gpart"
    remove_stale_temporaries(path)
    if path.exists():
        try:
            part = read_partition(path, key)
            if part.num_nodes != graph.num_nodes or part.num_parts != num_parts:
                raise CorruptEntry(f"{path}: stored sizes do not match the request")
            logger.info("partition cache hit: %s", path)
            return part
        except CorruptEntry as exc:
            logger.warning("ignoring corrupt partition cache entry, rebuilding it: %s", exc)
    logger.info("partition cache miss: %s %d parts of %s", method, num_parts, graph.name)
    part = build()
    try:
        write_partition(part, key, path)
    except OSError as exc:
        logger.warning("could not write partition cache entry %s: %s", path, exc)
    return part
