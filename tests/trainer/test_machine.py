"""Machine probes: what machine_info reports, cores under an affinity mask, peak memory
as measured by the kernel, and the load average."""

from __future__ import annotations

import os
import sys

import pytest
import torch

import gnnpipe
from gnnpipe.trainer import machine
from gnnpipe.trainer.machine import cpu_cores, load_average, machine_info, measure_peak_memory
from gnnpipe.trainer.record import RECORD_FIELDS

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")


def _proc_status_bytes(name: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"/proc/self/status has no {name}")


def test_machine_info_has_every_key_the_record_requires():
    required = next(f for f in RECORD_FIELDS if f.key == "machine").keys
    info = machine_info("cpu", "gloo")
    assert set(required) <= set(info)
    assert info["device"] == "cpu" and info["dist_backend"] == "gloo"
    assert info["torch"] == torch.__version__ and info["gnnpipe"] == gnnpipe.__version__
    assert info["cpu_cores"] == cpu_cores()
    assert not {"gpu", "gpu_count", "cuda"} & set(info)  # GPU keys only for a CUDA device


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity call on this platform")
def test_usable_cores_follow_the_affinity_mask():
    allowed = os.sched_getaffinity(0)
    assert cpu_cores() == {"logical": os.cpu_count(), "usable": len(allowed)}
    os.sched_setaffinity(0, {min(allowed)})
    try:
        assert cpu_cores() == {"logical": os.cpu_count(), "usable": 1}
    finally:
        os.sched_setaffinity(0, allowed)


@linux_only
def test_cpu_peak_memory_is_the_resident_high_water_mark():
    buf = bytearray(b"\x01") * (64 * 2**20)  # written, so resident
    m = measure_peak_memory("cpu", rank=3)
    resident = _proc_status_bytes("VmRSS")
    assert m["rank"] == 3 and m["source"] == "VmHWM"
    assert m["bytes"] >= resident > 64 * 2**20  # the peak is at least what is resident now
    del buf


def test_peak_memory_falls_back_to_ru_maxrss_without_vmhwm(monkeypatch):
    monkeypatch.setattr(machine, "_vm_hwm_bytes", lambda: None)
    m = measure_peak_memory("cpu", rank=1)
    assert m["rank"] == 1 and m["source"] == "ru_maxrss"
    assert m["bytes"] > 10 * 2**20  # an interpreter with torch loaded


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_peak_memory_counts_the_tensors_allocated():
    dev = torch.device("cuda")
    torch.cuda.reset_peak_memory_stats(dev)
    x = torch.empty(8 * 2**20, dtype=torch.uint8, device=dev)
    m = measure_peak_memory(dev)
    assert m["source"] == "torch.cuda.max_memory_allocated" and m["bytes"] >= x.numel()
    info = machine_info("cuda")
    assert info["gpu_count"] == torch.cuda.device_count() and info["gpu"]


@linux_only
def test_load_average_is_the_kernels_triple_of_floats():
    def proc_loadavg():
        with open("/proc/loadavg") as fh:
            return [float(v) for v in fh.read().split()[:3]]

    before = proc_loadavg()
    load = load_average()
    after = proc_loadavg()
    assert isinstance(load, tuple) and len(load) == 3 and all(isinstance(v, float) for v in load)
    # the kernel may refresh the figures between the reads: one of the two reads matches
    assert any(list(load) == pytest.approx(ref, abs=0.006) for ref in (before, after))


def test_load_average_is_none_where_the_platform_has_none(monkeypatch):
    def unavailable():
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert load_average() is None
    monkeypatch.delattr(os, "getloadavg")
    assert load_average() is None
