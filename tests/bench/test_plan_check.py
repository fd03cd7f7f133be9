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
