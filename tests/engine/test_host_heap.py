"""train.host_heap_mib: each worker raises glibc's heap thresholds through mallopt, or
says why it did not (off, the user's own glibc variables, no mallopt, refused); a real
run applies it in its spawned workers, records it, and computes the same values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gnnpipe.config import TrainConfig
from gnnpipe.engine.host_heap import (GLIBC_VARIABLES, M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, _libc_mallopt,
                                      tune_host_heap)
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


def _train(tmp_path: Path, name: str, *extra: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GNNPIPE_CACHE_DIR": str(tmp_path / "cache")}
    for var in GLIBC_VARIABLES:
        env.pop(var, None)
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, "-m", "gnnpipe.train", "--mode", "pipeline", "--workers", "2",
                           "--chunks", "4", "--data-option", "num_nodes=400", "--model", "gcn", "--layers", "4",
                           "--hidden", "8", "--epochs", "3", "--eval-every", "3", "--log-level", "WARNING",
                           "--json-out", str(out), *extra], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


@pytest.mark.skipif(_libc_mallopt() is None, reason="this C library has no mallopt (glibc only)")
def test_a_pipeline_run_applies_it_in_its_workers_and_computes_the_same(tmp_path):
    tuned = _train(tmp_path, "tuned", "--host-heap-mib", "64")
    plain = _train(tmp_path, "plain")
    assert tuned["extra"]["host_heap"] == {"mib": 64, "applied": True, "why": "mallopt"}
    assert plain["extra"]["host_heap"]["applied"] is False
    assert tuned["config"]["train"]["host_heap_mib"] == 64
    assert [e["loss"] for e in tuned["epochs"]] == [e["loss"] for e in plain["epochs"]]
