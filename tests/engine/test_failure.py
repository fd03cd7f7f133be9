"""A worker that raises, is killed or stops answering ends the whole run: the
launcher (and, under torchrun, torchrun) exits non-zero within a bound of the failure
with a message naming the failed rank; nothing hangs. SIGTERM at the launcher stops
every worker quietly. Failures are injected with the test hooks of
:mod:`gnnpipe.engine.launch` (GNNPIPE_TEST_FAIL_RANK / _EPOCH / _HOW)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.dist

CLI = [sys.executable, "-m", "gnnpipe.train", "--dataset", "synthetic", "--data-option", "num_nodes=120",
       "--model", "gcn", "--layers", "3", "--hidden", "8", "--epochs", "4", "--device", "cpu",
       "--log-level", "WARNING"]


def _run(args: list[str], fail_rank: int, epoch: int, how: str, tmp_path,
         **env_extra: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``args`` with the failure hook armed; returns the process and the seconds
    from the failure (the time the failing rank wrote to the mark file) to the exit."""
    mark = tmp_path / "failed_at"
    env = {**os.environ, "GNNPIPE_TEST_FAIL_RANK": str(fail_rank), "GNNPIPE_TEST_FAIL_EPOCH": str(epoch),
           "GNNPIPE_TEST_FAIL_HOW": how, "GNNPIPE_TEST_FAIL_MARK": str(mark),
           "GNNPIPE_DIST_TIMEOUT_S": "30", "OMP_NUM_THREADS": "1", **env_extra}
    try:
        # 240 s is the hard stop of the test itself (start-up on a loaded machine
        # included); the contract's bound is measured from the failure.
        proc = subprocess.run(args, capture_output=True, text=True, timeout=240, env=env)
        end = time.time()
        assert mark.exists(), "the failure hook never fired: " + proc.stderr[-2000:]
        return proc, end - float(mark.read_text().split()[0])
    finally:
        # A worker that stopped itself outlives a launcher that failed to kill it
        # (it cannot even notice that the launcher is gone): end it, and only it.
        if mark.exists() and _stopped_worker(int(mark.read_text().split()[1])):
            os.kill(int(mark.read_text().split()[1]), signal.SIGKILL)


@pytest.mark.parametrize("how,workers,rank", [("raise", 2, 1), ("kill", 2, 0)])
def test_launcher_exits_nonzero_naming_the_failed_rank(how: str, workers: int, rank: int, tmp_path) -> None:
    proc, elapsed = _run(CLI + ["--mode", "graph", "--workers", str(workers)], rank, 2, how, tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: worker rank {rank} failed"), proc.stderr[-2000:]
    if how == "raise":
        assert "injected failure" in last
    else:
        assert "signal 9" in last
    # Every process is gone within the contract's 60 s of the failure.
    assert elapsed < 60, f"exited {elapsed:.0f} s after the failure"


def test_torchrun_worker_failure_ends_every_worker_nonzero(tmp_path) -> None:
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
            "--monitor-interval", "0.5", "-m", "gnnpipe.train", *CLI[3:], "--mode", "graph"]
    proc, elapsed = _run(args, 1, 2, "raise", tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-2000:]
    assert "worker rank 1 failed" in out and "injected failure" in out, out[-3000:]
    assert elapsed < 60, f"exited {elapsed:.0f} s after the failure"


def _children(pid: int) -> list[int]:
    """pids of the spawned worker processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"spawn_main" in cmd:
            out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _end(proc: subprocess.Popen, kids: list[int]) -> None:
    """Kill what a test started and left running: its launcher, and the workers it
    found (only those, and only if still there)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
    for k in kids:
        if _alive(k):
            os.kill(k, signal.SIGKILL)


def _stopped_worker(pid: int) -> bool:
    """Whether ``pid`` is a spawned worker in the stopped state (not a reused pid)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return state in ("T", "t") and b"spawn_main" in fh.read()
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find the worker processes")
def test_workers_exit_when_the_launcher_is_killed() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GNNPIPE_DIST_TIMEOUT_S": "30"}
    proc = subprocess.Popen(CLI[:-6] + ["--epochs", "100000", "--device", "cpu", "--log-level", "WARNING",
                                        "--mode", "graph", "--workers", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    kids: list[int] = []
    try:
        deadline = time.monotonic() + 180  # start-up on a loaded machine
        while time.monotonic() < deadline and len(kids) < 2:
            time.sleep(0.5)
            kids = _children(proc.pid)
        assert len(kids) == 2, "the workers did not start"
        time.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(k) for k in kids):
            time.sleep(0.5)
        assert not any(_alive(k) for k in kids), "workers outlived their launcher"
    finally:
        _end(proc, kids)


def _last_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def test_a_stopped_rank_is_named_once_its_heartbeat_is_older_than_the_stall_timeout(tmp_path) -> None:
    """SIGSTOP: rank 1 is alive but answers nothing; rank 0 waits for it in a
    transfer (bounded by a 60 s timeout that must not be what ends the run)."""
    proc, elapsed = _run(CLI + ["--mode", "graph", "--workers", "2"], 1, 2, "stop", tmp_path,
                         GNNPIPE_STALL_TIMEOUT_S="5", GNNPIPE_DIST_TIMEOUT_S="60")
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = _last_error(proc)
    assert last.startswith("error: worker rank 1 failed: stopped answering (no heartbeat for "), proc.stderr[-2000:]
    assert "rank 0" not in last  # the waiting rank is not blamed, nor did it fail
    assert not _alive(int((tmp_path / "failed_at").read_text().split()[1])), "the stopped worker was left behind"
    # Detection after 5 s; the whole run is over well within 45 s of the stop.
    assert elapsed < 45, f"exited {elapsed:.0f} s after the stop"


def test_the_stopped_rank_is_named_when_its_peers_transfer_times_out_first(tmp_path) -> None:
    """The process-group timeout (8 s) fires before the stall timeout: rank 0 fails
    with a timed-out transfer, but the rank to name is the one it was waiting for."""
    proc, elapsed = _run(CLI + ["--mode", "graph", "--workers", "2"], 1, 2, "stop", tmp_path,
                         GNNPIPE_STALL_TIMEOUT_S="600", GNNPIPE_DIST_TIMEOUT_S="8")
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = _last_error(proc)
    assert last.startswith("error: worker rank 1 failed: stopped answering (no heartbeat for "), proc.stderr[-2000:]
    assert "(then rank 0: " in last, last  # rank 0's timeout, reported as the consequence
    assert elapsed < 60, f"exited {elapsed:.0f} s after the stop"


def test_a_long_epoch_on_one_rank_is_not_mistaken_for_a_stall(tmp_path) -> None:
    """Rank 1 computes for 8 s at epoch 2 while rank 0 waits for it in a transfer:
    both keep beating, so a 2 s stall timeout ends nothing and the run completes."""
    out = tmp_path / "rec.json"
    proc, _ = _run(CLI + ["--mode", "graph", "--workers", "2", "--json-out", str(out)], 1, 2, "compute", tmp_path,
                   GNNPIPE_STALL_TIMEOUT_S="2", GNNPIPE_DIST_TIMEOUT_S="120", GNNPIPE_TEST_FAIL_SECONDS="8")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "test hook: rank 1 computes for 8 s" in proc.stderr
    import json

    assert len(json.loads(out.read_text())["epochs"]) == 4


class _Logged:
    """A run started in its own session (process group), its stderr collected by a
    thread; ``trained`` is set once an epoch was logged."""

    def __init__(self, args: list[str], **env_extra: str) -> None:
        import threading

        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                                  "MASTER_PORT")}
        env.update(OMP_NUM_THREADS="1", GNNPIPE_DIST_TIMEOUT_S="30", **env_extra)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                     start_new_session=True)
        self.lines: list[str] = []
        self.trained = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        import re

        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if re.search(r"epoch +\d+/", line):
                self.trained.set()

    def wait_trained(self) -> list[int]:
        """Wait for the first epoch's log line; the worker pids."""
        assert self.trained.wait(180), "no epoch was logged: " + self.err[-3000:]
        kids = _children(self.proc.pid)
        assert len(kids) == 2, kids
        return kids

    def wait(self) -> int:
        rc = self.proc.wait(timeout=120)
        self.reader.join(timeout=10)
        return rc

    @property
    def err(self) -> str:
        return "".join(self.lines)


PIPELINE = ["--mode", "pipeline", "--workers", "2", "--data-option", "num_nodes=2000", "--device", "cpu"]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find the worker processes")
def test_sigterm_at_the_launcher_stops_every_worker_quietly_with_exit_143() -> None:
    run = _Logged([sys.executable, "-m", "gnnpipe.train", *PIPELINE, "--epochs", "1000"])
    kids: list[int] = []
    try:
        kids = run.wait_trained()
        seen = len(run.lines)
        run.proc.send_signal(signal.SIGTERM)  # the launcher only, as `kill PID` does
        rc = run.wait()
        err = run.err
        assert rc == 143, err[-3000:]
        # After the signal: at most the epoch lines already on their way, then one line.
        after = [ln.rstrip("\n") for ln in run.lines[seen:] if " INFO gnnpipe.train: epoch " not in ln]
        assert after == ["error: terminated (SIGTERM)"], err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        assert not any(_alive(k) for k in kids), "workers outlived the terminated launcher"
    finally:
        _end(run.proc, kids)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find the worker processes")
def test_a_run_stopped_and_continued_as_a_whole_is_not_a_stall() -> None:
    """Ctrl-Z then ``fg`` stops every process of the run, launcher included, for
    longer than the stall timeout: nobody's heartbeat was missed, the run goes on."""
    run = _Logged([sys.executable, "-m", "gnnpipe.train", *PIPELINE, "--epochs", "60", "--log-level", "INFO"],
                  GNNPIPE_STALL_TIMEOUT_S="2")
    kids: list[int] = []
    try:
        kids = run.wait_trained()
        os.killpg(run.proc.pid, signal.SIGSTOP)
        time.sleep(6)
        os.killpg(run.proc.pid, signal.SIGCONT)
        assert run.wait() == 0, run.err[-3000:]
        assert "epoch 60/60" in run.err
    finally:
        _end(run.proc, kids)
