"""bench/plan_memory.py puts the planner's prediction for a record's own layout beside
the record's measured peak, without training."""

from __future__ import annotations

import json

from bench.plan_memory import main


def test_each_record_gets_its_own_layouts_prediction_and_its_largest_measured_peak(tmp_path):
    import gnnpipe
    from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig, TrainConfig
    from gnnpipe.plan import ModelShape, graph_stats, make_plan
    from gnnpipe.plan.cli import profile_from_figures
    from gnnpipe.plan.inputs import write_profile

    runs = tmp_path / "runs"
    runs.mkdir()
    cfg = RunConfig(model=ModelConfig(model="gcn", layers=4, hidden=8),
                    train=TrainConfig(epochs=1), parallel=ParallelConfig(mode="pipeline", workers=2, chunks=4))
    cfg.data.options.update(num_nodes=300)
    record = {"config": cfg.to_dict(), "peak_memory_bytes": [{"rank": 0, "bytes": 3 << 20}, {"rank": 1, "bytes": 5 << 20}]}
    (runs / "abc.json").write_text(json.dumps(record))
    (runs / "manifest.json").write_text(json.dumps({"runs": []}))  # not a record: skipped
    profile = profile_from_figures(flops=1e10, link_gbps=10.0, device_memory_gb=16.0)
    write_profile(profile, tmp_path / "profile.json")
    out = tmp_path / "memory.json"
    assert main([str(runs), "--profile", str(tmp_path / "profile.json"), "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 1 and rows[0]["measured_peak_bytes"] == 5 << 20
    stats = graph_stats(gnnpipe.load_dataset("synthetic", num_nodes=300))
    plan = make_plan(stats, ModelShape.of(cfg.model, stats.num_features, stats.num_classes), profile, workers=2,
                     modes=("pipeline",), chunks=4, ways=1, snapshot_period=cfg.parallel.snapshot_period)
    want = [c for c in plan.candidates if c.split == "equal"][0]
    assert rows[0]["layout"] == want.label() == "pipeline S=2 C=4 [equal]"
    assert rows[0]["predicted_peak_bytes"] == want.peak_memory_bytes
    assert rows[0]["predicted_over_measured"] == want.peak_memory_bytes / (5 << 20)
