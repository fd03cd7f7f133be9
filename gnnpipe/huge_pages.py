"""Huge pages for torch's large host allocations (``train.host_huge_pages``, on by default).

A layer's temporaries over glibc's mmap threshold (32 MiB at most) are fresh mappings,
faulted in page by page every time one is made: on the 200,000-vertex systems graph a
worker makes several per layer ([rows, 100] floats, 55-80 MB). torch's CPU allocator
(c10's ``alloc_cpu``, Linux) aligns a request of 2 MiB or more to the page and advises
the kernel to back it with transparent huge pages (``madvise(MADV_HUGEPAGE)``) where
the variable ``THP_MEM_ALLOC_ENABLE`` is 1; a fault then maps 2 MiB instead of 4 KiB. c10
reads the variable once (here: set after torch's import it takes, set after a 64 MiB
allocation it does not), so it has to be set before the first large allocation:
:func:`request_huge_pages` is called at the entry of a run (before the graph is loaded),
of the planner's CLI and of the benchmarks that calibrate, and processes started
afterwards (the local launcher's workers, the calibration's twins) inherit it. Where
the variable is already set in the environment, that setting stands. The kernel must
allow it too (``/sys/kernel/mm/transparent_hugepage/enabled``: ``always`` or
``madvise``, not ``never``). :func:`huge_pages_state` says whether the allocator of
*this* process asks for them (a large tensor is page-aligned only then); the record
keeps it (``extra.host_huge_pages``) and the calibrated profile's source says it.

Measured figures: ``bench/results/huge_pages.json`` (``python -m bench.huge_pages``): on
this project's VM fresh 80 MB temporaries were zero-filled 5-6x faster, but the first touch of memory the
process has not used before is 10x slower (4 GiB: 14.9-16.0 against 1.5-1.7 s), which a
pipeline stage's buffers pay at start-up on a large graph (README: 6.7-7.6 s more on the
200k systems graph); ``--no-host-huge-pages`` where that matters more than the epochs.
Device tensors (CUDA) do not use this allocator: there it only concerns host buffers.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["THP_VARIABLE", "THP_SYSTEM_FILE", "request_huge_pages", "huge_pages_state"]

#: The variable c10's CPU allocator reads (once, before the first large allocation).
THP_VARIABLE = "THP_MEM_ALLOC_ENABLE"
#: The kernel's transparent-huge-page policy (Linux).
THP_SYSTEM_FILE = "/sys/kernel/mm/transparent_hugepage/enabled"


def _system_policy(path: str = THP_SYSTEM_FILE) -> str | None:
    """The kernel's policy (the bracketed word of ``path``: always, madvise or never), or
    None where there is no such file (not Linux, or no THP)."""
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


def _allocator_requests() -> bool:
    """Whether torch's CPU allocator in this process asks for huge pages. It then aligns a
    large allocation to the page; otherwise glibc's mapping is 64-byte aligned, one header
    past the page. The probe (64 MiB, above glibc's largest mmap threshold, so always a
    mapping of its own) is never touched, so it costs no resident memory."""
    import torch

    probe = torch.empty(64 << 20, dtype=torch.uint8)
    return probe.data_ptr() % os.sysconf("SC_PAGE_SIZE") == 0


def huge_pages_state(*, system_path: str = THP_SYSTEM_FILE) -> dict[str, Any]:
    """What this process's large host allocations get: ``{"effective", "allocator_requests",
    "system_policy", "variable", "why"}``. ``effective``: the allocator asks for huge pages
    and the kernel's policy grants such requests (always or madvise)."""
    policy = _system_policy(system_path)
    requests = _allocator_requests()
    variable = os.environ.get(THP_VARIABLE)
    effective = requests and policy in ("always", "madvise")
    if effective:
        why = f"huge pages for allocations of 2 MiB or more ({THP_VARIABLE}={variable}, kernel policy {policy})"
    elif requests:
        why = f"the allocator asks, but the kernel's policy is {policy or 'unknown (no ' + system_path + ')'}"
    elif variable == "1":
        why = (f"{THP_VARIABLE} was set after this process's first allocation of 2 MiB or more "
               "(or torch has no huge-page allocation here)")
    else:
        why = f"off ({THP_VARIABLE} {'unset' if variable is None else '= ' + variable})"
    return {"effective": bool(effective), "allocator_requests": bool(requests), "system_policy": policy,
            "variable": variable, "why": why}


def request_huge_pages(on: bool = True, *, system_path: str = THP_SYSTEM_FILE) -> dict[str, Any]:
    """Set ``THP_MEM_ALLOC_ENABLE=1`` for this process and the processes it starts,
    unless the environment already sets it (then that stands) or ``on`` is False; return
    :func:`huge_pages_state` with ``set_by`` (``"gnnpipe"``, ``"environment"`` or None).
    Call it before the process's first large allocation."""
    set_by = None
    if os.environ.get(THP_VARIABLE) is not None:
        set_by = "environment"
    elif on:
        os.environ[THP_VARIABLE] = "1"
        set_by = "gnnpipe"
    return {**huge_pages_state(system_path=system_path), "set_by": set_by}
