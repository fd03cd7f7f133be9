"""Run a suite: one ``python -m gnnpipe.train`` subprocess per run, resumable.

Files under ``OUT/SUITE/`` (``OUT`` defaults to ``bench/results``), per run named by
its hash (:func:`bench.suite.run_name`):

* ``NAME.json``: the trainer's own result record (``--json-out``, written atomically
  by the trainer at the end, so a record that exists is complete). A rerun of the
  suite skips every run whose record exists and is current: a killed suite resumes.
  A record is *stale* when its resolved config differs from what the run's settings
  resolve to now (a trainer default changed, :mod:`bench.resolved`): the runner says
  which fields changed and runs it again. A record whose settings the suite file now
  writes differently (a default made explicit) but which resolve to the same config
  is renamed to the run's new name, not run again (:func:`adopt_records`).
* ``NAME.run.json``: the runner's sidecar: argv, settings, wall time of the
  subprocess, exit code, the load average before and after the run, and the source
  revision of the gnnpipe it ran (:func:`source_revision`: the record's config does
  not change when the code does).
* ``NAME.failed.json``: only for a run that failed: exit code and the stderr tail.
  The suite goes on with the next run; a rerun tries the failed run again.
* ``NAME.log``: the run's stdout and stderr.
* ``manifest.json``: the machine (hostname, cores, torch), the suite's description
  and every run of the suite with its settings, argv and status.

Runs go through the public entry only (the CLI in a subprocess). The one gnnpipe
function the runner calls is the CLI's own argument parser
(:func:`gnnpipe.cli.parse_config`, through :mod:`bench.resolved`), to know what a
run's settings resolve to without running it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, TextIO

from . import resolved
from .suite import RunSpec, Suite, argv, matches

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "bench" / "results"
TRAINER = (sys.executable, "-m", "gnnpipe.train")
STDERR_TAIL_CHARS = 4000


def default_data_root() -> str:
    """``$GNNPIPE_DATASETS``, else ``../shared/datasets`` beside the repository."""
    return os.environ.get("GNNPIPE_DATASETS", str(REPO.parent / "shared" / "datasets"))


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def source_revision() -> dict[str, Any] | None:
    """The git commit of the gnnpipe source that this environment imports, and whether
    its ``gnnpipe/`` differs from that commit (``dirty``); None when it is not a git
    checkout (an installed wheel: ``machine()["gnnpipe"]`` is its version).

    The package is located without importing it (``importlib.util.find_spec``), as the
    trainer subprocesses, which share this environment, find it."""
    import importlib.util

    spec = importlib.util.find_spec("gnnpipe")
    if spec is None or spec.origin is None:
        return None
    pkg = Path(spec.origin).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(pkg), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", str(pkg), "status", "--porcelain", "--", "."],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()), "path": str(pkg)}


def machine() -> dict[str, Any]:
    """The machine the suite runs on (read without importing torch), and the source
    revision of the gnnpipe it runs."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()
    return {"hostname": socket.gethostname(), "cpu_cores": {"logical": os.cpu_count(), "usable": usable},
            "platform": platform.platform(), "python": platform.python_version(),
            "torch": _version("torch"), "gnnpipe": _version("gnnpipe"), "source": source_revision()}


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically (temp file beside it, then rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)


def write_measurement(args: Any, what: str, load_before: list[float] | None, **body: Any) -> None:
    """A standalone benchmark's JSON at ``args.out``: what it measured, its flags
    (``args`` less ``out``), when, the machine and the load average before (as the
    caller read it) and after, then ``body``."""
    write_json(Path(args.out), {
        "what": what, "config": {k: v for k, v in vars(args).items() if k != "out"}, "written_utc": now_utc(),
        "machine": machine(), "load_average_before": load_before, "load_average_after": load_average(), **body})


def read_json(path: Path) -> Any | None:
    """The JSON at ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class RunFiles:
    """The files of one run under a suite's output folder."""

    def __init__(self, out_dir: Path, name: str) -> None:
        self.record = out_dir / f"{name}.json"
        self.sidecar = out_dir / f"{name}.run.json"
        self.failed = out_dir / f"{name}.failed.json"
        self.log = out_dir / f"{name}.log"

    def done(self) -> bool:
        """A record exists and parses (the trainer writes it atomically, at the end)."""
        return read_json(self.record) is not None

    def changes(self, point: dict[str, Any]) -> list[str] | None:
        """None without a record; else the fields of the record's config that differ
        from what ``point`` resolves to now (empty: the record is current)."""
        record = read_json(self.record)
        if record is None:
            return None
        return resolved.changes(record.get("config", {}), resolved.resolved_config(point))

    def status(self, point: dict[str, Any]) -> str:
        changed = self.changes(point)
        if changed is not None:
            return "stale" if changed else "ok"
        return "failed" if self.failed.exists() else "pending"

    def paths(self) -> tuple[Path, ...]:
        return (self.record, self.sidecar, self.failed, self.log)

    def remove(self) -> None:
        for path in self.paths():
            path.unlink(missing_ok=True)


def execute(spec: RunSpec, out_dir: Path, data_root: str | None,
            trainer: Iterable[str] = TRAINER) -> dict[str, Any]:
    """Run one point through the trainer CLI; write its sidecar (and, on failure, its
    ``.failed.json``). Returns the sidecar."""
    files = RunFiles(out_dir, spec.name)
    args = [*trainer, *argv(spec.point, data_root), "--json-out", str(files.record)]
    load_before = load_average()
    started = now_utc()
    t0 = time.perf_counter()
    with open(files.log, "w") as log:  # run in the suite's folder: nothing lands elsewhere
        proc = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=out_dir)
    wall = time.perf_counter() - t0
    ok = proc.returncode == 0 and files.done()
    side = {"name": spec.name, "argv": args, "point": spec.point, "grid": spec.grid,
            "started_utc": started, "wall_s": round(wall, 3), "returncode": proc.returncode,
            "status": "ok" if ok else "failed", "load_average_before": load_before,
            "load_average_after": load_average(), "hostname": socket.gethostname(),
            "source": source_revision()}
    write_json(files.sidecar, side)
    if ok:
        files.failed.unlink(missing_ok=True)
    else:
        tail = files.log.read_text(errors="replace")[-STDERR_TAIL_CHARS:]
        reason = "" if proc.returncode else "exit code 0 but no record was written"
        write_json(files.failed, {"name": spec.name, "returncode": proc.returncode, "reason": reason,
                                  "stderr_tail": tail, "argv": args, "wall_s": side["wall_s"]})
    return side


def command_text(trainer: tuple[str, ...], args: list[str]) -> str:
    """A shell line of the command (the default trainer shown as ``python -m ...``)."""
    if trainer == TRAINER:
        return "python " + shlex.join([*trainer[1:], *args])
    return shlex.join([*trainer, *args])


# ------------------------------------------------------------------ time left
def group_key(point: dict[str, Any]) -> str:
    """A run's settings without its seed: runs of one group cost about the same."""
    return json.dumps({k: v for k, v in point.items() if k != "seed"}, sort_keys=True)


def estimate_left(done: list[tuple[dict[str, Any], float]], remaining: list[dict[str, Any]]) -> float | None:
    """Seconds the ``remaining`` points will take, from the wall times of the ``done``
    ones: a point costs the mean of its group's done runs (same settings, other
    seed), or the mean of all done runs when its group has none yet. None before
    any run is done."""
    if not done:
        return None
    by_group: dict[str, list[float]] = {}
    for point, wall in done:
        by_group.setdefault(group_key(point), []).append(wall)
    overall = sum(w for _, w in done) / len(done)
    total = 0.0
    for point in remaining:
        walls = by_group.get(group_key(point))
        total += sum(walls) / len(walls) if walls else overall
    return total


# ------------------------------------------------------------------- manifest
def manifest(suite: Suite, out_dir: Path, data_root: str | None, trainer: Iterable[str]) -> dict[str, Any]:
    """Everything about a suite's runs that is not a record, from the files there now."""
    runs = []
    for spec in suite.runs:
        files = RunFiles(out_dir, spec.name)
        side = read_json(files.sidecar) or {}
        runs.append({"name": spec.name, "label": spec.label(suite), "grid": spec.grid,
                     "tags": spec.tags, "status": files.status(spec.point), "point": spec.point,
                     "argv": [*trainer, *argv(spec.point, data_root), "--json-out", files.record.name],
                     **{k: side[k] for k in ("wall_s", "load_average_before", "load_average_after") if k in side}})
    return {"suite": suite.name, "file": str(_relative(suite.path)), "description": suite.description,
            "notes": suite.notes, "estimate_minutes": suite.estimate_minutes, "written_utc": now_utc(),
            "machine": machine(), "data_root": data_root, "varied": list(suite.varied),
            "grid_names": list(suite.grid_names), "runs": runs}


def _relative(path: Path) -> Path:
    try:
        return path.resolve().relative_to(REPO)
    except ValueError:
        return path


# ------------------------------------------------------------------ records
def records(out_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(name, record) of every trainer record in a suite folder, by name: the
    ``NAME.json`` files that parse to a record with a config (not the sidecars, the
    failure notes or the manifest)."""
    out = []
    for path in sorted(out_dir.glob("*.json")):
        stem = path.name[: -len(".json")]
        if "." in stem or stem == "manifest":
            continue
        record = read_json(path)
        if isinstance(record, dict) and isinstance(record.get("config"), dict):
            out.append((stem, record))
    return out


def adopt_records(suite: Suite, out_dir: Path) -> list[tuple[str, str]]:
    """Rename the records in ``out_dir`` that no run of ``suite`` names, but whose
    resolved config is a run's that has no record, to that run's name (record,
    sidecar and log). Returns the (old, new) names.

    A suite file that spells a default out (``snapshot_period = 1`` where the point
    had left it to the default) changes the runs' names, not what they compute; the
    records it has are theirs."""
    names = {spec.name for spec in suite.runs}
    orphans: dict[str, str] = {}
    for stem, record in records(out_dir):
        if stem not in names:
            orphans.setdefault(resolved.key(record["config"]), stem)
    adopted = []
    for spec in suite.runs:
        if not orphans:
            break
        new = RunFiles(out_dir, spec.name)
        if new.done():
            continue
        old_name = orphans.pop(resolved.key(resolved.resolved_config(spec.point)), None)
        if old_name is None:
            continue
        old = RunFiles(out_dir, old_name)
        new.remove()
        side = read_json(old.sidecar)
        for src, dst in ((old.log, new.log), (old.record, new.record)):
            if src.exists():
                src.rename(dst)
        if side is not None:
            write_json(new.sidecar, {**side, "name": spec.name, "point": spec.point, "adopted_from": old_name})
        old.remove()
        adopted.append((old_name, spec.name))
    return adopted


# ------------------------------------------------------------------------ run
def _headline(record: dict[str, Any] | None) -> str:
    """Best test accuracy and epoch time of a record, for the progress line."""
    if not record:
        return ""
    test = record.get("best", {}).get("test_acc")
    epoch = record.get("summary", {}).get("mean_epoch_time_s")
    parts = []
    if test is not None:
        parts.append(f"test {100 * test:.2f} %")
    if epoch is not None:
        parts.append(f"epoch {epoch:.3f} s")
    return ", ".join(parts)


def run_suite(suite: Suite, out_root: Path = DEFAULT_OUT, only: str | None = None, dry_run: bool = False,
              data_root: str | None = None, trainer: Iterable[str] = TRAINER,
              stream: TextIO = sys.stdout) -> int:
    """Run (or with ``dry_run`` list) the runs of ``suite`` that ``only`` selects.

    One progress line per run. Returns 0 when every selected run has a record at
    the end, 1 otherwise."""
    trainer = tuple(trainer)
    out_dir = Path(out_root).resolve() / suite.name
    data_root = None if data_root is None else str(Path(data_root).resolve())
    selected = [s for s in suite.runs if matches(s, only)]
    say = lambda text: print(text, file=stream, flush=True)  # noqa: E731
    width = len(str(len(selected)))
    if dry_run:
        for i, spec in enumerate(selected, 1):
            status = RunFiles(out_dir, spec.name).status(spec.point)
            command = command_text(trainer, [*argv(spec.point, data_root), "--json-out",
                                             str(out_dir / f"{spec.name}.json")])
            say(f"[{i:{width}}/{len(selected)}] {spec.name} {status:7s} {spec.label(suite)}\n"
                f"    {command}")
        say(f"{suite.name}: {len(selected)} of {len(suite.runs)} runs selected (dry run: nothing ran)")
        return 0
    out_dir.mkdir(parents=True, exist_ok=True)
    for old, new in adopt_records(suite, out_dir):
        say(f"{new}: the record of {old}, renamed (same resolved config; the suite file writes its settings "
            f"differently now)")
    todo = []
    for spec in selected:
        files = RunFiles(out_dir, spec.name)
        changed = files.changes(spec.point)
        if changed:
            say(f"{spec.name}: stale record, run again ({'; '.join(changed)}) {spec.label(suite)}")
            files.remove()  # a failed rerun must not leave the old record standing for it
        if changed is None or changed:
            todo.append(spec.name)
    man_path = out_dir / "manifest.json"
    write_json(man_path, manifest(suite, out_dir, data_root, trainer))
    say(f"{suite.name}: {len(selected)} runs selected, {len(selected) - len(todo)} have records "
        f"(skipped), {len(todo)} to run -> {out_dir}")
    done: list[tuple[dict[str, Any], float]] = []
    failed = 0
    t_start = time.perf_counter()
    for i, spec in enumerate(selected, 1):
        head = f"[{i:{width}}/{len(selected)}] {spec.name} {spec.label(suite)}"
        if spec.name not in todo:
            say(f"{head}: skip (record exists)")
            continue
        side = execute(spec, out_dir, data_root, trainer)
        todo.remove(spec.name)
        done.append((spec.point, side["wall_s"]))
        if side["status"] == "ok":
            result = _headline(read_json(RunFiles(out_dir, spec.name).record))
        else:
            failed += 1
            result = f"FAILED (exit {side['returncode']}, see {spec.name}.failed.json)"
        left = estimate_left(done, [s.point for s in selected if s.name in todo])
        load = side["load_average_after"]
        say(f"{head}: {side['wall_s']:.1f} s, {result}; load {load[0] if load else '?'}; "
            f"elapsed {fmt_duration(time.perf_counter() - t_start)}, left ~{fmt_duration(left)}")
        write_json(man_path, manifest(suite, out_dir, data_root, trainer))
    say(f"{suite.name}: {len(done) - failed} ran, {len(selected) - len(done)} skipped, {failed} failed "
        f"in {fmt_duration(time.perf_counter() - t_start)}; report: python -m bench report {suite.name}"
        + ("" if Path(out_root).resolve() == DEFAULT_OUT else f" --out {out_root}"))
    return 0 if failed == 0 else 1
