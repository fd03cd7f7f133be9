"""Shared fixtures.

Real datasets are read in place from ``$GNNPIPE_DATASETS`` or, when that is unset,
from ``../shared/datasets`` beside the repository; tests that need them skip with
the reason when neither exists. Nothing is ever copied into the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
def restore_logging():
    """gnnpipe.cli.main() and setup_logging() configure the gnnpipe logger; a test that
    calls them in this process undoes that for the rest of the session."""
    import logging

    logger = logging.getLogger("gnnpipe")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


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


@pytest.fixture
def small_pipeline_run(tmp_path):
    """Runs ``python -m gnnpipe.train`` as a user would: pipeline mode, 2 gloo workers,
    C = 4, GCN-4 hidden 8 on a 400-vertex synthetic graph, one thread each, plus the
    given flags, without the environment variables named in ``unset``; returns the
    record. ``run(name, *flags, epochs=3, unset=())``."""

    def run(name: str, *flags: str, epochs: int = 3, unset: tuple[str, ...] = ()) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in unset}
        env.update({"OMP_NUM_THREADS": "1", "GNNPIPE_CACHE_DIR": str(tmp_path / "cache")})
        out = tmp_path / f"{name}.json"
        proc = subprocess.run([sys.executable, "-m", "gnnpipe.train", "--mode", "pipeline", "--workers", "2",
                               "--chunks", "4", "--data-option", "num_nodes=400", "--model", "gcn", "--layers", "4",
                               "--hidden", "8", "--epochs", str(epochs), "--eval-every", str(epochs),
                               "--log-level", "WARNING", "--json-out", str(out), *flags],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(out.read_text())

    return run
