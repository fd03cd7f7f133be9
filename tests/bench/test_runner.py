"""The runner with the real trainer on a tiny graph: a partial suite resumes (runs
with a record are skipped, their files untouched), a failing run leaves a
``.failed.json`` and the suite goes on, and the manifest lists machine and runs."""

from __future__ import annotations

import io
import json
from pathlib import Path

from bench.runner import RunFiles, read_json, run_suite, source_revision
from bench.suite import load_suite

TINY = """
[suite]
description = "two tiny single-mode runs"
[defaults]
dataset = "synthetic"
data_options = { num_nodes = 300 }
layers = 2
hidden = 8
epochs = 3
eval_every = 1
mode = "single"
[[grid]]
model = "gcn"
seed = [0, 1]
"""


def _run(suite, out: Path, only: str | None = None) -> tuple[int, str]:
    stream = io.StringIO()
    rc = run_suite(suite, out, only=only, stream=stream)
    return rc, stream.getvalue()


def test_a_partial_suite_resumes_and_skips_what_it_has(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    suite = load_suite(path)
    first, second = suite.runs
    out = tmp_path / "out"

    rc, text = _run(suite, out, only="seed=0")
    assert rc == 0, text
    record = RunFiles(out / "tiny", first.name).record
    assert read_json(record)["config"]["train"]["seed"] == 0
    assert not RunFiles(out / "tiny", second.name).record.exists()
    stamp = record.stat().st_mtime_ns

    rc, text = _run(suite, out)  # the whole suite: the first run is not run again
    assert rc == 0, text
    lines = [ln for ln in text.splitlines() if ln.startswith("[")]
    assert len(lines) == 2
    assert first.name in lines[0] and lines[0].endswith("skip (record exists)")
    assert second.name in lines[1] and "left ~0:00:00" in lines[1]
    assert record.stat().st_mtime_ns == stamp
    assert read_json(RunFiles(out / "tiny", second.name).record)["best"]["test_acc"] is not None

    manifest = json.loads((out / "tiny" / "manifest.json").read_text())
    assert {"hostname", "cpu_cores", "torch"} <= set(manifest["machine"])
    assert [r["name"] for r in manifest["runs"]] == [first.name, second.name]
    assert all(r["status"] == "ok" for r in manifest["runs"])
    side = read_json(RunFiles(out / "tiny", second.name).sidecar)
    assert side["returncode"] == 0 and len(side["load_average_before"]) == 3 and side["load_average_after"]
    assert side["source"] == source_revision()  # which code made the record


def test_a_failing_run_writes_failed_json_and_the_suite_goes_on(tmp_path):
    path = tmp_path / "mixed.toml"
    path.write_text(TINY.replace('model = "gcn"\nseed = [0, 1]', 'model = ["nosuchmodel", "gcn"]\nseed = 0'))
    suite = load_suite(path)
    bad, good = suite.runs
    out = tmp_path / "out"
    rc, text = _run(suite, out)
    assert rc == 1
    failed = read_json(RunFiles(out / "mixed", bad.name).failed)
    assert failed["returncode"] == 2 and "nosuchmodel" in failed["stderr_tail"]
    assert "FAILED (exit 2" in text
    assert RunFiles(out / "mixed", good.name).done()
    statuses = {r["name"]: r["status"] for r in read_json(out / "mixed" / "manifest.json")["runs"]}
    assert statuses == {bad.name: "failed", good.name: "ok"}


def _rewrite_record(path: Path, edit) -> None:
    record = read_json(path)
    edit(record)
    path.write_text(json.dumps(record))


def test_a_record_of_an_older_default_is_stale_run_again_and_left_out_of_the_report(tmp_path):
    from bench.report import read_results

    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    suite = load_suite(path)
    first, second = suite.runs
    out = tmp_path / "out"
    rc, text = _run(suite, out)
    assert rc == 0, text
    # As if the trainer's default weight decay had been 0.01 when the first run ran.
    files = RunFiles(out / "tiny", first.name)
    _rewrite_record(files.record, lambda r: r["config"]["train"].update(weight_decay=0.01))
    assert files.status(first.point) == "stale"

    _, records, _, pending = read_results(out / "tiny")
    assert set(records) == {second.name}
    assert [e["name"] for e in pending] == [first.name]
    assert pending[0]["stale"] == ["train.weight_decay: 0.01 -> 0.0005"]

    rc, text = _run(suite, out)
    assert rc == 0, text
    assert f"{first.name}: stale record, run again (train.weight_decay: 0.01 -> 0.0005)" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("[")]
    assert lines[1].endswith("skip (record exists)") and not lines[0].endswith("skip (record exists)")
    assert read_json(files.record)["config"]["train"]["weight_decay"] == 0.0005
    assert files.status(first.point) == "ok"


def test_a_default_written_out_in_the_suite_renames_the_records_instead_of_rerunning(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    suite = load_suite(path)
    out = tmp_path / "out"
    rc, text = _run(suite, out)
    assert rc == 0, text
    before = {spec.point["seed"]: read_json(RunFiles(out / "tiny", spec.name).record) for spec in suite.runs}

    # weight_decay = 5e-4 is the default: the same runs under other names. A third
    # point (weight decay 0) is a new run.
    path.write_text(TINY.replace("seed = [0, 1]", "seed = [0, 1]\nweight_decay = [5e-4, 0.0]"))
    rewritten = load_suite(path)
    assert not {s.name for s in rewritten.runs} & {s.name for s in suite.runs}
    rc, text = _run(rewritten, out)
    assert rc == 0, text
    renamed = [ln for ln in text.splitlines() if "renamed" in ln]
    assert len(renamed) == 2
    skipped = [ln for ln in text.splitlines() if ln.endswith("skip (record exists)")]
    assert len(skipped) == 2
    for spec in rewritten.runs:
        files = RunFiles(out / "tiny", spec.name)
        assert files.status(spec.point) == "ok"
        if spec.point["weight_decay"] == 5e-4:
            assert read_json(files.record) == before[spec.point["seed"]]
            assert read_json(files.sidecar)["point"] == spec.point
    for spec in suite.runs:  # nothing of the old names is left
        assert not any(p.exists() for p in RunFiles(out / "tiny", spec.name).paths())


def test_the_source_revision_is_the_commit_of_the_imported_package_and_says_when_it_differs(tmp_path, monkeypatch):
    import importlib.machinery
    import importlib.util
    import subprocess

    repo = tmp_path / "repo"
    (repo / "gnnpipe").mkdir(parents=True)
    init = repo / "gnnpipe" / "__init__.py"
    init.write_text("x = 1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    spec = importlib.machinery.ModuleSpec("gnnpipe", None, origin=str(init))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec if name == "gnnpipe" else None)

    assert source_revision() == {"commit": head, "dirty": False, "path": str(init.parent.resolve())}
    init.write_text("x = 2\n")
    assert source_revision()["dirty"] is True
    # Not a git checkout (an installed wheel): no revision.
    outside = tmp_path / "site" / "gnnpipe"
    outside.mkdir(parents=True)
    spec.origin = str(outside / "__init__.py")
    assert source_revision() is None
