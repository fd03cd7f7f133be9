"""train.host_heap_mib: each worker raises glibc's heap thresholds through mallopt, or
says why it did not (off, the user's own glibc variables, no mallopt, refused); a real
run applies it in its spawned workers, records it, and computes the same values.

train.host_heap_trim_mib: a CPU stage's trim calls malloc_trim(0) where the worker's
resident set is above the limit, or there is none and the record says why (off, not a stage
mode, device memory, host_heap_mib > 0, no malloc_trim); the real call gives the pages
of free blocks inside the heap back to the system; a run has it when asked, records
it and its trims, and computes the same values as without."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gnnpipe.config import TrainConfig
from gnnpipe.engine import host_heap
from gnnpipe.engine.host_heap import (GLIBC_VARIABLES, M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, _libc_malloc_trim,
                                      _libc_mallopt, heap_trimmer, tune_host_heap)
from gnnpipe.errors import ConfigError


class _Recorder:
    def __init__(self, result: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.result = result

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.result


@pytest.fixture(autouse=True)
def _no_glibc_variables(monkeypatch):
    for name in GLIBC_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_thresholds_are_set_to_the_given_mib_and_the_trim_threshold_to_its_largest():
    rec = _Recorder()
    state = tune_host_heap(256, mallopt=rec)
    assert rec.calls == [(M_MMAP_THRESHOLD, 256 << 20), (M_TRIM_THRESHOLD, 2**31 - 1)]
    assert state == {"mib": 256, "applied": True, "why": "mallopt"}
    rec = _Recorder()
    tune_host_heap(2047, mallopt=rec)
    assert rec.calls[0] == (M_MMAP_THRESHOLD, 2047 << 20) and 2047 << 20 < 2**31


def test_nothing_is_changed_when_off_refused_or_set_by_the_user(monkeypatch):
    rec = _Recorder()
    state = tune_host_heap(0, mallopt=rec)
    assert rec.calls == [] and state["applied"] is False and "off" in state["why"]
    state = tune_host_heap(64, mallopt=_Recorder(result=0))
    assert state["applied"] is False and "refused" in state["why"]
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000000")
    rec = _Recorder()
    state = tune_host_heap(64, mallopt=rec)
    assert rec.calls == [] and state["applied"] is False and "MALLOC_TRIM_THRESHOLD_" in state["why"]


def test_the_size_is_checked_at_the_config():
    assert TrainConfig(host_heap_mib=512).host_heap_mib == 512
    for bad in (-1, 2048):
        with pytest.raises(ConfigError, match=r"train.host_heap_mib: expected an integer in \[0, 2047\]"):
            TrainConfig(host_heap_mib=bad)


def test_a_cpu_stage_trims_where_its_resident_set_is_above_the_limit_and_otherwise_says_why_not(monkeypatch):
    calls: list[int] = []
    rss = [300 << 20]  # the worker's resident set, bytes

    def rec(pad: int) -> int:
        calls.append(pad)
        return 1

    for mode in ("pipeline", "hybrid"):
        trim, state = heap_trimmer(256, mode=mode, device_type="cpu", host_heap_mib=0, malloc_trim=rec,
                                   resident=lambda: rss[0])
        assert state["applied"] is True and state["limit_mib"] == 256 and trim is not None
        trim()
        assert calls == [0] and trim.trims == 1
        rss[0] = 256 << 20  # not more than the limit: no trim
        trim()
        assert calls == [0] and trim.trims == 1
        calls.clear()
        rss[0] = 300 << 20
    cases = [((0, "pipeline", "cpu", 0), "off"), ((256, "graph", "cpu", 0), "graph mode has no chunk"),
             ((256, "single", "cpu", 0), "single mode"), ((256, "pipeline", "cuda", 0), "cuda memory"),
             ((256, "hybrid", "cpu", 64), "host_heap_mib > 0")]
    for (limit, mode, device_type, mib), why in cases:
        trim, state = heap_trimmer(limit, mode=mode, device_type=device_type, host_heap_mib=mib, malloc_trim=rec,
                                   resident=lambda: rss[0])
        assert trim is None and state["applied"] is False and why in state["why"]
    assert calls == []
    monkeypatch.setattr(host_heap, "_libc_malloc_trim", lambda: None)  # a C library without it
    trim, state = heap_trimmer(256, mode="pipeline", device_type="cpu", host_heap_mib=0)
    assert trim is None and "no malloc_trim" in state["why"]


def test_the_size_limit_is_checked_at_the_config():
    assert TrainConfig(host_heap_trim_mib=0).host_heap_trim_mib == 0
    with pytest.raises(ConfigError, match=r"train.host_heap_trim_mib: expected an integer in \[0, 1048576\]"):
        TrainConfig(host_heap_trim_mib=-1)


# In a fresh process: blocks below glibc's smallest mmap threshold (128 KiB) come from
# the heap; one more block of their size after them keeps them from the heap's top, so
# freeing them leaves one free block of 25.6 MB inside the heap, whose pages stay
# resident until a trim.
_TRIM_PROBE = """
import ctypes
from gnnpipe.engine.host_heap import heap_trimmer
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
blocks = [libc.malloc(100 * 1024) for _ in range(257)]
for b in blocks:
    ctypes.memset(b, 1, 100 * 1024)
for b in blocks[:-1]:
    libc.free(b)
before = rss()
trim, state = heap_trimmer(16, mode="pipeline", device_type="cpu", host_heap_mib=0)
trim()
assert trim.trims == 1, state
print(before, rss())
"""


@pytest.mark.skipif(_libc_malloc_trim() is None, reason="this C library has no malloc_trim (glibc only)")
def test_the_trim_gives_back_the_pages_of_free_blocks_inside_the_heap():
    env = {k: v for k, v in os.environ.items() if k not in GLIBC_VARIABLES}
    out = subprocess.run([sys.executable, "-c", _TRIM_PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split())
    assert before - after > 20 * 2**20, (before, after)  # of the 25.6 MB freed


@pytest.mark.skipif(_libc_mallopt() is None, reason="this C library has no mallopt (glibc only)")
def test_a_pipeline_run_applies_it_and_the_trim_in_its_workers_and_computes_the_same(small_pipeline_run):
    tuned = small_pipeline_run("tuned", "--host-heap-mib", "64", "--host-heap-trim-mib", "256", unset=GLIBC_VARIABLES)
    plain = small_pipeline_run("plain", unset=GLIBC_VARIABLES)
    assert tuned["extra"]["host_heap"] == {"mib": 64, "applied": True, "why": "mallopt"}
    assert plain["extra"]["host_heap"]["applied"] is False
    assert tuned["config"]["train"]["host_heap_mib"] == 64
    assert [e["loss"] for e in tuned["epochs"]] == [e["loss"] for e in plain["epochs"]]
    # The trim: off by default, not with the thresholds raised; with a limit of 1 MiB
    # after every chunk compute (a worker's resident set is far above it), computing
    # the same values as without it.
    assert plain["extra"]["host_heap_trim"] == {"applied": False, "limit_mib": 0,
                                                "why": "off (train.host_heap_trim_mib = 0)"}
    assert tuned["extra"]["host_heap_trim"] == {"applied": False, "limit_mib": 256,
                                                "why": "train.host_heap_mib > 0 keeps the heap's freed pages"}
    larger = ("--data-option", "num_nodes=20000", "--hidden", "64")
    untrimmed = small_pipeline_run("untrimmed", *larger, "--host-heap-trim-mib", "0", unset=GLIBC_VARIABLES)
    every = small_pipeline_run("every", *larger, "--host-heap-trim-mib", "1", unset=GLIBC_VARIABLES)
    assert untrimmed["extra"]["host_heap_trim"]["applied"] is False
    assert untrimmed["config"]["train"]["host_heap_trim_mib"] == 0
    # 3 epochs x 4 chunks x (forward + backward) on each stage: 24 chunk computes a rank.
    assert every["extra"]["host_heap_trim"]["trims"] == [24, 24]
    assert [e["loss"] for e in every["epochs"]] == [e["loss"] for e in untrimmed["epochs"]]
