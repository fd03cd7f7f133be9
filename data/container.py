"""The checksummed file layout of both caches (converted graphs and partitions).

Why one layout: a cache entry is trusted without re-validation, so every byte of it
must be what was written. The SHA-256 at the end covers everything before it (magic,
version, header, payload), so a flipped bit, two swapped words or an edited header
field (``num_classes`` of a graph) are all detected, not only damage that changes a
word sum. Hashing runs at about 1-2 GB/s, a fraction of the time a conversion takes.

File layout (little-endian)::

    magic (8 bytes) | uint32 version | uint64 header length | header JSON | payload | sha256 (32 bytes)

The header JSON is padded with spaces so that the payload starts at a multiple of 64
bytes (arrays viewed from it are aligned).

Writes go through :func:`gnnpipe.atomic.atomic_open` (temporary file + ``os.replace``),
so a reader never sees half a file; reads memory-map the file copy-on-write, so the
payload is a view of the file's pages that callers may modify without touching the file.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from gnnpipe.atomic import atomic_open
from gnnpipe.errors import DataError

__all__ = ["write_container", "read_container", "DIGEST_BYTES"]

_PREFIX = struct.Struct("<8sIQ")
DIGEST_BYTES = 32
_HASH_BLOCK = 64 << 20
_ALIGN = 64


def write_container(path: str | Path, magic: bytes, version: int, header: dict[str, Any],
                    payload: Iterable[Any]) -> None:
    """Write ``header`` (JSON-able) and the ``payload`` buffers (bytes, memoryviews,
    contiguous arrays; written without copies) to ``path`` atomically, with the SHA-256
    of everything as the last 32 bytes."""
    hbytes = json.dumps(header, sort_keys=True).encode()
    hbytes += b" " * (-(_PREFIX.size + len(hbytes)) % _ALIGN)  # the payload starts aligned
    digest = hashlib.sha256()
    with atomic_open(path, "wb") as f:
        for part in (_PREFIX.pack(magic, version, len(hbytes)), hbytes, *payload):
            view = memoryview(part).cast("B")
            digest.update(view)
            f.write(view)
        f.write(digest.digest())


def read_container(path: str | Path, magic: bytes, version: int) -> tuple[dict[str, Any], np.ndarray]:
    """The header and the payload (uint8 view of a copy-on-write memory map) of a file
    written by :func:`write_container` with the same ``magic`` and ``version``.

    Raises :class:`DataError` (one line naming ``path``) for a missing, truncated or
    damaged file, another magic or version, or a header that is not JSON.

    Shapes: -> payload uint8 [payload bytes].
    """
    path = Path(path)
    src = str(path)
    try:
        size = path.stat().st_size
        if size < _PREFIX.size + DIGEST_BYTES:
            raise DataError(f"{src}: expected a checksummed gnnpipe file, found only {size} bytes (truncated)")
        mm = np.memmap(path, dtype=np.uint8, mode="c", shape=(size,))
    except OSError as exc:
        raise DataError(f"{src}: expected a checksummed gnnpipe file, found an unreadable file ({exc})") from None
    body = mm[: size - DIGEST_BYTES]
    digest = hashlib.sha256()
    for start in range(0, body.size, _HASH_BLOCK):
        digest.update(body[start:start + _HASH_BLOCK])
    if digest.digest() != mm[size - DIGEST_BYTES:].tobytes():
        raise DataError(f"{src}: expected the stored SHA-256 of the file, found another (truncated or damaged file)")
    found_magic, found_version, hlen = _PREFIX.unpack_from(mm[:_PREFIX.size].tobytes(), 0)
    if found_magic != magic:
        raise DataError(f"{src}: expected a gnnpipe file with magic {magic!r}, found magic {bytes(found_magic)!r}")
    if found_version != version:
        raise DataError(f"{src}: expected format version {version}, found version {found_version}")
    start = _PREFIX.size + hlen
    if start > body.size:
        raise DataError(f"{src}: expected a header of {hlen} bytes, found the file ends first")
    try:
        header = json.loads(mm[_PREFIX.size:start].tobytes())
    except ValueError as exc:
        raise DataError(f"{src}: expected a JSON header, found {type(exc).__name__}: {exc}") from None
    if not isinstance(header, dict):
        raise DataError(f"{src}: expected a JSON object as header, found {type(header).__name__}")
    return header, body[start:]
