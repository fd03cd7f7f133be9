"""The calibration's timer keeps the fastest repeat (the undisturbed machine), after an
untimed warm-up call."""

from __future__ import annotations

import time

from gnnpipe.plan.timing import min_time_s


def test_min_time_keeps_the_fastest_repeat_after_an_untimed_warm_up():
    sleeps = iter([0.2, 0.05, 0.005, 0.05])  # the first call is the warm-up
    calls = []

    def fn():
        calls.append(1)
        time.sleep(next(sleeps))

    t = min_time_s(fn, repeats=3)
    assert len(calls) == 4
    assert 0.005 <= t < 0.05
