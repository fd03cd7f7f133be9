"""The README headline: README.md's block is the generator's output from the committed
``paper`` records (so it cannot drift), and the generator's figures on hand-made records
are the means, standard deviations, gaps and ratios of the values the test wrote."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from bench import headline as H
from bench.runner import write_json
from bench.suite import run_name
from gnnpipe.config import ParallelConfig

DEFAULT_R = ParallelConfig().snapshot_period  # the records are of runs at the defaults

MODES = ("single", "pipeline", "hybrid")
SEEDS = (0, 1, 2)
EPOCHS = 6
MACHINE = {"hostname": "box", "platform": "Linux-x86_64", "cpu_cores": {"logical": 8, "usable": 4},
           "python": "3.11.7", "torch": "9.9.9+cpu", "gnnpipe": "0.1.0", "device": "cpu"}
TRAIN = {"epochs": EPOCHS, "lr": 0.004, "eval_every": 2, "patience": 7, "monitor": "val_loss"}


def test_readme_block_is_the_generated_one():
    """Regenerate with `python -m bench.headline --write-readme` when the paper run changes."""
    block = H.readme_block(H.README.read_text(encoding="utf-8"))
    assert block is not None, f"README.md lacks the {H.BEGIN} ... {H.END} markers"
    assert block == H.headline()


# ------------------------------------------------------------ hand-made records
def _values(mode: str, model: str, seed: int) -> dict[str, float]:
    """What one run measured: different per mode, model and seed, so that means,
    standard deviations and gaps are all non-trivial."""
    m, k = MODES.index(mode), ("gcn", "gcnii").index(model)
    return {"test_acc": 0.50 + 0.05 * m + 0.10 * k + 0.013 * seed * (m + 1),
            "epoch_s": 1.0 + 0.5 * m + 0.1 * seed,
            "bytes": 0 if mode == "single" else (2_000_000 if mode == "pipeline" else 30_000_000 + 1_000_000 * seed)}


def _record(mode: str, model: str, seed: int, parallel: dict | None = None) -> dict:
    """A record with the keys the trainer writes and the report reads (``parallel``
    overrides its parallel settings)."""
    v = _values(mode, model, seed)
    kinds = {"pipeline": "stage_activations", "hybrid": "halo_rows"}
    sent = {"stage_activations": 0, "stage_gradients": 0, "halo_rows": 0, "halo_gradients": 0,
            "weight_allreduce": 0, "evaluation": 999}
    if mode in kinds:
        sent[kinds[mode]] = v["bytes"]
    epochs = [{"epoch": e, "loss": 1.0 / e, "val_acc": 0.1 * e if e % 2 == 0 else None,
               "epoch_time_s": v["epoch_s"], "time": {"compute_s": v["epoch_s"], "comm_wait_s": 0.0, "bubble_s": 0.0},
               "bytes": dict(sent), "bytes_predicted": None if mode == "single" else {**sent, "evaluation": 0}}
              for e in range(1, EPOCHS + 1)]
    workers, ways = {"single": (1, 1), "pipeline": (2, 1), "hybrid": (2, 2)}[mode]
    return {"schema_version": 3, "mode": mode, "world_size": workers, "epochs": epochs,
            "dataset": {"name": "toy", "num_nodes": 100, "num_edges": 400, "num_features": 5, "num_classes": 3},
            "config": {"data": {"dataset": "toy"}, "model": {"model": model, "layers": 8, "hidden": 16, "dropout": 0.5},
                       "train": {**TRAIN, "seed": seed},
                       "parallel": {"mode": mode, "workers": workers, "ways": ways, "chunks": 4, "shuffle": True,
                                    "snapshot_period": DEFAULT_R, "unbiased_scale": False, "history_init": "exact",
                                    **(parallel or {})}},
            "best": {"epoch": EPOCHS if seed else 4, "test_acc": v["test_acc"]},
            "summary": {"epochs_run": EPOCHS, "stopped_early": False, "mean_epoch_time_s": v["epoch_s"],
                        "mean_epoch_time_skipped_epochs": 2},
            "peak_memory_bytes": [{"rank": 0, "bytes": 2**20}],
            "machine": {**MACHINE, "dist_backend": None if mode == "single" else "gloo"},
            "extra": {"stages": 1 if mode != "pipeline" else 2}, "wall_time_s": 1.0}


def _suite_dir(tmp_path: Path, gcn_parallel: dict | None = None) -> Path:
    """A suite folder as ``python -m bench run`` leaves it: a manifest and one record
    per run, named by the hash of its point. GCN comes first in the suite; the headline
    must still put GCNII first. ``gcn_parallel`` gives GCN's pipelined runs other
    parallel settings (in their points and records alike)."""
    d = tmp_path / "results" / "toy"
    d.mkdir(parents=True)
    runs = []
    for model in ("gcn", "gcnii"):
        for mode in MODES:
            for seed in SEEDS:
                point = {"dataset": "toy", "model": model, "layers": 8, "hidden": 16, **TRAIN, "mode": mode, "seed": seed}
                if mode != "single":
                    point |= {"workers": 2, "chunks": 4, **({"ways": 2} if mode == "hybrid" else {})}
                own = gcn_parallel if model == "gcn" and mode != "single" else None
                point |= own or {}
                name = run_name(point)
                runs.append({"name": name, "label": f"{model} {mode} seed={seed}", "grid": mode, "tags": {},
                             "status": "ok", "point": point, "wall_s": 1.0,
                             "load_average_before": [0.5 + seed, 0, 0], "load_average_after": [1.25 + seed, 0, 0]})
                write_json(d / f"{name}.json", _record(mode, model, seed, own))
    write_json(d / "manifest.json", {"suite": "toy", "file": "toy.toml", "description": "a toy suite", "notes": "",
                                     "machine": MACHINE, "varied": ["model"], "grid_names": [], "runs": runs})
    (d / "val_toy_gcnii.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return d


def _number(cell: str) -> tuple[float, float | None]:
    """``"61.91 ± 3.29"`` -> (61.91, 3.29); ``"78.16"`` -> (78.16, None)."""
    mean, _, std = cell.partition(" ± ")
    return float(mean), (float(std) if std else None)


def _table_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in text.splitlines()
            if ln.startswith("| ") and not ln.startswith("| dataset") and not ln.startswith("| ---")]


def test_figures_are_the_statistics_of_the_records(tmp_path):
    d = _suite_dir(tmp_path)
    text = H.headline(d, plot=("toy", "gcnii"), root=tmp_path)
    rows = _table_rows(text)
    assert [r[:2] for r in rows] == [["toy", "GCNII-8"], ["toy", "GCN-8"]]
    for model, row in zip(("gcnii", "gcn"), rows):
        acc = {m: [100 * _values(m, model, s)["test_acc"] for s in SEEDS] for m in MODES}
        for cell, mode in zip(row[2:5], MODES):
            mean, std = _number(cell)
            assert mean == pytest.approx(statistics.fmean(acc[mode]), abs=0.005)
            assert std == pytest.approx(statistics.stdev(acc[mode]), abs=0.005)
        gap = statistics.fmean(acc["pipeline"]) - statistics.fmean(acc["single"])
        assert row[5].startswith("+") and float(row[5]) == pytest.approx(gap, abs=0.005)
        times = {m: statistics.fmean(_values(m, model, s)["epoch_s"] for s in SEEDS) for m in MODES}
        assert float(row[6]) == pytest.approx(times["pipeline"] / times["single"], abs=0.005)
        for cell, mode in zip(row[7:9], ("pipeline", "hybrid")):
            mb = [_values(mode, model, s)["bytes"] / 1e6 for s in SEEDS]
            mean, std = _number(cell)
            assert mean == pytest.approx(statistics.fmean(mb), rel=0.005)
            assert std == (pytest.approx(statistics.stdev(mb), rel=0.05) if mode == "hybrid" else None)


def test_text_names_the_machine_load_budget_and_figure(tmp_path):
    d = _suite_dir(tmp_path)
    text = " ".join(H.headline(d, plot=("toy", "gcnii"), root=tmp_path).split())  # unwrapped
    assert "`box` (Linux-x86_64; 4 usable of 8 logical CPU cores, device cpu;" in text
    assert "torch 9.9.9+cpu" in text and text.count("`box`") == 1  # one machine, whatever the backend
    assert "load average before/after the runs: 0.50 to 3.25" in text
    assert (f"{EPOCHS} epochs, lr {TRAIN['lr']}, evaluation every {TRAIN['eval_every']} epochs, patience "
            f"{TRAIN['patience']} evaluations on {TRAIN['monitor']}") in text
    assert f"fixed short budget of {EPOCHS} epochs, not training to convergence" in text
    n_runs = 2 * len(MODES) * len(SEEDS)
    assert f"last epoch run in {n_runs - 2 * len(MODES)} of the {n_runs} runs" in text  # seed 0's best is epoch 4
    assert f"at every epoch in {n_runs - 2 * len(SEEDS)} of the {n_runs - 2 * len(SEEDS)} runs" in text
    # The toy hybrid is W=2 ways of one stage with C=4 chunks: graph parallelism's cut, not its layout.
    assert "one stage per way" in text and "read from history" in text and "graph parallelism's layout" not in text
    assert "[full report](results/toy/report.md)" in text
    assert re.search(r"!\[toy, GCNII: [^]]*\]\(results/toy/val_toy_gcnii\.png\)", text)


def test_runs_that_stopped_improving_are_not_called_a_short_budget(tmp_path):
    d = _suite_dir(tmp_path)
    for path in d.glob("*.json"):
        record = json.loads(path.read_text())
        if "summary" in record:  # every run stops on patience at epoch 5 with its best at epoch 2
            record["summary"] |= {"epochs_run": 5, "stopped_early": True}
            record["best"]["epoch"] = 2
            path.write_text(json.dumps(record))
    text = " ".join(H.headline(d, plot=("toy", "gcnii"), root=tmp_path).split())
    n_runs = 2 * len(MODES) * len(SEEDS)
    assert "not training to convergence" not in text
    assert f"last epoch run in only 0 of the {n_runs} runs" in text and f"{n_runs} stopped early on patience" in text


def test_a_missing_figure_is_refused(tmp_path):
    d = _suite_dir(tmp_path)
    with pytest.raises(FileNotFoundError, match="python -m bench report toy"):
        H.headline(d, plot=("toy", "gcn"), root=tmp_path)


def test_write_readme_replaces_only_the_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nintro\n\n{H.BEGIN}\nold\n{H.END}\n\nrest\n", encoding="utf-8")
    H.write_readme("new\nblock", readme)
    assert readme.read_text(encoding="utf-8") == f"# x\n\nintro\n\n{H.BEGIN}\nnew\nblock\n{H.END}\n\nrest\n"
    readme.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(ValueError, match="markers"):
        H.write_readme("new", readme)


def test_layouts_and_techniques_are_named_per_model_where_they_differ(tmp_path):
    """A stale-sensitive GCN runs pipelined at C = S and R = 1 and its hybrid at C = W
    (graph parallelism's layout) while GCNII keeps C = 4: the text gives each model its
    own layout and techniques instead of one merged string."""
    d = _suite_dir(tmp_path, gcn_parallel={"chunks": 2, "snapshot_period": 1})
    text = " ".join(H.headline(d, plot=("toy", "gcnii"), root=tmp_path).split())
    assert "Pipeline layout: GCNII-8: S=2 C=4; GCN-8: S=2 C=2." in text
    assert "Hybrid layout: GCNII-8: W=2 S=1 C=4, one stage per way" in text
    assert "read from history; GCN-8: W=2 S=1 C=2, graph parallelism's layout (every halo read fresh" in text
    assert f"GCNII-8: shuffle on, R={DEFAULT_R}, unbiased off, history exact; " in text
    assert "GCN-8: shuffle on, R=1, unbiased off, history exact." in text
