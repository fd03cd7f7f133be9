"""bench/compare_pyg.py compares like with like: its torch_geometric twins are the same
models as gnnpipe's, with the same optimizer.

With dropout off, nothing random is left in training, so gnnpipe's model and its PyG
twin, started from the same weights, must follow the same trajectory step for step
(up to float32 round-off). A twin that differs in architecture, initial weights,
parameter groups or weight decay fails here; the accuracy gap the benchmark reports
with dropout on is then the two frameworks' different dropout streams, not a
different model.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("torch_geometric")

import gnnpipe  # noqa: E402

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
compare_pyg = pytest.importorskip("compare_pyg")

STEPS = 6


@pytest.fixture(scope="module")
def graph() -> gnnpipe.Graph:
    return gnnpipe.load_dataset("synthetic", num_nodes=600, num_features=24, num_classes=5, seed=3)


def _spec(case: str, **model_overrides) -> dict:
    spec = dict(compare_pyg.CASES[case])
    spec["model"] = dict(spec["model"], dropout=0.0, **model_overrides)
    return spec


@pytest.mark.parametrize("case,overrides", [
    ("gcn2-cora", {}),
    ("gcn4-syn200k", {"hidden": 32}),
    ("gcnii32-syn200k", {"layers": 8, "hidden": 32}),
], ids=["gcn2", "gcn4", "gcnii8"])
@pytest.mark.parametrize("adjacency", ["csr", "edge_index"])
def test_twin_follows_gnnpipe_step_for_step_without_dropout(graph, case, overrides, adjacency):
    torch.manual_seed(0)
    runners, setup = compare_pyg.build_runners(_spec(case, **overrides), graph, seed=0, adjacency=adjacency)
    ours, twin = runners
    assert setup["initial_max_abs_diff"] < 1e-5
    for _ in range(STEPS):
        for r in runners:
            r.train_epoch()
    # The loss moved (the check is not of two frozen models) ...
    assert ours.losses[-1] < ours.losses[0] - 1e-3
    # ... and both moved the same way, every step.
    torch.testing.assert_close(torch.tensor(twin.losses), torch.tensor(ours.losses), rtol=1e-4, atol=1e-5)
    ours.model.eval(), twin.model.eval()
    with torch.no_grad():
        logits_ours, logits_twin = ours.forward(), twin.forward()
    torch.testing.assert_close(logits_twin, logits_ours, rtol=1e-3, atol=1e-4)


def test_twin_with_a_changed_weight_decay_diverges(graph):
    """The step-for-step check above can fail: give the twin's Adam another layer weight
    decay and the trajectories part."""
    spec = _spec("gcnii32-syn200k", layers=8, hidden=32)
    torch.manual_seed(0)
    runners, _ = compare_pyg.build_runners(spec, graph, seed=0)
    ours, twin = runners
    for group in twin.optimizer.param_groups:
        group["weight_decay"] = group["weight_decay"] * 50 + 0.1
    for _ in range(STEPS):
        for r in runners:
            r.train_epoch()
    ours.model.eval(), twin.model.eval()
    with torch.no_grad():
        gap = float((ours.forward() - twin.forward()).abs().max())
    assert gap > 1e-3


def _fake_run(seed: int, ours: float, theirs: float) -> dict:
    return {"seed": seed,
            "gnnpipe": {"test_acc": ours, "median_epoch_time_s": 1.0},
            "pyg": {"test_acc": theirs, "median_epoch_time_s": 2.0}}


def test_merge_with_no_case_to_run_writes_the_folded_runs(tmp_path: Path) -> None:
    """``--only --merge A B`` trains nothing but must still write A's and B's runs,
    summarised together, into ``--out`` (it once wrote nothing)."""
    settings = {"graph": "g", "row_normalize_features": False, "pyg_adjacency": "csr",
                "model_config": {"model": "gcn"}, "train": {"lr": 0.01}}
    files = []
    for seed, ours, theirs in ((0, 0.80, 0.78), (1, 0.70, 0.74)):
        f = tmp_path / f"seed{seed}.json"
        f.write_text(json.dumps({"command": f"compare_pyg.py --seeds {seed}", "cases": {
            "case": {**settings, "runs": [_fake_run(seed, ours, theirs)]}}}))
        files.append(str(f))
    out = tmp_path / "out.json"
    assert compare_pyg.main(["--threads", "0", "--only", "--merge", *files, "--out", str(out)]) == 0

    record = json.loads(out.read_text())
    assert record["earlier_commands"] == ["compare_pyg.py --seeds 0", "compare_pyg.py --seeds 1"]
    case = record["cases"]["case"]
    assert [r["seed"] for r in case["runs"]] == [0, 1]
    s = case["summary"]
    assert s["seeds"] == [0, 1]
    assert s["gnnpipe_test_acc"] == pytest.approx(0.75)
    assert s["gnnpipe_test_acc_std"] == pytest.approx(statistics.stdev([0.80, 0.70]))
    assert s["pyg_test_acc_range"] == pytest.approx([0.74, 0.78])
    assert s["test_acc_diff_points_per_seed"] == pytest.approx([2.0, -4.0])
    assert s["test_acc_diff_points"] == pytest.approx(-1.0)
    assert s["epoch_time_ratio"] == pytest.approx(0.5)
