"""Shared fixtures.

Real datasets are read in place from ``$GNNPIPE_DATASETS`` or, when that is unset,
from ``../shared/datasets`` beside the repository; tests that need them skip with
the reason when neither exists. Nothing is ever copied into the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_datasets_root() -> Path | None:
    env = os.environ.get("GNNPIPE_DATASETS")
    root = Path(env) if env else REPO.parent / "shared" / "datasets"
    return root if root.is_dir() else None


@pytest.fixture(scope="session")
def datasets_root() -> Path:
    root = shared_datasets_root()
    if root is None:
        pytest.skip(
            "shared datasets not found: set GNNPIPE_DATASETS or place them at "
            f"{REPO.parent / 'shared' / 'datasets'}"
        )
    return root


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own gnnpipe cache folder, so no test reads another's cache."""
    monkeypatch.setenv("GNNPIPE_CACHE_DIR", str(tmp_path_factory.mktemp("gnnpipe_cache")))


@pytest.fixture
def one_thread():
    """One intra-op thread for the duration of a test, restored afterwards.

    The tests share two cores with other runs; with two OpenMP threads per process the
    tiny kernels of small test graphs spend most of their time in contended barriers
    (measured 5-40x slower). Library code never sets the thread count.
    """
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
