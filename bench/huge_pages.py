"""What huge pages do to fresh host temporaries (``train.host_huge_pages``).

Each round starts one process with torch's huge-page allocation (``THP_MEM_ALLOC_ENABLE=1``)
and one without, in turn; each times, at one thread, the fastest of 5 blocks of 16
operations on [rows, 100] float32 tensors (200,000 rows: 80 MB, a 200k-graph layer's
temporary), each a fresh tensor above glibc's mmap threshold:

- ``zero_fresh``: ``torch.zeros`` (the page faults and the zeroing alone);
- ``matmul_fresh``: ``x @ w`` with w [100, 100] into a fresh output;
- ``matmul_kept``: the same product into one kept buffer (no faults: the arithmetic);

and the process's peak resident set. Writes a JSON with machine, load and config::

    python -m bench.huge_pages --out bench/results/huge_pages.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.runner import load_average, machine, now_utc, write_json  # noqa: E402
from gnnpipe.huge_pages import THP_VARIABLE, _system_policy  # noqa: E402

_PROBE = """
import json, sys, time, torch
from gnnpipe.huge_pages import huge_pages_state
from gnnpipe.plan.timing import proc_kib_bytes
torch.set_num_threads(1)
rows, ops, blocks = int(sys.argv[1]), 16, 5
state = huge_pages_state()
x, w, kept = torch.randn(rows, 100), torch.randn(100, 100), torch.empty(rows, 100)
def zero_fresh():
    return [torch.zeros(rows, 100) for _ in range(ops)]
def matmul_fresh():
    return [x @ w for _ in range(ops)]
def matmul_kept():
    for _ in range(ops):
        torch.mm(x, w, out=kept)
out = {}
for name, fn in (("zero_fresh", zero_fresh), ("matmul_fresh", matmul_fresh), ("matmul_kept", matmul_kept)):
    fn()
    times = []
    for _ in range(blocks):
        t = time.perf_counter(); keep = fn(); times.append(time.perf_counter() - t); del keep
    out[name + "_s"] = min(times)
out["peak_resident_bytes"] = proc_kib_bytes("/proc/self/status", "VmHWM", 0)
print(json.dumps({"state": state, "figures": out}))
"""


def _one(on: bool, rows: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != THP_VARIABLE}
    if on:
        env[THP_VARIABLE] = "1"
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(rows)], capture_output=True, text=True, env=env,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"probe ({'on' if on else 'off'}) failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="bench/results/huge_pages.json")
    a = ap.parse_args(argv)
    record: dict[str, Any] = {
        "benchmark": "huge_pages", "machine": machine(), "load_average_before": load_average(),
        "config": {"rows": a.rows, "width": 100, "ops_per_block": 16, "blocks": 5, "threads": 1,
                   "rounds": a.rounds, "kernel_policy": _system_policy()},
        "what": __doc__.split("\n\n")[1].replace("\n", " "), "rounds": []}
    for r in range(a.rounds):
        on, off = _one(True, a.rows), _one(False, a.rows)
        ratio = {k: on["figures"][k] / off["figures"][k] for k in on["figures"] if off["figures"][k]}
        record["rounds"].append({"round": r + 1, "on": on, "off": off, "on_over_off": ratio})
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratio.items()), flush=True)
    record.update({"date_utc": now_utc(), "load_average_after": load_average()})
    write_json(Path(a.out), record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
