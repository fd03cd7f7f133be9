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


def test_local_launcher_returns_rank_zero_result() -> None:
    import operator

    from gnnpipe.engine.launch import launch_local

    # Every rank runs the target; only rank 0's value comes back.
    assert launch_local(operator.add, 2, (2, 3)) == 5


def test_the_launch_puts_back_the_sigterm_handler_it_found() -> None:
    import operator
    import signal

    from gnnpipe.engine.launch import launch_local

    def mine(signum, frame):
        raise AssertionError("not called")

    saved = signal.signal(signal.SIGTERM, mine)
    try:
        assert launch_local(operator.mul, 1, (2, 3)) == 6
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_run_terminated_says_which_signal_and_is_not_bad_input() -> None:
    import pickle
    import signal

    from gnnpipe.errors import GnnpipeInputError, RunTerminated

    exc = RunTerminated(signal.SIGTERM)
    assert str(exc) == "terminated (SIGTERM)" and exc.exit_code == 143
    assert not isinstance(exc, (GnnpipeInputError, Exception))  # `except Exception` cannot swallow it
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is RunTerminated and again.signum == signal.SIGTERM


_ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "GNNPIPE_LOCAL_WORKER")


@pytest.fixture
def clean_env(monkeypatch):
    for k in _ENV_VARS:
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


def _set(monkeypatch, **env: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)


TORCHRUN = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
            "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}


def test_torchrun_env_reads_the_env_variables_and_is_none_without_them(clean_env) -> None:
    import dataclasses

    from gnnpipe.engine.environment import TorchrunEnv, torchrun_env

    assert torchrun_env() is None
    _set(clean_env, **TORCHRUN)
    env = torchrun_env()
    assert env == TorchrunEnv(rank=5, world_size=8, local_rank=1, local_world_size=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.rank = 0  # type: ignore[misc]
    # One node, LOCAL_* not set: the local place is the global one.
    clean_env.delenv("LOCAL_RANK")
    clean_env.delenv("LOCAL_WORLD_SIZE")
    assert torchrun_env() == TorchrunEnv(5, 8, 5, 8)


def test_a_stuck_rank_is_named_after_at_most_60_s_by_default(monkeypatch) -> None:
    """The stall timeout, and the transfer timeout of a worker that no heartbeat watches
    (torchrun), default to 60 s; the stuck-worker tests above shorten them, this keeps
    the defaults honest."""
    from gnnpipe.engine.environment import DIST_TIMEOUT, STALL_TIMEOUT, dist_timeout_s, stall_timeout_s

    monkeypatch.delenv(STALL_TIMEOUT, raising=False)
    monkeypatch.delenv(DIST_TIMEOUT, raising=False)
    assert stall_timeout_s() <= 60 and dist_timeout_s() <= 60
    monkeypatch.setenv(STALL_TIMEOUT, "5")
    assert stall_timeout_s() == 5.0
    monkeypatch.delenv(STALL_TIMEOUT)
    # A local launcher's worker: the heartbeat names a stuck rank after the stall timeout,
    # so a healthy peer may keep a transfer waiting far longer than that.
    monkeypatch.setenv("GNNPIPE_LOCAL_WORKER", "1")
    assert stall_timeout_s() <= 60 and dist_timeout_s() >= 20 * stall_timeout_s()
    monkeypatch.setenv(DIST_TIMEOUT, "7")
    assert dist_timeout_s() == 7.0
    monkeypatch.delenv("GNNPIPE_LOCAL_WORKER")
    monkeypatch.setenv(STALL_TIMEOUT, "0")
    with pytest.raises(ConfigError, match=r"^GNNPIPE_STALL_TIMEOUT_S: expected a finite value > 0, found '0'"):
        stall_timeout_s()


def test_a_worker_of_the_local_launcher_is_not_a_torchrun_launch(clean_env) -> None:
    from gnnpipe.engine.environment import torchrun_env

    _set(clean_env, **TORCHRUN, GNNPIPE_LOCAL_WORKER="1")
    assert torchrun_env() is None


@pytest.mark.parametrize("env,needle", [
    ({"RANK": "one"}, "RANK='one'"),
    ({"WORLD_SIZE": "2.0"}, "WORLD_SIZE='2.0'"),
    ({"LOCAL_RANK": ""}, "LOCAL_RANK=''"),
    ({"MASTER_PORT": "http"}, "MASTER_PORT='http'"),
    ({"RANK": "8"}, "RANK=8"),                      # not below WORLD_SIZE
    ({"LOCAL_RANK": "4"}, "LOCAL_RANK=4"),          # not below LOCAL_WORLD_SIZE
])
def test_malformed_torchrun_variables_are_one_line_config_errors(clean_env, env, needle) -> None:
    from gnnpipe.engine.environment import torchrun_env

    _set(clean_env, **{**TORCHRUN, **env})
    with pytest.raises(ConfigError, match=r"^environment: expected ") as info:
        torchrun_env()
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_an_incomplete_env_launch_is_refused_with_the_missing_names(clean_env) -> None:
    from gnnpipe.engine.environment import torchrun_env

    _set(clean_env, RANK="0", WORLD_SIZE="2")
    with pytest.raises(ConfigError, match=r"^environment: .*MASTER_ADDR, MASTER_PORT unset$"):
        torchrun_env()


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmHWM is Linux-only")
def test_spawned_worker_reports_its_own_peak_memory_not_the_launchers() -> None:
    import torch

    from gnnpipe.engine.launch import launch_local
    from gnnpipe.trainer.machine import measure_peak_memory as _peak_memory

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

    from gnnpipe.engine.environment import set_worker_threads

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


TARGETS = '''
import os


class TwoArgError(Exception):
    """An exception whose constructor does not take its args: it pickles but cannot
    be unpickled, so it cannot travel back to the launcher."""

    def __init__(self, code, text):
        super().__init__(f"{text} (code {code})")
        self.code = code


def fail_on(rank, kind):
    if int(os.environ["RANK"]) != rank:
        return "fine"
    if kind == "unpicklable":
        raise TwoArgError(7, "cannot travel")
    from gnnpipe.errors import ConfigError

    raise ConfigError("model.hidden: expected an integer >= 1, found 0")


def teardown_fails():
    import gnnpipe.engine.launch_worker as launch_worker

    def leave():
        raise RuntimeError("teardown exploded")

    launch_worker.leave_process_group = leave  # what the worker calls after reporting
    return "done"
'''


@pytest.fixture
def targets(tmp_path, monkeypatch):
    """A module of worker targets, importable by the spawned workers (which get the
    launcher's sys.path)."""
    import importlib
    import uuid

    name = f"launch_targets_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(TARGETS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def test_an_exception_that_cannot_be_sent_back_is_reported_by_rank_and_text(targets, capfd) -> None:
    from gnnpipe.engine.launch import launch_local
    from gnnpipe.errors import WorkerFailedError

    with pytest.raises(WorkerFailedError) as info:
        launch_local(targets.fail_on, 2, (1, "unpicklable"))
    text = str(info.value)
    assert info.value.rank == 1 and text.startswith("worker rank 1 failed: TwoArgError: cannot travel (code 7)")
    assert "the exception object could not be sent to the launcher" in text, text
    err = capfd.readouterr().err
    assert "[rank 1] WARNING" in err and "the TwoArgError cannot be sent to the launcher" in err, err


def test_an_input_error_raised_in_a_worker_is_raised_as_itself(targets) -> None:
    from gnnpipe.engine.launch import launch_local

    with pytest.raises(ConfigError, match=r"^model\.hidden: expected an integer >= 1, found 0$"):
        launch_local(targets.fail_on, 2, (0, "input"))


def test_a_failure_to_leave_the_process_group_is_logged_with_the_rank(targets, capfd) -> None:
    from gnnpipe.engine.launch import launch_local

    assert launch_local(targets.teardown_fails, 1, ()) == "done"
    err = capfd.readouterr().err
    assert "[rank 0] WARNING" in err, err
    assert "rank 0: leaving the process group after the run failed: RuntimeError: teardown exploded" in err, err


NO_GUARD = '''
import gnnpipe

gnnpipe.train(gnnpipe.load_dataset("synthetic", num_nodes=500), gnnpipe.ModelConfig(layers=2, hidden=8),
              gnnpipe.TrainConfig(epochs=1), gnnpipe.ParallelConfig(mode="graph", workers=2))
'''


def _run_script(tmp_path, name: str, text: str) -> tuple[subprocess.CompletedProcess, str]:
    """Run ``text`` as the script ``name`` outside any launch; (the process, the last
    stderr line), after checking that it failed."""
    script = tmp_path / name
    script.write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in _ENV_VARS}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    assert proc.returncode != 0
    return proc, proc.stderr.strip().splitlines()[-1]


def test_a_script_without_the_main_guard_is_refused_at_once(tmp_path) -> None:
    # Before the check this never ended: every spawned worker re-ran the script.
    proc, last = _run_script(tmp_path, "no_guard.py", NO_GUARD)
    assert last.startswith("gnnpipe.errors.ConfigError: main module"), proc.stderr[-3000:]
    assert 'start the run under `if __name__ == "__main__":` (the workers are spawned and re-import the main ' \
           'module)' in last and "line 4" in last, last
    assert "[rank " not in proc.stderr  # refused before any worker started


def test_a_spawned_worker_that_would_start_the_run_again_refuses(monkeypatch) -> None:
    """The worker-side check, for what the launcher's look at the script cannot see:
    a process still importing its main module (spawn's bootstrap) never launches."""
    import multiprocessing

    from gnnpipe.engine.launch import launch_local

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(ConfigError, match=r"^main module: start the run under `if __name__ == \"__main__\":`"):
        launch_local(print, 2, ())


DIES_AT_IMPORT = '''
import gnnpipe

if __name__ == "__mp_main__":  # only in the spawned workers, while they import this script
    raise RuntimeError("this script cannot be imported by a worker")

if __name__ == "__main__":
    gnnpipe.train(gnnpipe.load_dataset("synthetic", num_nodes=500), gnnpipe.ModelConfig(layers=2, hidden=8),
                  gnnpipe.TrainConfig(epochs=1), gnnpipe.ParallelConfig(mode="graph", workers=2))
'''


def test_workers_that_die_while_starting_end_the_run(tmp_path) -> None:
    """The arguments (> 64 KB here) used to travel with spawn's own start-up data,
    which the launcher writes while the child imports the main module: a child that
    died there left the launcher blocked in that write for ever."""
    proc, last = _run_script(tmp_path, "dies_at_import.py", DIES_AT_IMPORT)
    assert last.startswith("gnnpipe.errors.WorkerFailedError: worker rank "), proc.stderr[-3000:]
    assert "process died (exit code 1) without reporting, while starting" in last, last
    assert "this script cannot be imported by a worker" in proc.stderr  # the worker's own error
