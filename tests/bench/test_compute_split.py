"""bench/compute_split.py writes no ratios from failed runs and refuses a checkout it cannot run."""

from __future__ import annotations

import json

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


def test_data_options_reach_every_run_and_skip_epochs_sets_the_timed_epochs(tmp_path):
    out = tmp_path / "split.json"
    rc = main(["--out", str(out), "--cases", "synthetic:gcn", "--data-option", "num_nodes=240",
               "--data-option", "seed=3", "--epochs", "3", "--skip-epochs", "1", "--layers", "2",
               "--hidden", "4", "--chunks", "2"])
    assert rc == 0
    case = json.loads(out.read_text())["cases"][0]
    for mode in ("single", "pipeline", "graph"):
        run = case["runs"][mode]
        assert "--data-option num_nodes=240 --data-option seed=3" in run["command"]
        assert run["epochs_timed"] == 2
    assert case["computed"]["schedule_bubble_share"] == 1 / 3
