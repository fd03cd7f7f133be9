"""What huge pages do to fresh host temporaries (``train.host_huge_pages``).

Each round starts one process with torch's huge-page allocation (``THP_MEM_ALLOC_ENABLE=1``)
and one without, in turn; each times, at one thread, the fastest of 5 blocks of 16
operations on [rows, 100] float32 tensors (200,000 rows: 80 MB, a 200k-graph layer's
temporary), each a fresh tensor above glibc's mmap threshold:

- ``zero_fresh``: ``torch.zeros`` (the page faults and the zeroing alone);
- ``matmul_fresh``: ``x @ w`` with w [100, 100] into a fresh output;
- ``matmul_kept``: the same product into one kept buffer (no faults: the arithmetic);

and the process's peak resident set. And, in a process of its own, the first touch of
``--first-touch-gib`` GiB (``first_touch_s``: 512 MiB zero-filled tensors, kept, as a
stage's buffers and history are made before the first epoch; timed once, since a
process touches its memory for the first time only once). Writes a JSON with machine,
load and config::

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

THP_DEFRAG_FILE = "/sys/kernel/mm/transparent_hugepage/defrag"

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


_FIRST_TOUCH = """
import json, sys, time, torch
torch.set_num_threads(1)
t = time.perf_counter()
kept = [torch.zeros(128 << 20) for _ in range(int(float(sys.argv[1]) * 2))]  # 512 MiB each
print(json.dumps({"first_touch_s": time.perf_counter() - t, "gib": len(kept) / 2}))
"""


def _run(code: str, on: bool, arg: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != THP_VARIABLE}
    if on:
        env[THP_VARIABLE] = "1"
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"probe ({'on' if on else 'off'}) failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _one(on: bool, rows: int, first_touch_gib: float) -> dict[str, Any]:
    out = _run(_PROBE, on, str(rows))
    out["figures"]["first_touch_s"] = _run(_FIRST_TOUCH, on, str(first_touch_gib))["first_touch_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--first-touch-gib", type=float, default=4.0)
    ap.add_argument("--out", default="bench/results/huge_pages.json")
    a = ap.parse_args(argv)
    record: dict[str, Any] = {
        "benchmark": "huge_pages", "machine": machine(), "load_average_before": load_average(),
        "config": {"rows": a.rows, "width": 100, "ops_per_block": 16, "blocks": 5, "threads": 1,
                   "rounds": a.rounds, "first_touch_gib": a.first_touch_gib, "kernel_policy": _system_policy(),
                   "kernel_defrag": _system_policy(THP_DEFRAG_FILE)},
        "what": __doc__.split("\n\n")[1].replace("\n", " "), "rounds": []}
    for r in range(a.rounds):
        on, off = _one(True, a.rows, a.first_touch_gib), _one(False, a.rows, a.first_touch_gib)
        ratio = {k: on["figures"][k] / off["figures"][k] for k in on["figures"] if off["figures"][k]}
        record["rounds"].append({"round": r + 1, "on": on, "off": off, "on_over_off": ratio})
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratio.items()), flush=True)
    record.update({"date_utc": now_utc(), "load_average_after": load_average()})
    write_json(Path(a.out), record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
