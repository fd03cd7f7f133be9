"""bench/plan_check.py predicts each layout as the trainer runs it: the chunk count it
is given in both the trainer's flags and the planner's restriction, and the model's
default snapshot period (R = 1 for a deep GCN) unless the caller names one."""

from __future__ import annotations

from bench.plan_check import layouts, predicted_layout


def test_the_chunk_count_reaches_the_trainer_flags_and_the_planner_restriction():
    table = layouts(4)
    for mode in ("pipeline", "hybrid"):
        flags, restrict = table[mode]
        assert flags[flags.index("--chunks") + 1] == "4" and restrict["chunks"] == 4
    assert "--chunks" not in table["graph"][0] and "--chunks" not in table["single"][0]


def test_the_prediction_takes_the_models_default_snapshot_period_unless_given():
    import gnnpipe
    from gnnpipe.config import ModelConfig
    from gnnpipe.plan import ModelShape, graph_stats, make_plan
    from gnnpipe.plan.cli import profile_from_figures

    stats = graph_stats(gnnpipe.load_dataset("synthetic", num_nodes=300))
    profile = profile_from_figures(flops=1e10, link_gbps=10.0, device_memory_gb=16.0)
    model = ModelConfig(model="gcn", layers=16, hidden=8)  # stale-sensitive: the trainer's R is 1
    shape = ModelShape.of(model, stats.num_features, stats.num_classes)

    def peak(period: int) -> int:
        plan = make_plan(stats, shape, profile, workers=2, modes=("pipeline",), chunks=4, snapshot_period=period)
        return next(c for c in plan.candidates if c.split == "equal").peak_memory_bytes

    assert peak(1) < peak(23)  # the snapshot is one more full-row copy per buffered layer
    assert predicted_layout(stats, model, profile, 2, modes=("pipeline",), chunks=4).peak_memory_bytes == peak(1)
    given = predicted_layout(stats, model, profile, 2, modes=("pipeline",), chunks=4, snapshot_period=23)
    assert given.peak_memory_bytes == peak(23)


def test_rounds_are_judged_on_the_median_ratio():
    from bench.plan_check import summarize

    rounds = [{"epoch_time_ratio": r, "peak_memory_ratio": 1.0} for r in (0.5, 0.9, 1.2)]
    s = summarize(rounds)
    assert s["median_epoch_time_ratio"] == 0.9 and s["epoch_time_ratio_range"] == [0.5, 1.2]
    assert s["within_25_percent"] is True  # one round at 0.5 does not decide it
    assert summarize(rounds[:1])["within_25_percent"] is False
    assert "within_25_percent" not in summarize([{"measured": {"returncode": 1}}])  # a failed run: no ratio


def test_each_round_calibrates_again_and_resume_runs_only_the_missing_rounds(tmp_path, monkeypatch):
    """Two rounds of two layouts: a calibration per round and graph, a training run per
    round and layout, the record written after each; ``--resume`` with one more round
    keeps the two and adds only the third."""
    import json

    import bench.plan_check as pc
    from gnnpipe.plan.cli import profile_from_figures

    calls = {"calibrate": 0, "measure": 0}

    def calibrate(*_a, **_k):
        calls["calibrate"] += 1
        return profile_from_figures(flops=1e10 * calls["calibrate"], link_gbps=10.0, device_memory_gb=16.0)

    def measure(*_a, **_k):
        calls["measure"] += 1
        return {"returncode": 0, "epoch_s": 0.01 * calls["measure"], "peak_memory_bytes": 2**30}

    monkeypatch.setattr(pc, "calibrate_for", calibrate)
    monkeypatch.setattr(pc, "_measure", measure)
    out = tmp_path / "check.json"
    argv = ["--graphs", "synthetic", "--modes", "single,graph", "--data-option", "num_nodes=300",
            "--out", str(out)]
    assert pc.main([*argv, "--rounds", "2"]) == 0
    rec = json.loads(out.read_text())
    assert calls == {"calibrate": 2, "measure": 4} and len(rec["rounds"]) == 2
    first = [rec["rounds"][r]["results"]["synthetic"]["single"]["epoch_time_ratio"] for r in (0, 1)]
    assert rec["summary"]["synthetic"]["single"]["median_epoch_time_ratio"] == sum(first) / 2
    assert pc.main([*argv, "--rounds", "3", "--resume"]) == 0
    rec = json.loads(out.read_text())
    assert calls == {"calibrate": 3, "measure": 6} and len(rec["rounds"]) == 3
    assert rec["summary"]["synthetic"]["graph"]["rounds"] == 3
