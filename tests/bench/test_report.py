"""The report from hand-made records: rows, ratios to the reference mode, the
ablation table, the history-drift table, the PNGs, and the one-line error without
matplotlib."""

from __future__ import annotations

import builtins
import json
import statistics
from pathlib import Path

import pytest

from bench import report as R
from bench import report_common as C
from bench import report_drift as D
from bench.suite import run_name
from gnnpipe.config import ParallelConfig

DEFAULT_R = ParallelConfig().snapshot_period  # the records are of runs at the defaults

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def fake_record(mode: str, seed: int, epoch_s: float, gb: float, test_acc: float, layers: int = 4,
                **parallel) -> dict:
    """A record with the keys the report reads (values chosen by the test)."""
    epochs = [{"epoch": e, "val_acc": 0.1 * e if e % 2 == 0 else None, "epoch_time_s": epoch_s,
               "time": {"compute_s": epoch_s * 0.6, "comm_wait_s": epoch_s * 0.3, "bubble_s": epoch_s * 0.1},
               "bytes": {"halo_rows": gb * 1e9, "evaluation": 123}} for e in range(1, 7)]
    par = {"mode": mode, "workers": 1 if mode == "single" else 2, "ways": 2 if mode == "hybrid" else 1,
           "chunks": {"single": 1, "graph": 2}.get(mode, 8), "shuffle": True, "snapshot_period": DEFAULT_R,
           "unbiased_scale": False, "history_init": "exact", **parallel}
    return {"mode": mode, "epochs": epochs, "dataset": {"name": "synthetic", "num_nodes": 1000},
            "config": {"parallel": par, "data": {"dataset": "synthetic"}, "model": {"model": "gcnii", "layers": layers}},
            "best": {"epoch": 6, "test_acc": test_acc},
            "summary": {"mean_epoch_time_s": epoch_s, "mean_epoch_time_skipped_epochs": 5, "epochs_run": 6},
            "peak_memory_bytes": [{"rank": 0, "bytes": 2**30}], "extra": {}, "wall_time_s": 1.0}


def _entry(mode: str, seed: int, grid: str = "g", **point) -> dict:
    point = {"dataset": "synthetic", "model": "gcnii", "layers": 4, "mode": mode, **point, "seed": seed}
    return {"name": run_name(point), "point": point, "grid": grid, "tags": {}, "label": mode}


def _suite_dir(tmp_path: Path, drift=None) -> Path:
    """Three seeds each of single, graph, pipeline (and a technique variant); with
    ``drift``, each record is first passed to ``drift(record, seed, tech)``."""
    d = tmp_path / "fake"
    d.mkdir()
    runs = []
    specs = [("single", 1.0, 0.0, 0.80, {}), ("graph", 2.0, 4.0, 0.80, {}), ("pipeline", 0.5, 1.0, 0.78, {}),
             ("pipeline", 0.5, 1.0, 0.70, {"history_init": "zeros"})]
    for seed in (0, 1, 2):
        for mode, t, gb, acc, tech in specs:
            entry = _entry(mode, seed, **tech)
            runs.append(entry)
            rec = fake_record(mode, seed, t, gb, acc + 0.01 * seed, **tech)
            if drift is not None:
                drift(rec, seed, tech)
            (d / f"{entry['name']}.json").write_text(json.dumps(rec))
    manifest = {"suite": "fake", "file": "fake.toml", "description": "a fake suite", "notes": "",
                "machine": {"hostname": "h", "cpu_cores": {"usable": 2}, "torch": "t", "gnnpipe": "g",
                            "python": "3"}, "varied": ["mode", "history_init"], "grid_names": [], "runs": runs}
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def test_rows_are_per_setting_with_ratios_to_graph_mode(tmp_path):
    d = _suite_dir(tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    records = {e["name"]: json.loads((d / f"{e['name']}.json").read_text()) for e in manifest["runs"]}
    rows = R.build_rows(manifest["runs"], records)
    assert [r.mode for r in rows] == ["single", "graph", "pipeline", "pipeline"]
    assert all(r.seeds == [0, 1, 2] and r.ref is rows[1] for r in rows)
    mean, std = rows[2].stat("test_acc")
    assert mean == pytest.approx(0.79) and std == pytest.approx(0.01)
    assert R._ratio(rows[2], "epoch_time_s") == "0.25" and R._ratio(rows[2], "gb_per_epoch") == "0.25"
    assert R._ratio(rows[1], "epoch_time_s") == "1.00"
    table = "\n".join(R.results_table(rows, manifest["varied"]))
    assert "time / graph" in table and "| gcnii | pipeline | S=2 C=8 | history_init=zeros | 0,1,2 |" in table


def test_without_graph_the_reference_is_single():
    entries = [_entry("single", 0), _entry("pipeline", 0)]
    records = {entries[0]["name"]: fake_record("single", 0, 1.0, 0.0, 0.8),
               entries[1]["name"]: fake_record("pipeline", 0, 0.5, 1.0, 0.8)}
    rows = R.build_rows(entries, records)
    assert rows[1].ref is rows[0]
    assert "time / single" in "\n".join(R.results_table(rows, []))


def test_mean_and_std_are_shown_with_the_same_decimals():
    assert C._pm(0.0123456, 0.00012) == "0.0123 ± 0.0001"
    assert C._pm(12.3456, None) == "12.3"
    assert C._pm(0.5, 0.0) == "0.500"
    assert C._pm(None, None) == "-"
    assert C._pm(0.8127, 0.0015, scale=100, decimals=2) == "81.27 ± 0.15"


def test_report_writes_markdown_and_valid_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    d = _suite_dir(tmp_path)
    text = R.write_report(d).read_text()
    for mode in ("single", "graph", "pipeline"):
        assert f"| gcnii | {mode} |" in text
    assert "## Technique ablation" in text and "history zeros" in text
    pngs = sorted(d.glob("*.png"))
    assert {p.name.split("_")[0] for p in pngs} >= {"val", "time", "ablation"}
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_SIGNATURE
        assert f"]({png.name})" in text
    assert "History drift" not in text and not list(d.glob("drift*.png"))  # no record has history_drift


def test_report_without_matplotlib_names_the_bench_extra(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(C.MissingMatplotlib, match=r"bench extra"):
        R.write_report(_suite_dir(tmp_path))


# ----------------------------------------------------------- history drift
#: The zeros row's drift is this many times the exact row's.
ZEROS_SCALE = 10.0


def _drift(seed: int, epoch: int, layer: int, scale: float) -> float:
    """The drift a test record holds at a (0-based) layer that has history."""
    return scale * 0.01 * (layer + 1) * epoch * (seed + 1)


def _add_drift(rec: dict, seed: int, tech: dict) -> None:
    """Schema 4 drift on the pipeline records (4 layers; layer 1 null), null in the
    exact modes; of the zeros row, seed 2 is a schema 3 record (no key) and seed 1 has
    only null layers at epoch 6, so that the row's drift epochs are 1 to 5 of seeds 0, 1."""
    zeros = tech.get("history_init") == "zeros"
    for e in rec["epochs"]:
        if rec["mode"] != "pipeline":
            e["history_drift"] = None
        elif not (zeros and seed == 2):
            values = [None] + [_drift(seed, e["epoch"], layer, ZEROS_SCALE if zeros else 1.0) for layer in (1, 2, 3)]
            e["history_drift"] = [None] * 4 if zeros and seed == 1 and e["epoch"] == 6 else values


def _expected(seeds: list[int], epoch: int, scale: float) -> str:
    """The table's cell, computed here: mean over layers 2-4, then mean ± std over seeds."""
    per_seed = [statistics.fmean(_drift(s, epoch, layer, scale) for layer in (1, 2, 3)) for s in seeds]
    return C._pm(statistics.fmean(per_seed), statistics.stdev(per_seed))


def _drift_rows(d: Path) -> list:
    manifest = json.loads((d / "manifest.json").read_text())
    records = {e["name"]: json.loads((d / f"{e['name']}.json").read_text()) for e in manifest["runs"]}
    return R.build_rows(manifest["runs"], records)


def test_drift_table_is_the_mean_over_layers_then_seeds(tmp_path):
    rows = _drift_rows(_suite_dir(tmp_path, drift=_add_drift))
    exact, zeros = rows[2], rows[3]
    assert [r.mode for r in D.drift_rows(rows)] == ["pipeline", "pipeline"]
    assert D.drift_epochs(exact) == [1, 2, 3, 4, 5, 6] and D.marked_epochs(exact) == [1, 3, 6]
    assert D.drift_epochs(zeros) == [1, 2, 3, 4, 5] and D.marked_epochs(zeros) == [1, 3, 5]
    text = "\n".join(D.drift_section(rows, ["mode", "history_init"]))
    cells = " | ".join(_expected([0, 1, 2], e, 1.0) for e in (1, 3, 6))
    assert f"| synthetic | gcnii | pipeline | S=2 C=8 |  | 0,1,2 | 1 / 3 / 6 | {cells} |" in text
    cells = " | ".join(_expected([0, 1], e, ZEROS_SCALE) for e in (1, 3, 5))
    assert f"| synthetic | gcnii | pipeline | S=2 C=8 | history_init=zeros | 0,1 | 1 / 3 / 5 | {cells} |" in text
    assert "| single |" not in text and "| graph |" not in text
    # per layer at the last drift epoch, mean over the seeds
    assert D.layer_means(zeros, 5) == [(layer + 1, pytest.approx(statistics.fmean(
        _drift(s, 5, layer, ZEROS_SCALE) for s in (0, 1)))) for layer in (1, 2, 3)]


def test_report_shows_the_drift_section_and_writes_its_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    d = _suite_dir(tmp_path, drift=_add_drift)
    text = R.write_report(d).read_text()
    assert text.count("## History drift") == 1 and D.EXPLANATION in text
    assert text.index("## Technique ablation") < text.index("## History drift")
    for name in ("drift_synthetic_gcnii.png", "drift_layers_synthetic_gcnii.png"):
        assert (d / name).read_bytes()[:8] == PNG_SIGNATURE and f"]({name})" in text


def test_drift_axis_turns_log_beyond_two_decades():
    pytest.importorskip("matplotlib")
    plt = C._pyplot()
    fig, ax = plt.subplots()
    D._log_if_wide(ax, [0.001, 0.05])
    assert ax.get_yscale() == "linear"
    D._log_if_wide(ax, [0.0, 0.001, 0.2])
    assert ax.get_yscale() == "log"
    plt.close(fig)


def test_records_without_drift_give_no_section():
    entries = [_entry("pipeline", 0), _entry("single", 0)]
    records = {entries[0]["name"]: fake_record("pipeline", 0, 0.5, 1.0, 0.8),
               entries[1]["name"]: fake_record("single", 0, 1.0, 0.0, 0.8)}
    rows = R.build_rows(entries, records)
    assert D.drift_rows(rows) == [] and D.drift_section(rows, []) == []
    assert "History drift" not in R.markdown(
        {"suite": "s", "file": "f", "description": "d", "runs": entries,
         "machine": {"hostname": "h", "cpu_cores": {"usable": 2}, "torch": "t", "gnnpipe": "g", "python": "3"}},
        rows, {}, [], [])


def test_technique_text_names_the_later_settings_off_their_default():
    from bench.report import technique_text

    base = {"shuffle": True, "snapshot_period": 23, "unbiased_scale": False, "history_init": "exact"}
    assert technique_text(base) == "shuffle on, R=23, unbiased off, history exact"
    assert technique_text({**base, "dropout_masks": "chunk", "cross_epoch_chunks": 0}) == technique_text(base)
    assert technique_text({**base, "dropout_masks": "row", "cross_epoch_chunks": 2, "stage_dtype": "bfloat16"}) == (
        "shuffle on, R=23, unbiased off, history exact, stage dtype bfloat16, masks row, cross-epoch K=2")
