"""bench/compute_split.py writes no ratios from failed runs, refuses a checkout it cannot
run, and with rounds takes each ratio within a round and the median over rounds,
resuming with the rounds it has."""

from __future__ import annotations

import json
import re

import pytest

import bench.compute_split as compute_split
from bench.compute_split import main


def test_failed_runs_exit_1_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "split.json"
    rc = main(["--out", str(out), "--cases", "no_such_dataset:gcn", "--data-root", str(tmp_path),
               "--epochs", "1", "--layers", "2", "--hidden", "4"])
    assert rc == 1 and not out.exists()
    err = capsys.readouterr().err
    assert "no_such_dataset:gcn single" in err and "no_such_dataset" in err.split("the first error:")[1]


def test_a_checkout_that_is_not_a_git_checkout_is_refused_before_any_run(tmp_path, capsys):
    out = tmp_path / "split.json"
    rc = main(["--out", str(out), "--checkout", str(tmp_path), "--cases", "cora:gcn"])
    assert rc == 2 and not out.exists()
    assert f"--checkout {tmp_path}: expected a git checkout" in capsys.readouterr().err


def test_skip_epochs_out_of_range_is_refused_before_any_run(tmp_path, capsys):
    out = tmp_path / "split.json"
    rc = main(["--out", str(out), "--cases", "synthetic:gcn", "--epochs", "2", "--skip-epochs", "2"])
    assert rc == 2 and not out.exists()
    assert "--skip-epochs: expected 0 <= N < --epochs (2), found 2" in capsys.readouterr().err


def _fake_runs(monkeypatch, epochs: dict[str, list[float]]):
    """run_once replaced by figures per mode, one per call in turn; returns the calls."""
    calls = []

    def run_once(dataset, model, mode, args, workdir, extra=()):
        calls.append((dataset, mode))
        t = epochs[mode][sum(1 for c in calls if c[1] == mode) - 1]
        busy = 1.0 if mode.startswith("single") else 0.8  # single mode computes its whole epoch
        return {"mode": mode, "epoch_s": t, "compute_s": t * busy, "comm_wait_s": 0.0, "bubble_s": t * (1 - busy),
                "per_rank": [{"epoch_s": t, "compute_s": t * busy, "comm_wait_s": 0.0, "bubble_s": t * (1 - busy)}]}

    monkeypatch.setattr(compute_split, "run_once", run_once)
    return calls


def test_rounds_alternate_the_order_and_give_medians_of_ratios_within_rounds(tmp_path, monkeypatch):
    out = tmp_path / "split.json"
    # The machine twice as slow in round 2: every mode's time doubles, the ratios do not.
    calls = _fake_runs(monkeypatch, {"single": [2.0, 4.0, 2.2], "pipeline": [1.0, 2.0, 1.5],
                                     "graph": [1.0, 2.0, 1.0]})
    assert main(["--out", str(out), "--cases", "a:gcn", "--rounds", "3"]) == 0
    assert [m for _, m in calls] == ["single", "pipeline", "graph", "graph", "pipeline", "single",
                                     "single", "pipeline", "graph"]
    case = json.loads(out.read_text())["cases"][0]
    assert [r["order"][0] for r in case["rounds"]] == ["single", "graph", "single"]
    per_round = [r["computed"]["pipeline_epoch_over_graph_epoch"] for r in case["rounds"]]
    assert per_round == [1.0, 1.0, 1.5]
    assert case["computed"]["pipeline_epoch_over_graph_epoch"] == 1.0
    assert case["computed"]["pipeline_epoch_over_graph_epoch_range"] == [1.0, 1.5]
    # the pipeline's compute 0.8 t over single's / 2: 0.8 / 1, 1.6 / 2, 1.2 / 1.1
    assert case["computed"]["pipeline_compute_over_single_1thread_per_stage"] == pytest.approx(0.8)
    assert case["computed"]["rounds"] == 3 and case["computed"]["schedule_bubble_share"] == 1 / 9


def test_resume_runs_only_the_missing_rounds_and_refuses_other_flags(tmp_path, monkeypatch, capsys):
    out = tmp_path / "split.json"
    calls = _fake_runs(monkeypatch, {m: [1.0] * 4 for m in ("single", "pipeline", "graph")})
    assert main(["--out", str(out), "--cases", "a:gcn", "b:gcn", "--rounds", "1"]) == 0
    assert len(calls) == 6
    assert main(["--out", str(out), "--cases", "a:gcn", "b:gcn", "--rounds", "2", "--resume"]) == 0
    assert len(calls) == 12  # round 2 of both cases only
    cases = json.loads(out.read_text())["cases"]
    assert [[r["round"] for r in c["rounds"]] for c in cases] == [[0, 1], [0, 1]]
    assert main(["--out", str(out), "--cases", "a:gcn", "b:gcn", "--rounds", "2", "--resume", "--chunks", "4"]) == 2
    assert "--resume: expected" in capsys.readouterr().err and len(calls) == 12


def test_rounds_below_one_are_refused_before_any_run(tmp_path, capsys):
    out = tmp_path / "split.json"
    assert main(["--out", str(out), "--cases", "a:gcn", "--rounds", "0"]) == 2
    assert not out.exists() and "--rounds: expected N >= 1, found 0" in capsys.readouterr().err


def test_decompose_runs_the_twin_singles_and_the_one_worker_pipelines_in_every_round(tmp_path, monkeypatch):
    out = tmp_path / "split.json"
    calls = _fake_runs(monkeypatch, {"single": [2.0, 4.0], "pipeline": [1.0, 2.0], "graph": [1.0, 2.0],
                                     "single_pair": [2.6, 5.2], "pipeline_one_worker": [3.0, 6.0],
                                     "pipeline_one_worker_pair": [4.5, 9.0]})
    assert main(["--out", str(out), "--cases", "a:gcn", "--rounds", "2", "--decompose"]) == 0
    assert [m for _, m in calls] == ["single", "pipeline", "graph", "single_pair", "pipeline_one_worker",
                                     "pipeline_one_worker_pair", "pipeline_one_worker_pair", "pipeline_one_worker",
                                     "single_pair", "graph", "pipeline", "single"]
    case = json.loads(out.read_text())["cases"][0]
    for r in case["rounds"]:
        c = r["computed"]
        # one worker's compute 0.8 * 3 over single's 2 (round 2: all doubled)
        assert c["chunking_overhead"] == pytest.approx(1.2)
        assert c["sharing_slowdown"] == pytest.approx(1.3)
        # the pipeline's 0.8 over the twins' 2.6 / 2
        assert c["pipeline_compute_over_single_pair_per_stage"] == pytest.approx(0.8 / 1.3)
        assert c["graph_compute_over_single_1thread_per_worker"] == pytest.approx(0.8)
        # the twin one-worker pipelines' 0.8 * 4.5 over one alone's 0.8 * 3; the pipeline's
        # 0.8 over their 3.6 / 2; the three factors make up the compute ratio 0.8
        assert c["chunked_sharing_slowdown"] == pytest.approx(1.5)
        assert c["pipeline_compute_over_one_worker_pair_per_stage"] == pytest.approx(0.8 / 1.8)
        assert (c["chunking_overhead"] * c["chunked_sharing_slowdown"]
                * c["pipeline_compute_over_one_worker_pair_per_stage"]
                == pytest.approx(c["pipeline_compute_over_single_1thread_per_stage"]))
    assert case["computed"]["chunking_overhead_range"] == [pytest.approx(1.2)] * 2
    assert "chunked_sharing_slowdown_rounds" not in case["computed"]


def test_a_decomposed_record_from_before_the_chunked_pair_resumes_with_it_in_the_new_rounds(tmp_path,
                                                                                            monkeypatch):
    out = tmp_path / "split.json"
    times = {m: [1.0, 1.0] for m in ("single", "pipeline", "graph", "single_pair", "pipeline_one_worker")}
    calls = _fake_runs(monkeypatch, {**times, "pipeline_one_worker_pair": [3.0, 2.0]})
    assert main(["--out", str(out), "--cases", "a:gcn", "--decompose"]) == 0
    record = json.loads(out.read_text())
    r0 = record["cases"][0]["rounds"][0]  # as written when --decompose ran two modes
    del r0["runs"]["pipeline_one_worker_pair"]
    for name in ("chunked_sharing_slowdown", "pipeline_compute_over_one_worker_pair_per_stage"):
        del r0["computed"][name]
    out.write_text(json.dumps(record))
    assert main(["--out", str(out), "--cases", "a:gcn", "--rounds", "2", "--resume", "--decompose"]) == 0
    assert [m for _, m in calls].count("pipeline_one_worker_pair") == 2  # round 1's run, then round 2's
    computed = json.loads(out.read_text())["cases"][0]["computed"]
    assert computed["rounds"] == 2 and computed["chunked_sharing_slowdown_rounds"] == 1
    assert computed["chunked_sharing_slowdown"] == pytest.approx(2.0)  # round 2's alone
    assert "chunking_overhead_rounds" not in computed and computed["chunking_overhead_range"] == [0.8, 0.8]


def test_decompose_starts_two_real_single_runs_together_and_one_worker_pipelines(tmp_path):
    """Real runs (one round, 8 records); the data options and --skip-epochs reach
    every one of them, the pairs' members included."""
    out = tmp_path / "split.json"
    rc = main(["--out", str(out), "--cases", "synthetic:gcn", "--data-option", "num_nodes=240",
               "--data-option", "seed=3", "--epochs", "3", "--skip-epochs", "1", "--layers", "2", "--hidden", "4",
               "--chunks", "2", "--decompose"])
    assert rc == 0
    case = json.loads(out.read_text())["cases"][0]
    assert [r["round"] for r in case["rounds"]] == [0]
    assert case["computed"]["schedule_bubble_share"] == 1 / 3
    runs = case["rounds"][0]["runs"]
    every = [runs[m] for m in ("single", "pipeline", "graph", "pipeline_one_worker")]
    every += [f for m in ("single_pair", "pipeline_one_worker_pair") for f in runs[m]["pair"]]
    assert len(every) == 8
    for run in every:
        assert "--data-option num_nodes=240 --data-option seed=3" in run["command"], run["command"]
        assert run["epochs_timed"] == 2
    pair = runs["single_pair"]
    assert len(pair["pair"]) == 2 and all("--mode single" in f["command"] for f in pair["pair"])
    assert pair["compute_s"] == pytest.approx((pair["pair"][0]["compute_s"] + pair["pair"][1]["compute_s"]) / 2)
    one = runs["pipeline_one_worker"]["command"]
    assert "--mode pipeline" in one and "--workers 1" in one and "--chunks 2" in one
    # Each twin is the one-worker pipeline's command but for its record's path (the
    # flags after --json-out, --workers 1 --chunks 2 among them, compared too).
    twins = runs["pipeline_one_worker_pair"]
    without_out = lambda cmd: re.sub(r"--json-out \S+ ", "", cmd)  # noqa: E731
    assert len(twins["pair"]) == 2 and all(without_out(f["command"]) == without_out(one) for f in twins["pair"])
    assert len({f["command"] for f in twins["pair"]}) == 2  # each writes its own record
    assert twins["compute_s"] == pytest.approx((twins["pair"][0]["compute_s"] + twins["pair"][1]["compute_s"]) / 2)
    assert "--workers 2" in runs["pipeline"]["command"]


def test_resume_takes_a_record_without_a_later_flag_as_run_at_its_default(tmp_path, monkeypatch, capsys):
    out = tmp_path / "split.json"
    calls = _fake_runs(monkeypatch, {m: [1.0] * 4 for m in ("single", "pipeline", "graph")})
    assert main(["--out", str(out), "--cases", "a:gcn"]) == 0
    record = json.loads(out.read_text())
    del record["config"]["decompose"]  # as written before --decompose existed
    out.write_text(json.dumps(record))
    assert main(["--out", str(out), "--cases", "a:gcn", "--rounds", "2", "--resume"]) == 0
    assert len(calls) == 6
    out.write_text(json.dumps(record))
    assert main(["--out", str(out), "--cases", "a:gcn", "--rounds", "2", "--resume", "--decompose"]) == 2
    assert "--resume: expected" in capsys.readouterr().err and len(calls) == 6


def test_a_run_past_the_timeout_is_killed_and_reported_with_its_command(tmp_path, monkeypatch, capsys):
    out = tmp_path / "split.json"
    monkeypatch.setattr(compute_split, "RUN_TIMEOUT_S", 0.5)
    rc = main(["--out", str(out), "--cases", "synthetic:gcn", "--epochs", "1", "--layers", "2", "--hidden", "4"])
    assert rc == 1 and not out.exists()
    err = capsys.readouterr().err
    assert "single: no result within 0.5 s (killed)" in err and "--mode single" in err
