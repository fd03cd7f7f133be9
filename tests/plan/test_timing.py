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


def test_proc_figures_are_read_in_bytes_or_the_default(tmp_path):
    from gnnpipe.plan.timing import proc_kib_bytes

    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmRSS:\t  2048 kB\n")
    assert proc_kib_bytes(str(status), "VmRSS", 7) == 2048 * 1024
    assert proc_kib_bytes(str(status), "VmHWM", 7) == 7  # no such line
    assert proc_kib_bytes(str(tmp_path / "missing"), "VmRSS", 7) == 7  # no such file
