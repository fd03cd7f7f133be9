"""``python -m gnnpipe.train``: exit 2 with one stderr line for bad input, nothing
written; the generated flags; --config with flag overrides; --json-out record."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gnnpipe.cli import build_parser, main, parse_config
from gnnpipe.config import SECTIONS
from gnnpipe.errors import ConfigError
from gnnpipe.trainer.record import check_record

REPO = Path(__file__).resolve().parents[2]
TINY = ["--mode", "single", "--data-option", "num_nodes=400", "--epochs", "3", "--layers", "2", "--hidden", "8",
        "--eval-every", "1"]


def _run(args, tmp_path, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"  # shared cores: see tests/trainer/conftest.py
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "gnnpipe.train", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


BAD_CLI = [
    (["--model", "gat"], "model.model"),
    (["--layers", "0"], "model.layers"),
    (["--hidden", "0"], "model.hidden"),
    (["--lr", "0"], "train.lr"),
    (["--lr", "-0.01"], "train.lr"),
    (["--dropout", "1"], "model.dropout"),
    (["--dropout", "-0.5"], "model.dropout"),
    (["--dataset", "no-such-dataset"], "no-such-dataset"),
    (["--config", "run.toml"], "unknown key 'layer' in section [model]"),
    (["--layers", "eight"], "--layers"),
    (["--no-such-flag"], "--no-such-flag"),
    (["--config", "latin1.toml"], "expected a UTF-8 TOML file, found a byte that is not UTF-8"),
    (["--seed", "4294967296"], "train.seed: expected an integer in [0, 4294967295], found 4294967296"),
    (["--data-option", "num_nodes=abc"], "synthetic: num_nodes must be an integer >= 2, found 'abc'"),
    (["--data-option", "sparse_threshold=x"], "option sparse_threshold: expected a number in [0, 1], found 'x'"),
    (["--json-out", "/proc/rec.json"], "train.json_out: expected a writable location, found '/proc/rec.json'"),
]


def _bad_input_folder(tmp_path: Path) -> Path:
    (tmp_path / "run.toml").write_text("[model]\nlayer = 3\n")
    (tmp_path / "latin1.toml").write_bytes("[train]\nepochs = 3  # \u00e9t\u00e9\n".encode("latin-1"))
    return tmp_path / "rec.json"


def _assert_one_error_line(stderr: str, needle: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and needle in lines[0]
    assert "Traceback" not in stderr


@pytest.mark.parametrize("args,needle", BAD_CLI, ids=[" ".join(a) for a, _ in BAD_CLI])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys, restore_logging,
                                                             args, needle):
    """main() in this process (what the entry runs before sys.exit): the code, the line, no file."""
    out = _bad_input_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main([*TINY, "--json-out", str(out), *args]) == 2
    _assert_one_error_line(capsys.readouterr().err, needle)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latin1.toml", "run.toml"]


@pytest.mark.parametrize("args,needle", [BAD_CLI[0], BAD_CLI[10]], ids=["model", "flag"])
def test_bad_input_through_the_process_entry_exits_2(tmp_path, args, needle):
    """The same through ``python -m gnnpipe.train``: the process's exit code is main()'s."""
    out = _bad_input_folder(tmp_path)
    proc = _run([*TINY, "--json-out", str(out), *args], tmp_path)
    assert proc.returncode == 2, proc.stderr
    _assert_one_error_line(proc.stderr, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latin1.toml", "run.toml"]


def test_json_out_record_has_the_schema(tmp_path):
    out = tmp_path / "out" / "rec.json"
    proc = _run([*TINY, "--model", "gcn", "--seed", "5", "--json-out", str(out), "--log-level", "WARNING"],
                tmp_path)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    check_record(rec)
    assert rec["config"]["model"] == {**rec["config"]["model"], "model": "gcn", "layers": 2, "hidden": 8}
    assert rec["config"]["train"]["seed"] == 5
    assert rec["config"]["data"]["options"] == {"num_nodes": 400}
    assert rec["dataset"]["num_nodes"] == 400
    assert len(rec["epochs"]) == 3 and all(e["val_acc"] is not None for e in rec["epochs"])
    # the summary line goes to stdout; WARNING hides the INFO log lines
    assert proc.stdout.count("\n") == 1 and "synthetic gcn-2 single" in proc.stdout
    assert proc.stderr == ""
    assert sorted(p.name for p in out.parent.iterdir()) == ["rec.json"]


def test_every_config_field_has_a_flag():
    parser = build_parser()
    dests = {a.dest for a in parser._actions}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            assert f"{section}__{f.name}" in dests, f"{section}.{f.name} has no flag"
    text = parser.format_help()
    for flag in ("--stage-split", "--data-root", "--lambda", "--kernel", "--no-shuffle", "--json-out"):
        assert flag in text


def test_flags_override_the_config_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[model]\nmodel = "sage"\nlayers = 6\n[train]\nepochs = 9\n'
                    '[parallel]\nmode = "pipeline"\nworkers = 2\n')
    cfg, given = parse_config(["--config", str(path), "--layers", "4", "--stage-split", "3,1",
                               "--no-shuffle", "--patience", "none", "--data-option", "num_nodes=77",
                               "--data-option", "homophily=0.5"])
    assert (cfg.model.model, cfg.model.layers, cfg.train.epochs) == ("sage", 4, 9)
    assert cfg.parallel.stage_split == (3, 1) and cfg.parallel.shuffle is False
    assert cfg.train.patience is None
    assert cfg.data.options == {"num_nodes": 77, "homophily": 0.5}
    assert {"model.layers", "model.model"} <= given and "train.seed" not in given


def test_no_arguments_is_the_default_config():
    cfg, given = parse_config([])
    from gnnpipe.config import RunConfig

    assert cfg == RunConfig() and given == set()


@pytest.mark.parametrize("argv,needle", [
    (["--data-option", "num_nodes"], "KEY=VALUE"),
    (["--stage-split", "1,x"], "--stage-split"),
    (["--mode", "pipeline", "--workers", "2", "--layers", "1"], "model.layers"),
])
def test_parse_errors_are_config_errors(argv, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_config(argv)


def test_single_mode_under_torchrun_is_refused(monkeypatch, capsys, restore_logging):
    for k, v in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(k, v)
    assert main(["--mode", "single", "--log-level", "ERROR"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: parallel.mode: expected graph, pipeline or hybrid under torchrun (WORLD_SIZE=2), "
                   "found 'single'"]


def test_json_out_that_cannot_be_written_is_refused_before_training(tmp_path):
    from gnnpipe.api import check_writable

    with pytest.raises(ConfigError, match=r"^train\.json_out: expected a file path"):
        check_writable(str(tmp_path))
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"^train\.json_out: "):
        check_writable(str(tmp_path / "file" / "rec.json"))  # a file where a folder must be
    check_writable(str(tmp_path / "new" / "deeper" / "rec.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing created


@pytest.mark.dist
def test_a_diverged_pipeline_run_exits_3_with_a_line_naming_the_epoch_and_stage(tmp_path):
    """The issue's case: lr 1e6 on GCNII-8 turns the loss NaN; the run stops there."""
    out = tmp_path / "rec.json"
    proc = _run(["--mode", "pipeline", "--workers", "2", "--data-option", "num_nodes=300", "--model", "gcnii",
                 "--layers", "8", "--hidden", "16", "--lr", "1e6", "--epochs", "20", "--json-out", str(out),
                 "--log-level", "ERROR"], tmp_path)
    assert proc.returncode == 3, proc.stderr
    rec = json.loads(out.read_text())
    check_record(rec)
    diverged = rec["summary"]["diverged"]
    assert diverged is not None and diverged["where"].startswith("stage ") and rec["summary"]["final_loss"] is None
    assert diverged["epoch"] == len(rec["epochs"]) < 20  # stopped at the epoch that diverged
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: training diverged at epoch {diverged['epoch']} ({diverged['where']}): {diverged['what']}")


def test_default_layout_runs_distributed_and_one_record_is_written(tmp_path):
    from gnnpipe.config import DEFAULT_LAYOUT

    out = tmp_path / "rec.json"
    proc = _run(["--data-option", "num_nodes=400", "--epochs", "2", "--hidden", "8",
                 "--json-out", str(out), "--log-level", "WARNING"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    check_record(rec)
    assert (rec["mode"], rec["world_size"]) == DEFAULT_LAYOUT
    assert len(rec["peak_memory_bytes"]) == DEFAULT_LAYOUT[1]
    assert proc.stdout.count("\n") == 1  # one summary line, from rank 0 only
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.json"]


def test_under_torchrun_world_size_sets_the_workers_unless_given(tmp_path):
    from gnnpipe.cli import _torchrun_config

    cfg, given = parse_config(["--mode", "pipeline"])
    cfg = _torchrun_config(cfg, given, 4)
    assert (cfg.parallel.workers, cfg.parallel.chunks) == (4, 16)  # chunks re-derived: 4 * S
    cfg, given = parse_config(["--mode", "pipeline", "--workers", "2"])
    assert _torchrun_config(cfg, given, 4).parallel.workers == 2  # given: kept, refused by the layout
    path = tmp_path / "run.toml"
    path.write_text('[parallel]\nmode = "pipeline"\nworkers = 3\n')
    cfg, given = parse_config(["--config", str(path)])
    assert "parallel.workers" in given  # a value from the file counts as given
    assert _torchrun_config(cfg, given, 4).parallel.workers == 3


def test_workers_other_than_world_size_under_torchrun_are_refused(monkeypatch, capsys, restore_logging):
    for k, v in {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(k, v)
    assert main(["--mode", "pipeline", "--workers", "2", "--data-option", "num_nodes=100",
                 "--log-level", "ERROR"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: parallel.workers: expected WORLD_SIZE=4 under torchrun, found 2"]


def test_dropout_masks_is_a_pipelined_setting_with_chunk_the_default():
    from gnnpipe.errors import ConfigError

    assert parse_config([])[0].parallel.dropout_masks == "chunk"
    for mode in ("pipeline", "hybrid"):
        cfg, _ = parse_config(["--mode", mode, "--workers", "2", "--dropout-masks", "row"])
        assert cfg.parallel.dropout_masks == "row"
    for mode, workers in (("graph", "2"), ("single", "1")):
        with pytest.raises(ConfigError, match="parallel.dropout_masks: expected 'chunk' in " + mode):
            parse_config(["--mode", mode, "--workers", workers, "--dropout-masks", "row"])
