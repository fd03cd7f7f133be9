"""bench.resolved: which fields of a resolved config decide a run, and what a
stale record's changes say."""

from __future__ import annotations

from bench.resolved import changes, key, resolved_config

POINT = {"dataset": "synthetic", "model": "gcnii", "layers": 4, "mode": "pipeline", "workers": 2}


def test_the_point_resolves_to_the_trainers_defaults():
    cfg = resolved_config(POINT)
    assert cfg["parallel"]["chunks"] == 8  # 4 S, resolved by the config itself
    assert cfg["model"]["layers"] == 4 and cfg["train"]["weight_decay"] == 5e-4


def test_a_changed_technique_is_a_change_in_pipeline_mode_and_not_in_single_mode():
    now = resolved_config(POINT)
    old = resolved_config({**POINT, "snapshot_period": 7})
    assert changes(old, now) == [f"parallel.snapshot_period: 7 -> {now['parallel']['snapshot_period']}"]
    single = {k: v for k, v in POINT.items() if k != "workers"} | {"mode": "single"}
    s_now = resolved_config(single)
    s_old = {**s_now, "parallel": {**s_now["parallel"], "snapshot_period": 7, "shuffle": False}}
    assert changes(s_old, s_now) == [] and key(s_old) == key(s_now)


def test_where_output_goes_is_not_a_change_and_a_field_an_older_record_lacks_has_its_old_value():
    now = resolved_config(POINT)
    old = {**now, "data": {**now["data"], "root": "/elsewhere"},
           "train": {**now["train"], "json_out": "x.json", "log_every": 1}}
    assert changes(old, now) == [] and key(old) == key(now)
    older = {**now, "parallel": {k: v for k, v in now["parallel"].items() if k != "stage_dtype"}}
    assert changes(older, now) == [] and key(older) == key(now)  # before stage_dtype: "same"
    bf16 = resolved_config({**POINT, "stage_dtype": "bfloat16"})
    assert changes(older, bf16) == ["parallel.stage_dtype: 'same' -> 'bfloat16'"]
    unknown = {**now, "train": {k: v for k, v in now["train"].items() if k != "lr"}}
    assert changes(unknown, now) == []  # not known, so not compared
    assert key(old) != key(resolved_config({**POINT, "layers": 6}))
