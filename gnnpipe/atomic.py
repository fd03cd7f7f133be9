"""Atomic file writes: the one way gnnpipe writes a file that others may read.

Why: a cache entry or a result record that a reader (another rank, a benchmark
script, the next run) sees half written is worse than none. Everything goes to a
temporary file in the target's own folder (so the rename stays on one file system),
is flushed to disk, and then replaces the target in one ``os.replace``. On any error
the temporary file is removed and the target is untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

__all__ = ["atomic_open"]


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb", *, encoding: str | None = None) -> Iterator[IO]:
    """``with atomic_open(path, "wb") as f: f.write(...)``: ``path`` appears complete or
    not at all. The file gets the usual mode (0666 less the umask), not mkstemp's 0600."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', found {mode!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(target.parent))
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        with os.fdopen(fd, mode, encoding=encoding if "b" not in mode else None) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
