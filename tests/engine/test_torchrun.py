"""The same CLI run under torchrun (``python -m torch.distributed.run``) and under the
built-in launcher trains to the same result: the same loss, accuracies and bytes at
every epoch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.dist

ARGS = ["-m", "gnnpipe.train", "--dataset", "synthetic", "--data-option", "num_nodes=150", "--model", "gcnii",
        "--layers", "3", "--hidden", "8", "--dropout", "0", "--epochs", "3", "--eval-every", "1",
        "--dtype", "float64", "--device", "cpu", "--mode", "graph", "--workers", "2", "--log-level", "WARNING"]


def test_torchrun_launch_trains_like_the_builtin_launcher(tmp_path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GNNPIPE_DIST_TIMEOUT_S": "60"}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    own, tr = tmp_path / "own.json", tmp_path / "torchrun.json"
    p1 = subprocess.run([sys.executable, *ARGS, "--json-out", str(own)], capture_output=True, text=True,
                        timeout=150, env=env)
    assert p1.returncode == 0, p1.stderr[-3000:]
    p2 = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                         *ARGS, "--json-out", str(tr)], capture_output=True, text=True, timeout=150, env=env)
    assert p2.returncode == 0, (p2.stdout + p2.stderr)[-3000:]
    a, b = json.loads(own.read_text()), json.loads(tr.read_text())
    assert a["mode"] == b["mode"] == "graph" and a["world_size"] == b["world_size"] == 2
    assert len(a["epochs"]) == len(b["epochs"]) == 3
    for ea, eb in zip(a["epochs"], b["epochs"]):
        assert eb["loss"] == pytest.approx(ea["loss"], rel=1e-12)
        assert (eb["train_acc"], eb["val_acc"], eb["test_acc"]) == (ea["train_acc"], ea["val_acc"], ea["test_acc"])
        assert eb["bytes"] == ea["bytes"] and eb["bytes"]["halo_rows"] > 0
    # Each run really went its own way: torchrun's processes were the workers.
    assert a["extra"]["launch"] == "local" and b["extra"]["launch"] == "torchrun"
    assert a["partition"] == b["partition"]
    assert len(b["peak_memory_bytes"]) == 2


def _env(tmp_path) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GNNPIPE_DIST_TIMEOUT_S": "60",
           "GNNPIPE_CACHE_DIR": str(tmp_path / "cache")}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PIPE = [a if a != "graph" else "pipeline" for a in ARGS]


def test_two_nodes_with_c10d_rendezvous_train_like_one_node(tmp_path) -> None:
    """Two torchrun agents (``--nnodes 2``, one worker each, a c10d rendezvous on
    localhost: two "nodes" on this machine) train the same run as one agent with two
    workers: the same losses, accuracies and bytes."""
    env = _env(tmp_path)
    one = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          *PIPE, "--json-out", str(tmp_path / "one.json")], capture_output=True, text=True,
                         timeout=200, env=env)
    assert one.returncode == 0, (one.stdout + one.stderr)[-3000:]
    port = _free_port()
    agents = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                                "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                                "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "gnnpipe-test",
                                *PIPE, "--json-out", str(tmp_path / "two.json")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
              for _ in range(2)]
    outs = [a.communicate(timeout=200) for a in agents]
    assert [a.returncode for a in agents] == [0, 0], [o[1][-2000:] for o in outs]
    a, b = json.loads((tmp_path / "one.json").read_text()), json.loads((tmp_path / "two.json").read_text())
    assert a["mode"] == b["mode"] == "pipeline" and a["world_size"] == b["world_size"] == 2
    for ea, eb in zip(a["epochs"], b["epochs"], strict=True):
        assert eb["loss"] == pytest.approx(ea["loss"], rel=1e-12)
        assert (eb["val_acc"], eb["test_acc"]) == (ea["val_acc"], ea["test_acc"])
        assert eb["bytes"] == ea["bytes"] and eb["bytes"]["stage_activations"] > 0


def test_a_torchrun_restart_resumes_from_the_checkpoint_and_ends_as_the_uninterrupted_run(tmp_path) -> None:
    """A worker killed at epoch 3 of 5 under ``torchrun --max-restarts 1``: the agent
    restarts the group, which rendezvouses under its own attempt prefix, resumes from
    the checkpoint of epoch 2 and ends with the same per-epoch losses and accuracies
    as the run nobody killed."""
    env = _env(tmp_path)
    common = [*PIPE[:PIPE.index("--epochs") + 1], "5", *PIPE[PIPE.index("--epochs") + 2:],
              "--checkpoint-every", "1", "--resume"]
    whole = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                            *common, "--checkpoint-dir", str(tmp_path / "ck_whole"),
                            "--json-out", str(tmp_path / "whole.json")],
                           capture_output=True, text=True, timeout=200, env=env)
    assert whole.returncode == 0, (whole.stdout + whole.stderr)[-3000:]
    mark = tmp_path / "killed"
    kill = {"GNNPIPE_TEST_FAIL_RANK": "1", "GNNPIPE_TEST_FAIL_EPOCH": "3", "GNNPIPE_TEST_FAIL_HOW": "kill",
            "GNNPIPE_TEST_FAIL_MARK": str(mark), "GNNPIPE_TEST_FAIL_ONCE": "1"}
    restarted = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                                "2", "--max-restarts", "1", *common, "--checkpoint-dir", str(tmp_path / "ck"),
                                "--json-out", str(tmp_path / "restarted.json"), "--log-level", "INFO"],
                               capture_output=True, text=True, timeout=200, env={**env, **kill})
    text = restarted.stdout + restarted.stderr
    assert restarted.returncode == 0, text[-4000:]
    assert mark.exists() and "kills itself (SIGKILL) at epoch 3" in text
    assert "rendezvous under the prefix attempt_1/" in text and "epoch-000002: 2 epochs done" in text
    a, b = json.loads((tmp_path / "whole.json").read_text()), json.loads((tmp_path / "restarted.json").read_text())
    assert [e["epoch"] for e in b["epochs"]] == [1, 2, 3, 4, 5]
    for ea, eb in zip(a["epochs"], b["epochs"], strict=True):
        assert eb["loss"] == ea["loss"]  # bit for bit: the resumed epochs continue the same run
        assert (eb["val_acc"], eb["test_acc"]) == (ea["val_acc"], ea["test_acc"])
