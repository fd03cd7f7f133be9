"""``python -m gnnpipe.partition``: end to end through a subprocess (one success, one
exit-2 case), the other cases in-process through ``main`` (each subprocess pays the
torch import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gnnpipe.partition.__main__ import main


def _run(*args: str, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-m", "gnnpipe.partition", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_subprocess_cora_json(datasets_root):
    r = _run("--dataset", "cora", "--parts", "4", "--json", env_extra={"GNNPIPE_DATA_ROOT": str(datasets_root)})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["graph_name"] == "cora" and d["num_parts"] == 4 and d["method"] == "metis"
    assert sum(d["part_sizes"]) == d["num_nodes"]
    assert d["M"] == d["total_halo"] == sum(d["halo_sizes"])


def test_subprocess_impossible_parts_exit_2_naming_both_numbers(datasets_root):
    r = _run("--dataset", "cora", "--parts", "100000", env_extra={"GNNPIPE_DATA_ROOT": str(datasets_root)})
    assert r.returncode == 2 and r.stdout == ""
    line = _one_line(r.stderr)
    assert "num_parts=100000" in line and "N=" in line


def test_table_output(datasets_root, capsys):
    assert main(["--dataset", "cora", "--parts", "4", "--method", "random", "--seed", "3",
                 "--root", str(datasets_root)]) == 0
    out = capsys.readouterr().out
    assert "random partition (seed 3) into 4 parts" in out and "edge cut" in out


@pytest.mark.parametrize(
    "args, needle",
    [(["--dataset", "cora", "--parts", "4", "--method", "spectral"], "--method"),
     (["--dataset", "cora", "--parts", "four"], "--parts"),
     (["--parts", "4"], "--dataset")],
)
def test_usage_errors_exit_2_with_one_line(args, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    cap = capsys.readouterr()
    assert needle in _one_line(cap.err) and cap.out == ""


def test_missing_root_exits_2(monkeypatch, capsys):
    monkeypatch.delenv("GNNPIPE_DATA_ROOT", raising=False)
    assert main(["--dataset", "cora", "--parts", "4"]) == 2
    assert "GNNPIPE_DATA_ROOT" in _one_line(capsys.readouterr().err)


def test_unknown_dataset_exits_2(datasets_root, capsys):
    assert main(["--dataset", "no-such-graph", "--parts", "2", "--root", str(datasets_root)]) == 2
    assert "no-such-graph" in _one_line(capsys.readouterr().err)
