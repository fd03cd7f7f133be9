"""bench/compute_split.py writes no ratios from failed runs and refuses a checkout it cannot run."""

from __future__ import annotations

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
