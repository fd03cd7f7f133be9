"""Checkpoints and exact resume, through the CLI with real processes: a run killed
(SIGKILL of a worker, after a checkpoint) and resumed ends with the same parameters,
the same per-epoch losses, accuracies and bytes, and the same record (timings aside)
as the uninterrupted run, bit for bit, in every mode; a checkpoint of another run is
refused with exit 2 and one line saying what differs; a torn checkpoint is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.dist

BASE = ["--data-option", "num_nodes=300", "--model", "gcnii", "--layers", "4", "--hidden", "8",
        "--epochs", "6", "--eval-every", "1", "--log-level", "WARNING", "--checkpoint-every", "2"]
MODES = {
    "single": ["--mode", "single"],
    "graph": ["--mode", "graph", "--workers", "2"],
    "pipeline": ["--mode", "pipeline", "--workers", "2", "--snapshot-period", "2"],  # history + snapshots
    "hybrid": ["--mode", "hybrid", "--workers", "2", "--ways", "2"],
}
# Cross-epoch overlap: epochs 1, 3, 5 begin the next one at their turn; the
# checkpoint epochs 2 and 4 do not, so a resume from epoch 4 continues exactly.
OVERLAP = {"pipeline-cross-epoch": MODES["pipeline"] + ["--chunks", "6", "--cross-epoch-chunks", "3"]}
TIMINGS = {"epoch_time_s", "eval_time_s", "time", "time_per_rank"}


def _train(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "OMP_NUM_THREADS": "1", "GNNPIPE_CACHE_DIR": str(cwd / "cache"), **env}
    return subprocess.run([sys.executable, "-m", "gnnpipe.train", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=300)


def _refused_here(args: list[str], cwd: Path, monkeypatch, capsys) -> tuple[int, str]:
    """gnnpipe.cli.main in this process, for a run refused before any worker starts
    (what ``python -m gnnpipe.train`` runs before exiting with its code): (code, stderr)."""
    from gnnpipe.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setenv("GNNPIPE_CACHE_DIR", str(cwd / "cache"))  # _train's cache
    code = main(args)
    return code, capsys.readouterr().err


def _untimed(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k not in ("wall_time_s", "machine", "peak_memory_bytes")}
    out["epochs"] = [{k: v for k, v in e.items() if k not in TIMINGS} for e in record["epochs"]]
    out["summary"] = {k: v for k, v in record["summary"].items() if k != "mean_epoch_time_s"}
    out["config"] = {s: {k: v for k, v in body.items() if not k.startswith(("checkpoint", "resume", "json"))}
                     for s, body in record["config"].items()}
    hs = record["extra"].get("history_start")
    out["extra"] = {**record["extra"], "startup": None,  # start-up timings
                    "history_start": None if hs is None else {**hs, "time_s": None}}
    return out


def _final_state(folder: Path) -> list[dict]:
    return [torch.load(f, weights_only=False)["runner"] for f in sorted((folder / "epoch-000006").glob("rank-*.pt"))]


def _assert_same_tensors(a, b, where="") -> None:
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same_tensors(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same_tensors(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.parametrize("mode", list(MODES) + list(OVERLAP))
def test_killed_and_resumed_run_equals_the_uninterrupted_one(mode: str, tmp_path: Path) -> None:
    args = BASE + {**MODES, **OVERLAP}[mode]
    whole = _train(args + ["--checkpoint-dir", "A", "--json-out", "a.json"], tmp_path)
    assert whole.returncode == 0, whole.stderr
    victim = "1" if mode != "single" else "0"
    killed = _train(args + ["--checkpoint-dir", "B", "--json-out", "b.json"], tmp_path,
                    GNNPIPE_TEST_FAIL_RANK=victim, GNNPIPE_TEST_FAIL_EPOCH="5", GNNPIPE_TEST_FAIL_HOW="kill")
    assert killed.returncode != 0 and not (tmp_path / "b.json").exists()
    assert sorted(p.name for p in (tmp_path / "B").iterdir()) == ["epoch-000002", "epoch-000004"]
    resumed = _train(args + ["--checkpoint-dir", "B", "--json-out", "b.json", "--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert _untimed(a) == _untimed(b)
    assert [e["loss"] for e in a["epochs"]] == [e["loss"] for e in b["epochs"]]  # bit for bit
    # The resumed run's start-up: the checkpoint's load, no history start of its own.
    assert a["extra"]["startup"]["resume_s"] == 0 and b["extra"]["startup"]["resume_s"] > 0
    assert b["extra"]["startup"]["history_start_s"] == 0
    # The history drift (compared above with the rest of the record) is per layer in
    # the modes that read history, none for layer 1, and absent in the exact modes.
    for e in a["epochs"]:
        if mode in ("pipeline", "hybrid", *OVERLAP):
            assert len(e["history_drift"]) == 4 and e["history_drift"][0] is None
            assert all(d is not None and d >= 0 for d in e["history_drift"][1:])
        else:
            assert e["history_drift"] is None
    _assert_same_tensors(_final_state(tmp_path / "A"), _final_state(tmp_path / "B"))


def test_resume_refuses_another_run_and_skips_a_torn_checkpoint(tmp_path: Path) -> None:
    args = BASE + MODES["single"] + ["--checkpoint-dir", "C"]
    assert _train(args, tmp_path).returncode == 0
    other = _train([*args, "--resume", "--layers", "3"], tmp_path)
    assert other.returncode == 2
    assert other.stderr.strip().splitlines() == [
        "error: checkpoint 'C/epoch-000006': expected model.layers=3 (this run), found 4"]
    # A crash while writing epoch 6: its manifest is missing, so epoch 4 is the newest complete one.
    (tmp_path / "C" / "epoch-000006" / "manifest.json").unlink()
    res = _train([*args, "--resume", "--log-level", "INFO", "--json-out", "r.json"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "epoch-000006 is incomplete" in res.stderr and "resumed from" in res.stderr
    assert "epoch-000004: 4 epochs done" in res.stderr
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["epochs_run"] == 6


def test_a_shard_that_does_not_match_its_digest_is_refused(tmp_path: Path) -> None:
    args = BASE + MODES["single"] + ["--checkpoint-dir", "D"]
    assert _train(args, tmp_path).returncode == 0
    shard = tmp_path / "D" / "epoch-000006" / "rank-00000.pt"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    res = _train([*args, "--resume"], tmp_path)
    assert res.returncode == 2
    assert "expected shard rank-00000.pt with sha256" in res.stderr and "Traceback" not in res.stderr


def test_a_torn_checkpoint_is_removed_by_the_next_checkpoint_even_a_later_epoch(tmp_path: Path) -> None:
    """A write killed at epoch 6 leaves a folder without a manifest and a temporary; a
    resumed run that ends at epoch 5 never writes epoch 6 again, and still removes it."""
    args = BASE + MODES["single"] + ["--checkpoint-dir", "E"]
    assert _train(args, tmp_path).returncode == 0
    torn = tmp_path / "E" / "epoch-000006"
    (torn / "manifest.json").unlink()
    (torn / ".rank-00000.pt.host.999999999.abcdef.tmp").write_bytes(b"half a shard")
    res = _train([*args, "--resume", "--epochs", "5"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in (tmp_path / "E").iterdir()) == ["epoch-000004", "epoch-000005"]
    assert not list((tmp_path / "E").rglob("*.tmp"))


def _edit_manifest(folder: Path, **changes) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(changes)
    path.write_text(json.dumps(manifest))


REFUSED = {  # another run than the checkpoint's -> the line that says what differs
    "model": (["--model", "gcn"], "expected model.model='gcn' (this run), found 'gcnii'"),
    "dataset options": (["--data-option", "num_nodes=301"],
                        "expected data.options={'num_nodes': 301} (this run), found {'num_nodes': 300}"),
    "partition method": (["--partition", "random"], "expected parallel.partition='random' (this run), found 'metis'"),
    "world size": (["--workers", "3"], "expected parallel.chunks=12, parallel.workers=3 (this run), "
                                       "found parallel.chunks=8, parallel.workers=2"),
    "layout": (["--stage-split", "1,3"], "expected parallel.stage_split=[1, 3] (this run), found None"),
    "mode": (["--mode", "hybrid", "--ways", "2"], "parallel.mode='hybrid', parallel.ways=2 (this run)"),
}


def test_resume_refuses_a_checkpoint_of_another_model_dataset_partition_layout_or_world_size(
        tmp_path: Path, monkeypatch, capsys, restore_logging) -> None:
    args = BASE[:-2] + MODES["pipeline"] + ["--epochs", "2", "--checkpoint-dir", "P"]
    assert _train(args, tmp_path).returncode == 0
    for what, (extra, needle) in REFUSED.items():
        code, err = _refused_here([*args, "--resume", *extra], tmp_path, monkeypatch, capsys)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, (what, err)
        assert lines[0].startswith("error: checkpoint 'P/epoch-000002': ") and needle in lines[0], (what, lines)
    # The same flags, but the checkpoint was written over another partition or dataset content.
    folder = tmp_path / "P" / "epoch-000002"
    saved = json.loads((folder / "manifest.json").read_text())
    _edit_manifest(folder, partition_digest="0" * 64)
    code, err = _refused_here([*args, "--resume"], tmp_path, monkeypatch, capsys)
    assert code == 2 and err.strip().splitlines()[-1].endswith("(this run), found 000000000000")
    assert "expected partition " in err
    _edit_manifest(folder, partition_digest=saved["partition_digest"],
                   dataset={**saved["dataset"], "content_sha256": "0" * 16})
    code, err = _refused_here([*args, "--resume"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        f"error: checkpoint 'P/epoch-000002': expected dataset content_sha256="
        f"{saved['dataset']['content_sha256']!r} (this run), found '{'0' * 16}'"]
    # A setting that does not change what the state means may differ: the host heap's.
    _edit_manifest(folder, dataset=saved["dataset"])
    res = _train([*args, "--resume", "--epochs", "3", "--host-heap-mib", "64"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "P" / "epoch-000003" / "manifest.json").exists()


def test_a_dataset_file_changed_under_the_same_name_and_sizes_is_another_dataset(tmp_path: Path) -> None:
    """Same vertex, edge, class and split counts, other labels: refused by the content digest."""
    import numpy as np

    from tests.data.writers import split_masks, write_hetero

    n = 40
    edges = np.array([[i, (i + 1) % n] for i in range(n)])
    masks = {"train": split_masks(n, list(range(10))), "val": split_masks(n, list(range(10, 20))),
             "test": split_masks(n, list(range(20, 40)))}
    labels = np.arange(n) % 2
    write_hetero(tmp_path / "g.npz", n=n, edges=edges, labels=labels, **masks)
    args = ["--dataset", "heterophilous", "--data-root", str(tmp_path / "g.npz"), "--model", "gcn", "--layers", "2",
            "--hidden", "4", "--epochs", "2", "--mode", "single", "--log-level", "WARNING", "--checkpoint-dir", "G"]
    assert _train(args, tmp_path).returncode == 0
    write_hetero(tmp_path / "g.npz", n=n, edges=edges, labels=1 - labels, **masks)
    res = _train([*args, "--resume"], tmp_path)
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: checkpoint 'G/epoch-000002': expected dataset content_sha256=")


@pytest.mark.parametrize("mode", ["single", "pipeline"])
def test_a_run_interrupted_by_ctrl_c_and_resumed_equals_the_uninterrupted_one(mode: str, tmp_path: Path) -> None:
    """SIGINT to the run's process group (Ctrl-C) while one rank is in epoch 5, after
    the epoch-4 checkpoint: exit 130 with one line, and the resume ends as the whole run."""
    import signal
    import time

    args = BASE + MODES[mode]
    whole = _train(args + ["--checkpoint-dir", "A", "--json-out", "a.json"], tmp_path)
    assert whole.returncode == 0, whole.stderr
    mark = tmp_path / "mark"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GNNPIPE_CACHE_DIR": str(tmp_path / "cache"),
           "GNNPIPE_TEST_FAIL_RANK": "0", "GNNPIPE_TEST_FAIL_EPOCH": "5", "GNNPIPE_TEST_FAIL_HOW": "compute",
           "GNNPIPE_TEST_FAIL_SECONDS": "30", "GNNPIPE_TEST_FAIL_MARK": str(mark)}
    # SIGINT at its default in the child whatever this process inherited: a shell starts
    # background jobs with SIGINT ignored, and Python then keeps it ignored.
    proc = subprocess.Popen([sys.executable, "-m", "gnnpipe.train", *args, "--checkpoint-dir", "B", "--json-out",
                             "b.json"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mark.exists(), "the run never reached epoch 5"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert [ln for ln in err.splitlines() if "test hook" not in ln] == ["error: interrupted"]
    assert sorted(p.name for p in (tmp_path / "B").iterdir()) == ["epoch-000002", "epoch-000004"]
    resumed = _train(args + ["--checkpoint-dir", "B", "--json-out", "b.json", "--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert _untimed(a) == _untimed(b)
    _assert_same_tensors(_final_state(tmp_path / "A"), _final_state(tmp_path / "B"))
