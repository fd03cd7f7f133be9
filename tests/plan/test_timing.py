"""The calibration's timer keeps the fastest repeat (the undisturbed machine), after an
untimed warm-up call; the alternating timer takes its calls in turn, each prepared
untimed, and keeps each one's fastest."""

from __future__ import annotations

import time

from gnnpipe.plan import timing
from gnnpipe.plan.timing import alternating_min_s, min_time_s


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


def test_alternating_min_takes_the_calls_in_turn_and_keeps_each_ones_fastest(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    log: list[str] = []
    costs = {"a": iter([9.0, 5.0, 1.0, 3.0]), "b": iter([9.0, 2.0, 4.0, 6.0])}  # warm-up first

    def call(name):
        def fn():
            log.append(name)
            now[0] += next(costs[name])
        return fn

    def prepare(name):
        def fn():
            log.append("prep " + name)
            now[0] += 100.0  # untimed
        return fn

    best = alternating_min_s([(prepare("a"), call("a")), (prepare("b"), call("b"))], rounds=3)
    assert best == [1.0, 2.0]
    assert log == ["prep a", "a", "prep b", "b"] + ["prep a", "a", "prep b", "b"] * 3
