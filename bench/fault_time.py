"""How long a run takes to end after one of its workers is killed (issue: a dead
worker ends the run with an error naming it, never a hang).

Each try runs ``python -m gnnpipe.train`` (pipeline mode, 2 workers) with the test
hook that makes rank 1 SIGKILL itself at an epoch (``GNNPIPE_TEST_FAIL_*``, see
:mod:`gnnpipe.engine.fault_hooks`), and measures, from the hook's own log line (its
timestamp, taken just before the kill) to the launcher's exit, the time to exit,
with the exit code and the launcher's last line. Under the local launcher and under
torchrun (``--standalone``, no restarts). Writes a JSON with machine and load::

    python -m bench.fault_time --out bench/results/fault_time.json
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .runner import load_average, machine, now_utc, write_json

ARGS = ["-m", "gnnpipe.train", "--dataset", "synthetic", "--data-option", "num_nodes=2000", "--model", "gcnii",
        "--layers", "8", "--hidden", "32", "--epochs", "20", "--eval-every", "5", "--mode", "pipeline",
        "--workers", "2", "--log-level", "INFO"]
LAUNCHERS = {"local": [sys.executable], "torchrun": [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                      "--nproc-per-node", "2"]}
HOOK_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d)\S* \[rank 1\].*kills itself", re.M)
#: The launcher's line that blames rank 1: ours, or torchrun's agent (``local_rank: 1``).
BLAME = {"local": re.compile(r"worker rank 1 failed"), "torchrun": re.compile(r"failed \(exitcode: -9\) local_rank: 1")}
CLOCK = re.compile(r"(\d\d):(\d\d):(\d\d)(\.\d+)?")


def _clock_s(line: str) -> float | None:
    """Seconds since midnight of the first ``HH:MM:SS[.fff]`` in a log line."""
    m = CLOCK.search(line)
    if m is None:
        return None
    return int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) + float(m[4] or 0)


def one_try(launcher: str, epoch: int, workdir: Path) -> dict[str, Any]:
    env = {**os.environ, "GNNPIPE_TEST_FAIL_RANK": "1", "GNNPIPE_TEST_FAIL_EPOCH": str(epoch),
           "GNNPIPE_TEST_FAIL_HOW": "kill", "OMP_NUM_THREADS": "1"}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    proc = subprocess.run([*LAUNCHERS[launcher], *ARGS, "--json-out", str(workdir / f"{launcher}.json")],
                          capture_output=True, text=True, env=env, cwd=workdir, timeout=600)
    ended = time.time()
    text = proc.stdout + proc.stderr
    hook = HOOK_LINE.search(text)
    if hook is None:
        return {"launcher": launcher, "returncode": proc.returncode, "error": "no kill line in the output"}
    # The log's clock has whole seconds: the hook's second, on today's date (local time).
    h, m, s = map(int, hook.groups())
    lt = time.localtime(ended)
    killed = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, h, m, s, 0, 0, -1))
    lines = [ln for ln in text.splitlines() if ln.strip()]
    named = [ln for ln in lines if BLAME[launcher].search(ln)]
    blame_clock = _clock_s(named[0]) if named else None
    return {"launcher": launcher, "returncode": proc.returncode,
            "kill_to_blame_s": None if blame_clock is None else round(blame_clock - (h * 3600 + m * 60 + s), 1),
            "kill_to_exit_s": round(ended - killed, 1), "kill_time_resolution_s": 1.0,
            "line_naming_rank_1": named[0][-300:] if named else None, "last_line": lines[-1][-300:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results/fault_time.json")
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--epoch", type=int, default=3, help="the epoch at which rank 1 kills itself")
    args = ap.parse_args(argv)
    load_before = load_average()
    tries = []
    with tempfile.TemporaryDirectory() as tmp:
        for launcher in LAUNCHERS:
            for _ in range(args.tries):
                tries.append(one_try(launcher, args.epoch, Path(tmp)))
                print(tries[-1], flush=True)
    write_json(Path(args.out), {
        "what": "time from a worker's SIGKILL (the test hook's log line, whole seconds) to the launcher's line "
                "that names the killed rank (kill_to_blame_s, from the log clocks) and to the launcher's exit "
                "(kill_to_exit_s, wall clock), pipeline mode, 2 workers, GCNII-8 hidden 32 on a 2,000-vertex synthetic graph (measured)",
        "command": " ".join(["python", *ARGS]), "written_utc": now_utc(), "machine": machine(),
        "load_average_before": load_before, "load_average_after": load_average(), "tries": tries})
    return 0


if __name__ == "__main__":
    sys.exit(main())
