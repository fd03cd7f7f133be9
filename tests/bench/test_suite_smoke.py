"""The ``smoke`` suite end to end, as a user runs it: ``python -m bench run smoke``
into a fresh folder, then ``python -m bench report smoke``. Every run must leave a
valid trainer record, the report a row per mode and valid PNGs, the plot against
layers among them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.runner import RunFiles, read_json
from bench.suite import MODES, SUITES_DIR, load_suite

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_smoke_suite_runs_and_reports(tmp_path, bench_env):
    pytest.importorskip("matplotlib")
    suite = load_suite(SUITES_DIR / "smoke.toml")
    out = tmp_path / "results"
    run = subprocess.run([sys.executable, "-m", "bench", "run", "smoke", "--out", str(out)],
                         capture_output=True, text=True, env=bench_env, cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    progress = [ln for ln in run.stdout.splitlines() if ln.startswith("[")]
    assert len(progress) == len(suite.runs) and all(" left ~" in ln for ln in progress)

    folder = out / "smoke"
    for spec in suite.runs:
        record = read_json(RunFiles(folder, spec.name).record)
        assert record is not None, spec.name
        assert record["mode"] == spec.point["mode"]
        assert record["best"]["test_acc"] is not None and 0.0 <= record["best"]["test_acc"] <= 1.0
        assert len(record["epochs"]) == record["summary"]["epochs_run"] == spec.point["epochs"]
        assert record["config"]["train"]["seed"] == spec.point["seed"]
        assert not RunFiles(folder, spec.name).failed.exists()
    manifest = read_json(folder / "manifest.json")
    assert len(manifest["runs"]) == len(suite.runs) and {r["status"] for r in manifest["runs"]} == {"ok"}

    rep = subprocess.run([sys.executable, "-m", "bench", "report", "smoke", "--out", str(out)],
                         capture_output=True, text=True, env=bench_env, cwd=tmp_path, timeout=300)
    assert rep.returncode == 0, rep.stderr
    text = (folder / "report.md").read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")]
    for mode in MODES:
        assert any(f"| gcnii | {mode} |" in ln for ln in rows), mode
    pngs = sorted(folder.glob("*.png"))
    assert folder / "layers_synthetic_gcnii.png" in pngs
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_SIGNATURE and png.stat().st_size > 1000
