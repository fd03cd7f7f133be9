"""The host heap's thresholds (glibc's ``mallopt``): an opt-in for CPU runs whose layer
temporaries are large (``train.host_heap_mib``).

glibc serves an allocation above its mmap threshold (adjusted at run time, at most 32
MiB) with a fresh mapping and unmaps it on free, so a temporary of that size is faulted
in again, page by page, every time it is made. A graph-mode worker on the 200,000-vertex
systems graph makes several such temporaries per layer (its own and halo rows x 100
floats, about 55 MB each), and there most of its epoch was page faults: with the heap
serving them and keeping its freed pages it fell from 24.0 to 13.5 s, at a peak resident
set of 6.8 instead of 4.0 GiB per worker, since graph mode's saved tensors sit in that
heap between the temporaries; a pipeline stage, whose saved tensors live in its arena
(:mod:`gnnpipe.engine.saved_arena`), gained 4-5 % at its fourth and fifth epochs at the
same peak
(bench/results/memory_200k/heap/). Off by default for that memory: a run that fits
today must not stop fitting.

With ``mib > 0`` each worker sets ``M_MMAP_THRESHOLD`` to ``mib`` MiB (requests up to
that size come from the heap) and ``M_TRIM_THRESHOLD`` to 2 GiB (freed pages at the
heap's top are kept, not given back to be faulted in again). Nothing is changed where
the C library has no ``mallopt`` (macOS, musl) or where glibc's own variables are set
in the environment (the user's settings stand); the returned state says which, and the
record keeps it (``extra.host_heap``). GPU tensors do not use this heap: there it only
concerns host-side buffers.

:func:`heap_trimmer` is the other side, off by default (``train.host_heap_trim_mib``):
a pipeline or hybrid stage on the CPU calls ``malloc_trim(0)`` after a chunk's forward
or backward where the worker's resident set is then above that many MiB, which gives
the pages of the heap's free blocks back to the system: a cap on the resident set
rather than a rule to trim (the set may pass it during one chunk compute). A stage's
saved tensors live in its arena, so what its heap holds between two chunk computes is
free blocks, kept apart by small objects that outlive a chunk (autograd nodes, tensor
headers) and so not reusable as one block; their pages are most of the gap between a
stage's peak and its live tensors. The price is page faults: after a trim, the next
layers' temporaries land in free blocks whose pages were given back. Measured on the
200k systems graph, GCN-32, C = 8, 6 epochs (bench/results/memory_200k/trim/, epochs 4-6
against the same run without): a cap of 6144 MiB, 14-17 trims a worker, peak 6.43-6.57
against 7.45-7.78 GiB for 1.09-1.17x the epoch; 5120 MiB, 52-55 trims, 5.69 / 5.78 GiB for
1.44x; a trim after every chunk compute, 5.11-5.39 against 7.40-7.80 GiB for 1.36-1.41x
(4.9-5.7x the minor page faults); at C = 2, 3.70-4.05 against 4.03-4.23 GiB, third epochs
no slower. On the dense graphs of ../shared/datasets a worker's resident set is 0.6-0.7
GiB; a trim after every chunk compute made their epochs 1.5-1.9x as long.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any, Callable

__all__ = ["tune_host_heap", "heap_trimmer", "HeapTrim", "STAGE_MODES", "GLIBC_VARIABLES", "M_MMAP_THRESHOLD",
           "M_TRIM_THRESHOLD"]

#: ``mallopt`` parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: glibc reads these at process start; where one is set, gnnpipe changes nothing.
GLIBC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
_INT_MAX = 2**31 - 1  # mallopt takes an int of bytes (train.host_heap_mib is at most 2047)


def _libc_function(name: str, argtypes: list[Any]) -> Callable[..., int] | None:
    """The C library's function ``name`` (int result), or None where it has none."""
    try:
        fn = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return fn  # type: ignore[no-any-return]


def _libc_mallopt() -> Callable[[int, int], int] | None:
    return _libc_function("mallopt", [ctypes.c_int, ctypes.c_int])


def _libc_malloc_trim() -> Callable[[int], int] | None:
    return _libc_function("malloc_trim", [ctypes.c_size_t])


def _resident_bytes() -> Callable[[], int] | None:
    """This process's resident set in bytes (``/proc/self/statm``, Linux: one short line,
    cheap enough to read after every chunk compute), or None where there is no such file."""
    if not os.path.exists("/proc/self/statm"):
        return None
    page = os.sysconf("SC_PAGE_SIZE")

    def resident() -> int:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * page

    return resident


#: The modes whose workers run chunk computes (pipeline stages).
STAGE_MODES = ("pipeline", "hybrid")


class HeapTrim:
    """Called after each chunk compute: ``malloc_trim(0)`` where the worker's resident
    set is then above ``limit_bytes``. ``trims`` counts the trims done."""

    def __init__(self, limit_bytes: int, malloc_trim: Callable[[int], int], resident: Callable[[], int]) -> None:
        self.limit_bytes, self._trim, self._resident = int(limit_bytes), malloc_trim, resident
        self.trims = 0

    def __call__(self) -> None:
        if self._resident() > self.limit_bytes:
            self._trim(0)
            self.trims += 1


def heap_trimmer(limit_mib: int, *, mode: str, device_type: str, host_heap_mib: int,
                 malloc_trim: Callable[[int], int] | None = None,
                 resident: Callable[[], int] | None = None) -> tuple[HeapTrim | None, dict[str, Any]]:
    """What a stage calls after each chunk compute to give the heap's free pages back
    where the worker's resident set is above ``limit_mib`` MiB (module docstring), or
    None; and ``{"applied", "limit_mib", "why"}`` for the record. ``malloc_trim`` and
    ``resident`` replace the C library's and ``/proc``'s (tests)."""
    state: dict[str, Any] = {"applied": False, "limit_mib": int(limit_mib)}
    if limit_mib <= 0:
        return None, {**state, "why": "off (train.host_heap_trim_mib = 0)"}
    if mode not in STAGE_MODES:
        return None, {**state, "why": f"{mode} mode has no chunk computes (pipeline and hybrid stages only)"}
    if device_type != "cpu":
        return None, {**state, "why": f"the stage's tensors are in {device_type} memory, not the host heap"}
    if host_heap_mib > 0:
        return None, {**state, "why": "train.host_heap_mib > 0 keeps the heap's freed pages"}
    trim = _libc_malloc_trim() if malloc_trim is None else malloc_trim
    rss = _resident_bytes() if resident is None else resident
    if trim is None or rss is None:
        return None, {**state, "why": "no malloc_trim (glibc) or no /proc/self/statm (Linux) here"}
    return HeapTrim(int(limit_mib) << 20, trim, rss), {
        **state, "applied": True,
        "why": f"malloc_trim(0) after a chunk's forward or backward where the worker's resident set is then "
               f"above {int(limit_mib)} MiB"}


def tune_host_heap(mib: int, *, mallopt: Callable[[int, int], int] | None = None) -> dict[str, Any]:
    """Raise this process's heap thresholds for ``mib`` MiB (0: leave glibc's); returns
    ``{"mib", "applied", "why"}``. ``mallopt`` replaces the C library's (tests)."""
    state: dict[str, Any] = {"mib": int(mib), "applied": False}
    if mib <= 0:
        return {**state, "why": "off (train.host_heap_mib = 0): glibc's thresholds"}
    given = [v for v in GLIBC_VARIABLES if os.environ.get(v)]
    if given:
        return {**state, "why": f"{', '.join(given)} set in the environment: those settings stand"}
    fn = _libc_mallopt() if mallopt is None else mallopt
    if fn is None:
        return {**state, "why": "this C library has no mallopt"}
    ok = bool(fn(M_MMAP_THRESHOLD, min(int(mib) << 20, _INT_MAX))) and bool(fn(M_TRIM_THRESHOLD, _INT_MAX))
    return {**state, "applied": ok, "why": "mallopt" if ok else "mallopt refused the thresholds"}
