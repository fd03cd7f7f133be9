"""bench/device_check.py, the prepared accelerator check, as a dry run on the CPU (what
CI can run): every check passes CPU against CPU, a difference fails its check, and a
check that breaks is recorded while the others still run."""

from __future__ import annotations

import json

import bench.device_check as dc


def test_dry_run_on_the_cpu_passes_every_check(tmp_path):
    out = tmp_path / "device_check.json"
    assert dc.main(["--device", "cpu", "--out", str(out), "--bench-nodes", "400", "--bench-epochs", "2"]) == 0
    rec = json.loads(out.read_text())
    r = rec["results"]
    assert rec["failed"] == [] and rec["device_info"]["device"] == "cpu"
    assert r["kernels"]["ok"] and set(r["kernels"]["max_abs_diff"]) == {"sum", "mean", "max", "gcn", "weighted"}
    assert r["single"]["ok"] and set(r["single"]["models"]) == set(dc.MODELS)
    assert r["simulated"]["ok"] and set(r["simulated"]["layouts"]) == set(dc.SIMULATED)
    assert all(len(v["loss_device"]) == 3 for v in r["simulated"]["layouts"].values())
    assert r["distributed"]["ok"] and set(r["distributed"]["layouts"]) == set(dc.DISTRIBUTED)
    for layout in r["distributed"]["layouts"].values():
        assert len(layout["loss_device"]) == 3 and layout["max_rel_loss_diff"] <= 1e-9
    assert r["benchmark"]["cpu"]["epoch_s"] > 0


def test_a_loss_that_differs_fails_the_comparison():
    ref = {"epochs": [{"loss": 1.0, "test_acc": 0.5}, {"loss": 0.9, "test_acc": 0.5}]}
    same = {"epochs": [{"loss": 1.0, "test_acc": 0.5}, {"loss": 0.9, "test_acc": 0.5}]}
    off = {"epochs": [{"loss": 1.0, "test_acc": 0.5}, {"loss": 0.9 * (1 + 1e-6), "test_acc": 0.5}]}
    assert dc._compare(ref, same)["ok"]
    assert not dc._compare(ref, off)["ok"]
    assert not dc._compare(ref, {"epochs": ref["epochs"][:1]})["ok"]


def test_a_broken_check_is_recorded_and_the_others_run(tmp_path, monkeypatch):
    def broken(device):
        raise RuntimeError("no kernel image is available")

    monkeypatch.setattr(dc, "check_single", broken)
    out = tmp_path / "device_check.json"
    assert dc.main(["--device", "cpu", "--out", str(out), "--skip", "distributed", "benchmark"]) == 1
    rec = json.loads(out.read_text())
    assert rec["failed"] == ["single"] and "no kernel image" in rec["results"]["single"]["error"]
    assert rec["results"]["kernels"]["ok"] and rec["results"]["simulated"]["ok"]
    assert "distributed" not in rec["results"]
