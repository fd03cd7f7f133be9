"""Timing a call on a shared machine: the fastest or the median of a few repeats after an
untimed warm-up (:func:`min_time_s` for the calibration, which plans for an otherwise
idle machine, :func:`median_time_s` for benchmarks)."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

__all__ = ["median_time_s", "min_time_s"]


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
