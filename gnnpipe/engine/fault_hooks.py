"""Failure injection for tests: make one rank fail, die, stop or stall at an epoch.

Test hooks (used only by tests, read by the epoch loop at the start of each epoch):
``GNNPIPE_TEST_FAIL_RANK=r`` and ``GNNPIPE_TEST_FAIL_EPOCH=e`` (1-based) make rank r
act at epoch e as ``GNNPIPE_TEST_FAIL_HOW`` says: ``raise`` (default), ``kill``
(SIGKILL itself, no report), ``stop`` (SIGSTOP itself: stuck, not dead) or
``compute`` (a healthy but long epoch: torch work for ``GNNPIPE_TEST_FAIL_SECONDS``,
default 10, then training goes on). ``GNNPIPE_TEST_FAIL_MARK=path`` makes that rank
write ``"<wall-clock time> <pid>"`` there first (tests measure from it); with
``GNNPIPE_TEST_FAIL_ONCE=1`` too, a rank that finds that mark already written does not
act (a run restarted by torchrun goes on).

The hook acts inside a worker, whoever started it (the local launcher, torchrun, or
single mode in this process), so it lives apart from the launcher.
"""

from __future__ import annotations

import logging
import os
import signal
import time

import torch

__all__ = [
    "maybe_inject_failure",
    "TEST_FAIL_RANK",
    "TEST_FAIL_EPOCH",
    "TEST_FAIL_HOW",
    "TEST_FAIL_MARK",
    "TEST_FAIL_ONCE",
    "TEST_FAIL_SECONDS",
]

logger = logging.getLogger(__name__)

TEST_FAIL_RANK = "GNNPIPE_TEST_FAIL_RANK"
TEST_FAIL_EPOCH = "GNNPIPE_TEST_FAIL_EPOCH"
TEST_FAIL_HOW = "GNNPIPE_TEST_FAIL_HOW"
TEST_FAIL_MARK = "GNNPIPE_TEST_FAIL_MARK"
TEST_FAIL_ONCE = "GNNPIPE_TEST_FAIL_ONCE"
TEST_FAIL_SECONDS = "GNNPIPE_TEST_FAIL_SECONDS"


def maybe_inject_failure(rank: int, epoch: int) -> None:
    """The test hook of the module docstring: fail (or stall) here if told to."""
    want = os.environ.get(TEST_FAIL_RANK)
    if want is None or int(want) != rank:
        return
    at = int(os.environ.get(TEST_FAIL_EPOCH, "1"))
    if epoch != at:
        return
    how = os.environ.get(TEST_FAIL_HOW, "raise")
    mark = os.environ.get(TEST_FAIL_MARK)
    if mark and os.environ.get(TEST_FAIL_ONCE) == "1" and os.path.exists(mark):
        return  # failed once already (a restarted run goes on)
    if mark:
        with open(mark, "w") as fh:
            fh.write(f"{time.time()!r} {os.getpid()}")
    if how == "kill":
        logger.error("test hook: rank %d kills itself (SIGKILL) at epoch %d", rank, epoch)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "stop":
        logger.error("test hook: rank %d stops itself (SIGSTOP) at epoch %d", rank, epoch)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    if how == "compute":
        seconds = float(os.environ.get(TEST_FAIL_SECONDS, "10"))
        logger.warning("test hook: rank %d computes for %.0f s at epoch %d", rank, seconds, epoch)
        a = torch.rand(256, 256)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            a = torch.tanh(a @ a)
        return
    raise RuntimeError(f"test hook: injected failure on rank {rank} at epoch {epoch}")
