"""Estimate a suite's run time from one short probe per setting.

For every group of runs that differ only in their seed, one probe runs the group's
first point through the trainer CLI with ``epochs = 4``, ``eval_every = 1`` and no
patience, and measures from its record the steady epoch time (median of epochs 2-4;
the first is warm-up), the time of one evaluation (median), and the rest of the subprocess' wall time
(start-up, loading, partitioning, worker launch: the overhead). A run is then
estimated as ``overhead + epochs * epoch + evaluations * evaluation``: an upper bound
where patience may stop it early. Probe records go to ``OUT/SUITE/estimate/`` (a
rerun reuses them) and the estimate to ``OUT/SUITE/estimate/estimate.json``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any, TextIO

from .runner import RunFiles, execute, fmt_duration, group_key, machine, now_utc, read_json, write_json
from .suite import RunSpec, Suite, matches, normalize

PROBE_EPOCHS = 4
#: The trainer's defaults (``python -m gnnpipe.train --help``), for a suite that leaves them out.
TRAINER_EPOCHS, TRAINER_EVAL_EVERY = 100, 5


def probe_point(point: dict[str, Any]) -> dict[str, Any]:
    """The short run that stands for ``point``."""
    probe = {k: v for k, v in point.items() if k != "patience"}
    probe.update(epochs=PROBE_EPOCHS, eval_every=1)
    return normalize(probe)


def run_estimate(point: dict[str, Any], record: dict[str, Any], wall_s: float) -> dict[str, float]:
    """Seconds ``point`` will take (at most), from its probe's record and wall time."""
    epochs = record["epochs"]
    steady = [e["epoch_time_s"] for e in epochs[1:]] or [epochs[0]["epoch_time_s"]]
    evals = [e["eval_time_s"] for e in epochs if e.get("eval_time_s") is not None]
    epoch_s = statistics.median(steady)
    eval_s = statistics.median(evals) if evals else 0.0
    spent = sum(e["epoch_time_s"] for e in epochs) + sum(evals)
    overhead = max(wall_s - spent, 0.0)
    n_epochs = point.get("epochs", TRAINER_EPOCHS)
    n_evals = n_epochs // point.get("eval_every", TRAINER_EVAL_EVERY)
    return {"epoch_s": epoch_s, "eval_s": eval_s, "overhead_s": overhead, "epochs": n_epochs,
            "evaluations": n_evals, "run_s": overhead + n_epochs * epoch_s + n_evals * eval_s}


def estimate_suite(suite: Suite, out_root: Path, only: str | None = None, data_root: str | None = None,
                   stream: TextIO = sys.stdout) -> int:
    """Probe every setting of the selected runs and print the suite's estimate."""
    out_dir = Path(out_root).resolve() / suite.name / "estimate"
    data_root = None if data_root is None else str(Path(data_root).resolve())
    out_dir.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[RunSpec]] = {}
    for spec in suite.runs:
        if matches(spec, only):
            groups.setdefault(group_key(spec.point), []).append(spec)
    rows, total, failed = [], 0.0, 0
    for i, members in enumerate(groups.values(), 1):
        probe = RunSpec(probe_point(members[0].point), members[0].grid)
        files = RunFiles(out_dir, probe.name)
        side = read_json(files.sidecar) if files.done() else None
        if side is None:
            side = execute(probe, out_dir, data_root)
        record = read_json(files.record)
        text = members[0].label(suite)
        if side["status"] != "ok" or record is None:
            failed += 1
            print(f"[{i}/{len(groups)}] {text}: probe FAILED, see {files.failed}", file=stream, flush=True)
            continue
        est = run_estimate(members[0].point, record, side["wall_s"])
        total += est["run_s"] * len(members)
        rows.append({"label": text, "probe": probe.name, "runs": len(members), **est})
        print(f"[{i}/{len(groups)}] {text}: epoch {est['epoch_s']:.3f} s, evaluation {est['eval_s']:.3f} s, "
              f"overhead {est['overhead_s']:.1f} s -> {len(members)} x {fmt_duration(est['run_s'])}",
              file=stream, flush=True)
    write_json(out_dir / "estimate.json", {"suite": suite.name, "written_utc": now_utc(), "machine": machine(),
                                           "total_s": total, "failed_probes": failed, "groups": rows})
    print(f"{suite.name}: estimated {fmt_duration(total)} ({total / 60:.1f} min) for "
          f"{sum(r['runs'] for r in rows)} runs, an upper bound where patience stops runs early"
          + (f"; {failed} probes failed" if failed else ""), file=stream, flush=True)
    return 0 if not failed else 1
