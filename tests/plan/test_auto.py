"""``--chunks auto`` / ``--mode auto``: validated once in the config, resolved at the
entry after the graph is loaded, and the record's ``plan`` entry says what was chosen."""

from __future__ import annotations

import pytest

import gnnpipe
from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig, TrainConfig
from gnnpipe.errors import ConfigError
from gnnpipe.plan.auto import PROFILE_ENV, resolve_auto
from gnnpipe.plan.cli import profile_from_figures
from gnnpipe.plan.inputs import write_profile
from gnnpipe.trainer.record import check_record


@pytest.fixture()
def profile_env(tmp_path, monkeypatch):
    path = tmp_path / "profile.json"
    write_profile(profile_from_figures(flops=1e10, link_gbps=10.0, device_memory_gb=16.0), path)
    monkeypatch.setenv(PROFILE_ENV, str(path))
    return path


@pytest.fixture(scope="module")
def graph():
    return gnnpipe.load_dataset("synthetic", num_nodes=500)


MODEL = ModelConfig(model="gcn", layers=4, hidden=16)
TRAIN = TrainConfig(epochs=2, eval_every=2, log_level="WARNING")


def test_the_config_takes_auto_and_refuses_what_cannot_be_planned():
    assert ParallelConfig(mode="auto").chunks == "auto"
    assert ParallelConfig(mode="pipeline", chunks="auto").chunks == "auto"
    assert ParallelConfig(mode="graph", workers=3, chunks="auto").chunks == 3
    assert ParallelConfig(mode="pipeline", chunks="6").chunks == 6  # the command line's text
    for bad in (dict(mode="pipeline", chunks="many"), dict(mode="auto", stage_split=(2, 2)),
                dict(mode="auto", workers=0)):
        with pytest.raises(ConfigError):
            ParallelConfig(**bad)


def test_auto_is_refused_under_torchrun(graph, profile_env):
    cfg = RunConfig(model=MODEL, train=TRAIN, parallel=ParallelConfig(mode="auto"))
    with pytest.raises(ConfigError, match="torchrun"):
        resolve_auto(cfg, graph, torchrun=True)


def test_mode_auto_with_one_worker_trains_single_and_the_record_says_so(graph, profile_env):
    rec = gnnpipe.train(graph, MODEL, TRAIN, ParallelConfig(mode="auto", workers=1))
    check_record(rec)
    assert rec["mode"] == "single" and rec["plan"]["chosen"]["mode"] == "single"
    assert rec["plan"]["requested"]["mode"] == "auto" and rec["plan"]["reason"]
    assert rec["config"]["parallel"]["mode"] == "single"
    # The planner's time is part of the start-up the record accounts for.
    startup = rec["extra"]["startup"]
    assert 0 < startup["plan_s"] <= startup["to_first_epoch_s"]
    plain = gnnpipe.train(graph, MODEL, TRAIN, ParallelConfig(mode="single", workers=1))
    assert plain["extra"]["startup"]["plan_s"] == 0.0


def test_chunks_auto_resolves_to_a_valid_c_and_the_record_says_so(graph, profile_env):
    rec = gnnpipe.train(graph, MODEL, TRAIN, ParallelConfig(mode="pipeline", workers=2, chunks="auto"))
    check_record(rec)
    chosen = rec["plan"]["chosen"]
    assert rec["mode"] == "pipeline" and chosen["mode"] == "pipeline"
    c = rec["config"]["parallel"]["chunks"]
    assert isinstance(c, int) and 2 <= c <= graph.num_nodes and c == chosen["chunks"]
    assert rec["plan"]["requested"]["chunks"] == "auto"
    # The predicted bytes are the engine's, as the run itself reports them.
    assert rec["epochs"][-1]["bytes_predicted"] == chosen["predicted_bytes_per_epoch"]
    assert all(cand["fits"] for cand in rec["plan"]["candidates"] if cand is chosen)
