"""bench/cross_epoch.py writes no ratios from failed runs and needs K = 0 first."""

from __future__ import annotations

import pytest

from bench.cross_epoch import main, summarize


def test_failed_runs_exit_1_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "x.json"
    rc = main(["--out", str(out), "--cases", "no_such_dataset:gcn", "--data-root", str(tmp_path),
               "--epochs", "1", "--layers", "2", "--hidden", "4", "--repeats", "1"])
    assert rc == 1 and not out.exists()
    assert "no_such_dataset:gcn K=0 failed" in capsys.readouterr().err


def test_the_synchronous_reference_comes_first(tmp_path):
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "x.json"), "--ks", "1", "0"])


def test_ratios_are_to_the_synchronous_runs():
    runs = [{"k": k, "epoch_s": e, "bubble_s": b, "compute_s": e - b, "comm_wait_s": 0.0}
            for k, e, b in ((0, 2.0, 0.4), (1, 1.5, 0.1), (0, 2.2, 0.4), (1, 1.7, 0.1))]
    got = summarize(runs, [0, 1], stages=2, chunks=8)
    assert got["K=1"]["epoch_over_synchronous"] == pytest.approx(1.6 / 2.1)
    assert got["K=0"]["bubble_share"] == pytest.approx(0.4 / 2.1)
    assert got["schedule_bubble_share_synchronous"] == pytest.approx(1 / 9)
