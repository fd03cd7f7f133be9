"""Timing a call on a shared machine: the fastest or the median of a few repeats after an
untimed warm-up (:func:`min_time_s` for the calibration, which plans for an otherwise
idle machine, :func:`median_time_s` for benchmarks), or the fastest of each of several
calls taken in turn (:func:`alternating_min_s`, for a ratio of two timings); and the
memory figures the calibration reads from ``/proc`` (:func:`proc_kib_bytes`)."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

__all__ = ["alternating_min_s", "median_time_s", "min_time_s", "proc_kib_bytes"]


def proc_kib_bytes(path: str, key: str, default: int | None) -> int | None:
    """The bytes of the ``key: N kB`` line of a Linux ``/proc`` file (``/proc/meminfo``,
    ``/proc/self/status``), or ``default`` where there is no such file or line (the
    calibration's resident set and memory, the record's peak memory)."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return default


def _repeat_s(fn: Callable[[], Any], repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` timed calls of ``fn`` after one untimed warm-up."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def median_time_s(fn: Callable[[], Any], repeats: int = 5) -> float:
    """Seconds of one call of ``fn``: the median of ``repeats`` timed calls after one
    untimed warm-up call (benchmarks: the typical call on a shared machine)."""
    return statistics.median(_repeat_s(fn, repeats))


def min_time_s(fn: Callable[[], Any], repeats: int = 7) -> float:
    """Seconds of one call of ``fn``: the fastest of ``repeats`` timed calls after one
    untimed warm-up call (what the machine does undisturbed: a repeat is only ever
    slowed by what else runs, never sped up, the advice of Python's ``timeit``)."""
    return min(_repeat_s(fn, repeats))


def alternating_min_s(calls: Sequence[tuple[Callable[[], Any], Callable[[], Any]]], rounds: int) -> list[float]:
    """Seconds of one call of each ``(prepare, fn)``: ``fn`` timed ``rounds`` times in
    turn with the others (prepare untimed before each; each warmed up once), the
    fastest of each. For a ratio of two timings: a slow spell of a shared machine then
    lands on both rather than on one (the calibration's two-thread speedup)."""
    for prepare, fn in calls:
        prepare()
        fn()  # warm-up
    best = [float("inf")] * len(calls)
    for _ in range(rounds):
        for i, (prepare, fn) in enumerate(calls):
            prepare()
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best
