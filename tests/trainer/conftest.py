"""One intra-op thread for the trainer tests.

The tests share two cores with other test runs; with two OpenMP threads per process
the tiny per-layer kernels spend most of their time in contended barriers (measured
5-40x slower). The thread count is restored afterwards; library code never sets it.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
