"""bench/compute_split.py writes no ratios from failed runs."""

from __future__ import annotations

from bench.compute_split import main


def test_failed_runs_exit_1_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "split.json"
    rc = main(["--out", str(out), "--cases", "no_such_dataset:gcn", "--data-root", str(tmp_path),
               "--epochs", "1", "--layers", "2", "--hidden", "4"])
    assert rc == 1 and not out.exists()
    err = capsys.readouterr().err
    assert "no_such_dataset:gcn single" in err and "no_such_dataset" in err.split("the first error:")[1]
