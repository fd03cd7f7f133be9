"""Probes of the machine a run happens on: where it ran, how many cores it may use,
how loaded the machine was, and how much memory this process peaked at.

The result record (:mod:`gnnpipe.trainer.record`) stores :func:`machine_info` under
``machine`` and one :func:`measure_peak_memory` entry per worker under
``peak_memory_bytes``; the benchmarks (``bench/``) store the same figures, and
:func:`load_average`, beside their results. They live here, apart from the record,
because they measure the machine rather than describe the record's layout, and
because benchmarks that write no record use them too.

Every probe reports what it could measure and says so (``source``, ``None``) rather
than guess where the platform offers no such figure.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

import gnnpipe

__all__ = ["cpu_cores", "load_average", "machine_info", "measure_peak_memory", "process_start_unix_s"]


def cpu_cores() -> dict[str, int | None]:
    """``{"logical": cores of the machine, "usable": cores this process may run on}``.

    Both, because they differ under an affinity mask (``taskset``, a container's
    cpuset), and the usable count is the one that bounds useful threads. ``usable``
    falls back to ``logical`` where the platform has no affinity call (macOS,
    Windows); either is None where Python cannot tell.
    """
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return {"logical": os.cpu_count(), "usable": usable}


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15-minute load averages of the machine, or None where the platform
    has none (Windows) or cannot read it.

    Benchmarks record it because their times are only comparable on a machine
    equally busy: a load above the usable cores means the run shared its CPUs.
    """
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return None
    return float(one), float(five), float(fifteen)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else the platform's word)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device: str | None = None, dist_backend: str | None = None) -> dict[str, Any]:
    """Where the run happened: host, cores, python/torch versions, device, backend.

    ``device`` is ``cpu``/``cuda`` (default: cuda if available); for CUDA the GPU
    name and count are added. Bench scripts reuse this for their JSON.
    """
    import torch

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_cores": cpu_cores(),
        "cpu_model": cpu_model(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gnnpipe": gnnpipe.__version__,
        "device": dev,
        "dist_backend": dist_backend,
    }
    if str(dev).startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(dev))
        info["gpu_count"] = torch.cuda.device_count()
        info["cuda"] = torch.version.cuda
    return info


def measure_peak_memory(device: Any, rank: int = 0) -> dict[str, Any]:
    """This process's peak memory, measured: ``torch.cuda.max_memory_allocated`` on
    CUDA; on CPU the resident high-water mark of this process's own address space
    (``VmHWM`` from /proc/self/status on Linux, else ``ru_maxrss``). ``source`` says
    which, since they are not comparable (RSS includes the interpreter).

    Why not ``ru_maxrss`` on Linux: it is carried over fork and exec, so a spawned
    worker would report its launcher's peak (measured: an 800 MB parent gives a
    15 MB child 800 MB).
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return {"rank": int(rank), "bytes": int(torch.cuda.max_memory_allocated(dev)),
                "source": "torch.cuda.max_memory_allocated"}
    hwm = _vm_hwm_bytes()
    if hwm is not None:
        return {"rank": int(rank), "bytes": hwm, "source": "VmHWM"}
    rss = _ru_maxrss_bytes()
    if rss is not None:
        return {"rank": int(rank), "bytes": rss, "source": "ru_maxrss"}
    return {"rank": int(rank), "bytes": None, "source": "unavailable"}  # pragma: no cover - Windows


def _vm_hwm_bytes() -> int | None:
    """``VmHWM`` of /proc/self/status in bytes; None off Linux (no such file or line)."""
    from gnnpipe.plan.timing import proc_kib_bytes

    return proc_kib_bytes("/proc/self/status", "VmHWM", None)


def _ru_maxrss_bytes() -> int | None:
    """``getrusage(RUSAGE_SELF).ru_maxrss`` in bytes; None without :mod:`resource`."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # macOS: bytes; Linux: KiB
    return int(rss) * scale


def process_start_unix_s() -> float | None:
    """When this process started (Linux: /proc), for the record's start-up split; None
    where it cannot be read."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
