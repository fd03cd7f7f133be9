"""Every trainer test runs with one intra-op thread (the ``one_thread`` fixture of
tests/conftest.py says why)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield
