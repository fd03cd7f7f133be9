"""``python -m gnnpipe.plan``: the statistics-only table, JSON, and exit 2 on bad input."""

from __future__ import annotations

import json

import pytest

from gnnpipe.plan.cli import main

STATS = ["--num-nodes", "100000", "--num-edges", "2000000", "--features", "64", "--classes", "10",
         "--edge-cut-fraction", "0.1", "--flops", "1e12", "--link-gbps", "10", "--device-memory-gb", "16",
         "--layers", "8", "--hidden", "32", "--workers", "4"]


def test_statistics_only_table_marks_the_chosen_layout_and_says_prediction(capsys):
    assert main(STATS) == 0
    out = capsys.readouterr().out
    assert "PREDICTIONS" in out and "halos estimated" in out
    assert sum(line.startswith("*") for line in out.splitlines()) == 1
    assert "chosen:" in out


def test_json_output_is_the_plan(capsys):
    assert main([*STATS, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["chosen"]["fits"] is True
    times = [c["predicted_epoch_s"] for c in plan["candidates"]]
    assert times == sorted(times)


@pytest.mark.parametrize("argv", [
    ["--num-nodes", "10"],                                   # statistics incomplete
    [*STATS, "--workers", "0"],
    [*STATS, "--dataset", "cora"],                           # both a dataset and statistics
    [*STATS[:-2], "--workers", "x"],
    ["--num-nodes", "-5", "--num-edges", "1", "--features", "1", "--classes", "2", "--flops", "1e9"],
    [*STATS, "--edge-cut-fraction", "1.5"],
    [*STATS, "--cross-epoch-chunks", "-1"],
    [*STATS[:12], "--profile", "/nonexistent/profile.json"],
    ["--no-such-flag"],
    ["calibrate"],                                           # --out missing
    ["calibrate", "--out", "/tmp/unused-profile.json", "--num-nodes", "0"],
])
def test_bad_input_is_one_line_on_stderr_and_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_cross_epoch_chunks_shorten_the_predicted_pipeline_epoch(capsys):
    epochs = {}
    for k in ("0", "2"):
        assert main([*STATS, "--mode", "pipeline", "--chunks", "8", "--cross-epoch-chunks", k, "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        epochs[k] = {(c["stages"], c["stage_split"] and tuple(c["stage_split"])): c["predicted_epoch_s"]
                     for c in plan["candidates"]}
    assert epochs["0"].keys() == epochs["2"].keys() and any(key[0] > 1 for key in epochs["0"])
    assert all(epochs["2"][key] < epochs["0"][key] for key in epochs["0"] if key[0] > 1)


def test_a_plain_model_is_planned_with_the_projection_and_classifier_when_asked(capsys):
    """As in the trainer, a GCN has neither by default; --input-proj --classifier add
    the encode and the classifier: more memory (their weights and activations), and
    another epoch time (layer 1 then aggregates H-wide rows instead of F-wide ones)."""
    counts = {}
    for flags in ([], ["--input-proj", "--classifier"]):
        assert main([*STATS, "--model", "gcn", "--mode", "single", "--json", *flags]) == 0
        plan = json.loads(capsys.readouterr().out)
        counts[bool(flags)] = plan["chosen"]["predicted_peak_memory_bytes"], plan["chosen"]["predicted_epoch_s"]
    assert counts[True][0] > counts[False][0] and counts[True][1] != counts[False][1]


def test_a_given_link_replaces_the_profiles_measured_exchange(tmp_path):
    """``--link-gbps`` / ``--link-latency-us`` set the link and the exchange alike; without
    them the profile's measured exchange figures stand."""
    from dataclasses import replace

    from gnnpipe.plan.cli import _parser, _profile, profile_from_figures
    from gnnpipe.plan.inputs import write_profile

    measured = replace(profile_from_figures(flops=1e10, link_gbps=10.0, device_memory_gb=16.0),
                       exchange_bytes_per_s=1e8, exchange_latency_s=1e-3)
    path = tmp_path / "profile.json"
    write_profile(measured, path)
    stats = STATS[:12]
    kept = _profile(_parser().parse_args([*stats, "--profile", str(path)]), None)
    assert (kept.exchange_rate(), kept.exchange_latency()) == (1e8, 1e-3)
    given = _profile(_parser().parse_args([*stats, "--profile", str(path), "--link-gbps", "8",
                                           "--link-latency-us", "7"]), None)
    assert given.exchange_rate() == pytest.approx(1e9) and given.exchange_latency() == pytest.approx(7e-6)
