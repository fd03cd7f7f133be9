"""The launcher and the CLI's layout checks: impossible layouts exit 2 with one line
before any worker process starts; the local launcher returns rank 0's result."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gnnpipe.errors import ConfigError

pytestmark = pytest.mark.dist

SMALL = ["--dataset", "synthetic", "--data-option", "num_nodes=60", "--model", "gcn", "--layers", "2",
         "--hidden", "4", "--epochs", "1", "--device", "cpu"]


@pytest.fixture(autouse=True)
def _restore_logger():
    """The in-process CLI points the ``gnnpipe`` logger at the captured stderr; put
    it back so that later tests do not log into a closed stream."""
    import logging

    log = logging.getLogger("gnnpipe")
    saved = (list(log.handlers), log.level, log.propagate)
    yield
    log.handlers[:] = saved[0]
    log.setLevel(saved[1])
    log.propagate = saved[2]


@pytest.fixture
def no_launch(monkeypatch):
    """Fail the test if anything tries to start worker processes."""
    from gnnpipe.engine import launch

    def refuse(*args, **kwargs):
        raise AssertionError("a worker process was started for an impossible layout")

    monkeypatch.setattr(launch, "launch_local", refuse)
    return refuse


@pytest.mark.parametrize("flags,names", [
    (["--mode", "hybrid", "--workers", "3", "--ways", "2"], "parallel.ways"),
    (["--mode", "pipeline", "--workers", "4"], "model.layers"),             # 2 layers < 4 stages
    (["--mode", "graph", "--workers", "2", "--chunks", "3"], "parallel.chunks"),
    (["--mode", "pipeline", "--workers", "2", "--chunks", "61"], "parallel.chunks"),  # > N = 60
    (["--mode", "pipeline", "--workers", "2", "--stage-split", "3,1"], "parallel.stage_split"),
    (["--mode", "graph", "--workers", "2", "--backend", "nccl"], "parallel.backend"),
])
def test_impossible_layouts_exit_2_before_any_worker_starts(flags, names, no_launch, capsys) -> None:
    if "nccl" in flags:
        import torch

        if torch.cuda.is_available():
            pytest.skip("NCCL is possible on this machine")
    from gnnpipe.cli import main

    rc = main(SMALL + flags)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    errors = [ln for ln in err if ln.startswith("error: ")]
    assert len(errors) == 1 and err[-1] == errors[0] and names in errors[0], err


def test_cli_subprocess_refuses_a_layout_with_exit_2_and_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "gnnpipe.train", *SMALL, "--mode", "hybrid", "--workers", "4",
                           "--ways", "3"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GNNPIPE_TEST_FAIL_RANK": "0"})
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln]
    assert len(lines) == 1 and "parallel.ways" in lines[0], proc.stderr
    assert "[rank 1]" not in proc.stderr and "launching" not in proc.stderr


def test_validate_layout_refuses_more_chunks_than_vertices_and_unknown_modes() -> None:
    from gnnpipe.config import RunConfig
    from gnnpipe.engine.driver import get_runner, validate_layout

    cfg = RunConfig.from_dict({"model": {"layers": 2}, "parallel": {"mode": "pipeline", "workers": 2, "chunks": 8}})
    validate_layout(cfg, 8)
    with pytest.raises(ConfigError, match="parallel.chunks"):
        validate_layout(cfg, 7)
    with pytest.raises(ConfigError, match="parallel.mode"):
        get_runner("single")
    assert get_runner("graph").__name__ == "GraphRunner"


def test_local_launcher_returns_rank_zero_result() -> None:
    import operator

    from gnnpipe.engine.launch import launch_local

    # Every rank runs the target; only rank 0's value comes back.
    assert launch_local(operator.add, 2, (2, 3)) == 5


def test_torchrun_detection_reads_the_env_variables(monkeypatch) -> None:
    from gnnpipe.engine import launch

    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GNNPIPE_LOCAL_WORKER"):
        monkeypatch.delenv(k, raising=False)
    assert not launch.in_torchrun()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    assert launch.in_torchrun()
    assert launch.env_ranks()[:3] == (1, 4, 1)
    # The launcher's own children carry a marker: they are not a torchrun launch.
    monkeypatch.setenv("GNNPIPE_LOCAL_WORKER", "1")
    assert not launch.in_torchrun()


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmHWM is Linux-only")
def test_spawned_worker_reports_its_own_peak_memory_not_the_launchers() -> None:
    import torch

    from gnnpipe.engine.launch import launch_local
    from gnnpipe.trainer.record import measure_peak_memory as _peak_memory

    big = torch.ones(600 * 2**20 // 4)  # 600 MB resident in the launcher
    mine = _peak_memory(torch.device("cpu"), 0)
    child = launch_local(_peak_memory, 1, (torch.device("cpu"), 0))
    del big
    assert mine["bytes"] > 600 * 2**20
    # ru_maxrss would report the launcher's >600 MB here (inherited over fork + exec).
    assert child["source"] == "VmHWM" and 0 < child["bytes"] < 600 * 2**20, child


def test_early_stopping_ends_every_rank_at_the_epoch_single_mode_stops(monkeypatch) -> None:
    """Patience is decided on the reduced (identical) validation accuracy, so all
    ranks stop together, at the epoch where ``single`` stops, and nobody waits."""
    import gnnpipe
    from gnnpipe.config import ModelConfig, ParallelConfig, TrainConfig
    from gnnpipe.data import load_dataset

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    graph = load_dataset("synthetic", num_nodes=80, seed=1)
    model = ModelConfig(model="gcn", layers=2, hidden=4, dropout=0.0)
    # A tiny step leaves the accuracies unchanged: the second evaluation is no better.
    train = TrainConfig(epochs=6, lr=1e-9, eval_every=1, patience=1, dtype="float64")
    single = gnnpipe.train(graph, model, train, ParallelConfig(mode="single", device="cpu"))
    dist = gnnpipe.train(graph, model, train, ParallelConfig(mode="graph", workers=2, device="cpu"))
    assert single["summary"]["stopped_early"] and len(single["epochs"]) == 2
    assert dist["summary"]["stopped_early"] and len(dist["epochs"]) == len(single["epochs"])
    assert [e["val_acc"] for e in dist["epochs"]] == [e["val_acc"] for e in single["epochs"]]


def test_worker_threads_share_the_cores(monkeypatch):
    """Each of LOCAL_WORLD_SIZE workers gets cores // LOCAL_WORLD_SIZE intra-op threads,
    unless OMP_NUM_THREADS says otherwise."""
    import os

    import torch

    from gnnpipe.engine.launch import set_worker_threads

    saved = torch.get_num_threads()
    try:
        cores = len(os.sched_getaffinity(0))
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(cores))
        assert set_worker_threads() == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
        assert set_worker_threads() == cores and torch.get_num_threads() == cores
        torch.set_num_threads(1)
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert set_worker_threads() == 1  # an explicit OMP_NUM_THREADS is left alone
    finally:
        torch.set_num_threads(saved)
