"""Atomic file writes: the one way gnnpipe writes a file that others may read.

Why: a cache entry or a result record that a reader (another rank, a benchmark
script, the next run) sees half written is worse than none. Everything goes to a
temporary file in the target's own folder (so the rename stays on one file system),
is flushed to disk, and then replaces the target in one ``os.replace``. On any error
the temporary file is removed and the target is untouched.

The temporary is created with ``os.open(O_CREAT | O_EXCL, 0o666)``, so the kernel
applies the umask itself: the process-wide umask is never changed (reading it by
setting it races with every other thread that creates files). It is named
``.{target}.{host}.{pid}.{random}.tmp``, so that its owner can be told: a writer that
was killed (SIGKILL, out of memory) cannot remove its temporary, and
:func:`remove_stale_temporaries` - run by every atomic write of the same target and by
each cache when it opens an entry - removes the temporaries of that target whose
writer is gone: its pid is no longer alive on this host, or the file is older than a
day (another host's writer, or a reused pid).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import socket
import time
from pathlib import Path
from typing import IO, Iterator

__all__ = ["atomic_open", "remove_stale_temporaries", "STALE_AFTER_S"]

logger = logging.getLogger(__name__)

#: A temporary untouched for this long is stale whoever wrote it.
STALE_AFTER_S = 24 * 3600

# Host names are reduced to these characters, so the name splits unambiguously from the right.
_TEMP = re.compile(r"\.(?P<target>.+)\.(?P<host>[A-Za-z0-9_-]+)\.(?P<pid>\d+)\.(?P<token>[0-9a-f]+)\.tmp\Z", re.S)


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname()) or "host"


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` names a live process on this host (signal 0 probes, never kills)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, another user's
        return True
    return True


def remove_stale_temporaries(path: str | os.PathLike[str], *, max_age_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove the temporaries of target ``path`` whose writer is gone; return them.

    A temporary of this host whose pid is not alive is stale; one of any host older
    than ``max_age_s`` (by mtime, which a live writer keeps fresh) is stale too. Others
    (a live writer's, this process's own) are left alone. A folder that cannot be
    listed, or a file that vanishes meanwhile, is skipped silently.
    """
    target = Path(path)
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return []
    host, now, removed = _host(), time.time(), []
    for entry in entries:
        m = _TEMP.match(entry.name)
        if m is None or m["target"] != target.name:
            continue
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        dead = m["host"] == host and os.name == "posix" and not _pid_alive(int(m["pid"]))
        if not dead and age <= max_age_s:
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(Path(entry.path))
            logger.info("removed stale temporary %s (%s)", entry.path,
                        f"writer pid {m['pid']} is gone" if dead else f"untouched for {age / 3600:.0f} h")
    return removed


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb", *, encoding: str | None = None) -> Iterator[IO]:
    """``with atomic_open(path, "wb") as f: f.write(...)``: ``path`` appears complete or
    not at all, with the usual mode (0666 less the umask)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb', found {mode!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    tmp = target.with_name(f".{target.name}.{_host()}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666)
    try:
        with os.fdopen(fd, mode, encoding=encoding if "b" not in mode else None) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
