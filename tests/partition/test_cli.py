"""``python -m gnnpipe.partition`` through a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def _run(*args: str, env_extra: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "gnnpipe.partition", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )


def _needs_loader():
    import gnnpipe.data

    if not hasattr(gnnpipe.data, "load_dataset"):
        pytest.skip("gnnpipe.data.load_dataset is not available yet")


@pytest.mark.parametrize(
    "args, needle",
    [(("--dataset", "cora", "--parts", "4", "--method", "spectral"), "--method"),
     (("--dataset", "cora", "--parts", "four"), "--parts"),
     (("--parts", "4"), "--dataset")],
)
def test_usage_errors_exit_2_with_one_line(args, needle):
    r = _run(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]
    assert r.stdout == ""


def test_missing_root_exits_2(tmp_path):
    r = _run("--dataset", "cora", "--parts", "4", drop=("GNNPIPE_DATA_ROOT",))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "GNNPIPE_DATA_ROOT" in lines[0]


def test_cora_table_and_json(datasets_root):
    _needs_loader()
    env = {"GNNPIPE_DATA_ROOT": str(datasets_root)}
    r = _run("--dataset", "cora", "--parts", "4", "--json", env_extra=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["num_parts"] == 4 and sum(d["part_sizes"]) == d["num_nodes"]
    assert d["M"] == d["total_halo"] == sum(d["halo_sizes"])
    r = _run("--dataset", "cora", "--parts", "4", "--method", "random", "--seed", "3",
             "--root", str(datasets_root), drop=("GNNPIPE_DATA_ROOT",))
    assert r.returncode == 0, r.stderr
    assert "random partition (seed 3) into 4 parts" in r.stdout and "edge cut" in r.stdout


def test_impossible_parts_exit_2_naming_both_numbers(datasets_root):
    _needs_loader()
    r = _run("--dataset", "cora", "--parts", "100000", env_extra={"GNNPIPE_DATA_ROOT": str(datasets_root)})
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "num_parts=100000" in lines[0] and "N=" in lines[0]


def test_unknown_dataset_exits_2(datasets_root):
    _needs_loader()
    r = _run("--dataset", "no-such-graph", "--parts", "2", env_extra={"GNNPIPE_DATA_ROOT": str(datasets_root)})
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
