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
