"""bench/mask_check.py sorts runs into the exact reference and the two mask arms and
pairs them by seed."""

from __future__ import annotations

import json

from bench.mask_check import compare, main


def _record(model: str, mode: str, seed: int, acc: float, masks: str | None = None, period: int = 23,
            epoch_s: float = 1.0) -> dict:
    par = {"mode": mode, "snapshot_period": period}
    if masks is not None:
        par["dropout_masks"] = masks
    return {"config": {"data": {"dataset": "ap"}, "model": {"model": model}, "parallel": par,
                       "train": {"seed": seed}},
            "best": {"test_acc": acc}, "summary": {"mean_epoch_time_s": epoch_s}}


def _write(folder, name, record, commit="c"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(record))
    (folder / f"{name}.run.json").write_text(json.dumps({"source": {"commit": commit}}))


def test_arms_are_paired_with_exact_and_each_other_by_seed(tmp_path, capsys):
    paper, new = tmp_path / "paper", tmp_path / "dropout-masks"
    for seed, exact in enumerate([0.50, 0.60, 0.70]):
        _write(paper, f"s{seed}", _record("gcnii", "single", seed, exact))
    _write(paper, "p0", _record("gcnii", "pipeline", 0, 0.40, epoch_s=2.0), "old")  # no field: chunk
    _write(paper, "p1", _record("gcnii", "pipeline", 1, 0.58, epoch_s=2.0), "old")
    _write(new, "r0", _record("gcnii", "pipeline", 0, 0.48, "row", epoch_s=1.5), "new")
    _write(new, "r2", _record("gcnii", "pipeline", 2, 0.69, "row", epoch_s=1.7), "new")
    _write(new, "r9", _record("gcnii", "pipeline", 9, 0.9, "row"))      # no exact run of seed 9: left out
    _write(new, "h1", _record("gcnii", "hybrid", 1, 0.5, "chunk"))      # no row arm: no row of its own

    assert main(["--results", str(tmp_path), "--out", str(tmp_path / "out.json")]) == 0
    (row,) = json.loads((tmp_path / "out.json").read_text())["rows"]
    assert (row["dataset"], row["model"], row["mode"], row["snapshot_period"]) == ("ap", "gcnii", "pipeline", 23)
    assert row["chunk"]["seeds"] == [0, 1] and row["row"]["seeds"] == [0, 2]
    assert abs(row["chunk"]["minus_exact"] - ((40 - 50) + (58 - 60)) / 2) < 1e-9
    assert abs(row["row"]["minus_exact"] - ((48 - 50) + (69 - 70)) / 2) < 1e-9
    assert abs(row["exact_test_acc"]["mean"] - 60.0) < 1e-9  # seeds 0, 1, 2: those of either arm
    assert row["paired_seeds"] == [0] and abs(row["row_minus_chunk"] - 8.0) < 1e-9
    assert row["chunk"]["revisions"] == ["old"] and row["row"]["revisions"] == ["new"]
    assert abs(row["row"]["epoch_s"] - 1.6) < 1e-9 and row["chunk"]["epoch_s"] == 2.0
    assert "| ap | gcnii | pipeline | 23 |" in capsys.readouterr().out


def test_nothing_to_compare_is_exit_2(tmp_path):
    assert compare([]) == []
    assert main(["--results", str(tmp_path), "--out", str(tmp_path / "o.json")]) == 2
    assert not (tmp_path / "o.json").exists()
