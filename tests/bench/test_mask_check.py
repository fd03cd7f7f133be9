"""bench/mask_check.py pairs each new run with its old twin and the exact run of the same seed."""

from __future__ import annotations

import json

from bench.mask_check import compare, main


def _record(dataset: str, model: str, mode: str, seed: int, acc: float, epoch_s: float, period: int = 23) -> dict:
    return {"config": {"data": {"dataset": dataset}, "model": {"model": model},
                       "parallel": {"mode": mode, "snapshot_period": period}, "train": {"seed": seed}},
            "best": {"test_acc": acc}, "summary": {"mean_epoch_time_s": epoch_s}}


def _write(folder, name, record, commit):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(record))
    (folder / f"{name}.run.json").write_text(json.dumps({"source": {"commit": commit}}))


def test_rows_pair_seeds_present_in_both_suites_and_the_exact_run(tmp_path, capsys):
    paper, new = tmp_path / "paper", tmp_path / "dropout-masks"
    for seed, (exact, old) in enumerate([(0.50, 0.40), (0.60, 0.58), (0.70, 0.10)]):
        _write(paper, f"s{seed}", _record("ap", "gcnii", "single", seed, exact, 1.0), "a")
        _write(paper, f"p{seed}", _record("ap", "gcnii", "pipeline", seed, old, 2.0), "a")
    _write(new, "p0", _record("ap", "gcnii", "pipeline", 0, 0.48, 1.5), "b")
    _write(new, "p1", _record("ap", "gcnii", "pipeline", 1, 0.62, 1.7), "b")
    _write(new, "h5", _record("ap", "gcnii", "hybrid", 5, 0.9, 1.0), "b")  # no exact run: left out
    # A setting the paper suite did not run (R=1): against exact only.
    _write(new, "r1", _record("ap", "gcnii", "pipeline", 2, 0.69, 1.2, period=1), "b")

    assert main(["--results", str(tmp_path), "--out", str(tmp_path / "out.json")]) == 0
    rows = json.loads((tmp_path / "out.json").read_text())["rows"]
    assert len(rows) == 2
    r1, row = rows  # sorted by snapshot period
    assert (r1["snapshot_period"], r1["seeds"], r1["per_chunk_seeds"], r1["per_chunk_minus_exact"]) == (1, [2], 0, None)
    assert abs(r1["shared_minus_exact"] - (69 - 70)) < 1e-9
    assert (row["dataset"], row["model"], row["mode"], row["seeds"]) == ("ap", "gcnii", "pipeline", [0, 1])
    assert abs(row["exact_test_acc"]["mean"] - 55.0) < 1e-9
    assert abs(row["per_chunk_minus_exact"] - ((40 - 50) + (58 - 60)) / 2) < 1e-9
    assert abs(row["shared_minus_exact"] - ((48 - 50) + (62 - 60)) / 2) < 1e-9
    assert abs(row["shared_epoch_s"] - 1.6) < 1e-9 and row["per_chunk_epoch_s"] == 2.0
    assert row["per_chunk_revisions"] == ["a"] and row["shared_revisions"] == ["b"]
    assert "| ap | gcnii | pipeline | 23 | 2 |" in capsys.readouterr().out


def test_nothing_to_compare_is_exit_2(tmp_path):
    assert compare({}, {}) == []
    assert main(["--results", str(tmp_path), "--out", str(tmp_path / "o.json")]) == 2
    assert not (tmp_path / "o.json").exists()
