"""A trainer run's host heap over time, per process: what glibc's heap holds in use and free.

A worker's peak resident set (the record's ``peak_memory_bytes``, VmHWM) cannot tell
what the process keeps alive from what glibc's heap keeps after it was freed: memory
the heap can neither reuse for the next request nor give back, because blocks still in
use sit between the free ones (bench/results/memory_200k/arena_all/README.md: a stage's
heap at 5.79 GB with 4.79 GB of it free). This runs ``python -m gnnpipe.train ARGS``
with a sampling thread in every Python process of the run (the launcher and each
spawned worker: a ``sitecustomize`` module put first on ``PYTHONPATH``, so a
``sitecustomize`` of your own is not loaded during the trace) and writes, per process:
its largest resident set and, at that sample, the heap's size, the bytes of it in use
and free, and the bytes in blocks mapped on their own (glibc's ``mallinfo2``, glibc 2.33
or later), beside the trainer record's own peaks. JSON with the machine, the load
average before and after and the command::

    python bench/heap_trace.py --out bench/results/memory_200k/arena_all/heap_trace.json -- \\
        --data-option num_nodes=200000 --model gcn --layers 32 --mode pipeline --chunks 8 ...

The sampling adds a thread that wakes every ``--period`` seconds in each process; what
it measures is the allocator's state, not time.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.runner import load_average, write_measurement  # noqa: E402

#: Columns of a process's samples (one line each, tab-separated).
COLUMNS = ("time_s", "rss_bytes", "heap_bytes", "heap_in_use_bytes", "heap_free_bytes", "mapped_bytes")

_SITECUSTOMIZE = '''
import ctypes, os, threading, time
_dir = os.environ.get("GNNPIPE_HEAP_TRACE_DIR")
if _dir:
    class _Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                   "fsmblks", "uordblks", "fordblks", "keepcost")]
    _libc = ctypes.CDLL(None)
    _libc.mallinfo2.restype = _Info
    _period = float(os.environ.get("GNNPIPE_HEAP_TRACE_PERIOD", "0.1"))

    def _sample():
        pid = os.getpid()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\\0", b" ").decode(errors="replace").strip()
        with open(os.path.join(_dir, f"{pid}.tsv"), "w", buffering=1) as out:
            out.write("# " + cmd + "\\n")
            while True:
                rss = 0
                with open("/proc/self/status") as s:
                    for line in s:
                        if line.startswith("VmRSS:"):
                            rss = int(line.split()[1]) * 1024
                            break
                m = _libc.mallinfo2()
                out.write(f"{time.time():.3f}\\t{rss}\\t{m.arena}\\t{m.uordblks}\\t{m.fordblks}\\t{m.hblkhd}\\n")
                time.sleep(_period)

    threading.Thread(target=_sample, name="gnnpipe-heap-trace", daemon=True).start()
'''


def has_mallinfo2() -> bool:
    """Whether this C library reports its heap as glibc 2.33+ does."""
    try:
        ctypes.CDLL(None).mallinfo2  # noqa: B018 - the lookup is the check
    except (OSError, AttributeError):
        return False
    return True


def summarize(path: Path) -> dict[str, Any] | None:
    """One process's samples: its command, how many, its largest resident set and the
    heap at that sample, and the most the heap held free at any sample; None when the
    process wrote none."""
    lines = path.read_text().splitlines()
    cmd = lines[0][2:] if lines and lines[0].startswith("# ") else ""
    rows = [dict(zip(COLUMNS, (float(v) for v in ln.split("\t")))) for ln in lines[1:] if ln.count("\t") == 5]
    if not rows:
        return None
    peak = max(rows, key=lambda r: r["rss_bytes"])
    return {"pid": int(path.stem), "command": cmd[:300], "samples": len(rows),
            "seconds": round(rows[-1]["time_s"] - rows[0]["time_s"], 3),
            "max_rss_bytes": int(peak["rss_bytes"]),
            "at_max_rss": {k: int(peak[k]) for k in COLUMNS[2:]},
            "max_heap_free_bytes": int(max(r["heap_free_bytes"] for r in rows))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON to write")
    ap.add_argument("--period", type=float, default=0.1, help="seconds between samples (default 0.1)")
    ap.add_argument("trainer_args", nargs=argparse.REMAINDER,
                    help="after --: the arguments of python -m gnnpipe.train (--json-out is added)")
    args = ap.parse_args(argv)
    train = [a for a in args.trainer_args if a != "--"]
    if not train:
        print("error: trainer arguments: expected them after --, found none", file=sys.stderr)
        return 2
    if not args.period > 0:
        print(f"error: --period: expected seconds > 0, found {args.period}", file=sys.stderr)
        return 2
    if not has_mallinfo2():
        print("error: this C library has no mallinfo2 (glibc 2.33 or later): nothing to trace", file=sys.stderr)
        return 2
    before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        site, samples = Path(tmp) / "site", Path(tmp) / "samples"
        site.mkdir()
        samples.mkdir()
        (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        env = {**os.environ, "GNNPIPE_HEAP_TRACE_DIR": str(samples), "GNNPIPE_HEAP_TRACE_PERIOD": str(args.period),
               "PYTHONPATH": os.pathsep.join([str(site)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
        record_path = Path(tmp) / "record.json"
        cmd = [sys.executable, "-m", "gnnpipe.train", *train, "--json-out", str(record_path)]
        proc = subprocess.run(cmd, env=env)
        if proc.returncode != 0:
            print(f"error: the trainer exited {proc.returncode}; nothing written", file=sys.stderr)
            return 1
        record = json.loads(record_path.read_text())
        procs = [s for s in (summarize(p) for p in sorted(samples.glob("*.tsv"))) if s is not None]
    procs.sort(key=lambda s: -s["max_rss_bytes"])
    last = record["epochs"][-1] if record.get("epochs") else {}
    write_measurement(args, "per process of a trainer run: the largest resident set and glibc's heap at that "
                            "sample (size, in use, free, mapped blocks), sampled in a thread (measured)", before,
                      command=cmd[1:-2], processes=procs,
                      record={"mode": record.get("mode"), "peak_memory_bytes": record.get("peak_memory_bytes"),
                              "epoch_times_s": [e.get("epoch_time_s") for e in record.get("epochs", [])],
                              "last_loss": last.get("loss")})
    for s in procs:
        h = s["at_max_rss"]
        print(f"pid {s['pid']}: max rss {s['max_rss_bytes'] / 2**30:.2f} GiB; heap then {h['heap_bytes'] / 2**30:.2f} "
              f"GiB ({h['heap_free_bytes'] / 2**30:.2f} free), mapped {h['mapped_bytes'] / 2**30:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
