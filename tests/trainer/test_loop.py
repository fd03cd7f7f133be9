"""The epoch loop, driven through the entry in single mode: it learns, is
deterministic, leaves the caller's random state alone, evaluates on schedule, picks
the best epoch, stops early, and the entry removes self-loops."""

from __future__ import annotations

import pytest
import torch

from gnnpipe import api
from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig, TrainConfig
from gnnpipe.trainer.record import check_record
from tests.trainer.helpers import easy_graph


@pytest.fixture(scope="module")
def graph():
    return easy_graph(num_nodes=300, noise=2.0)


def _cfg(model="gcn", layers=2, **train):
    train.setdefault("epochs", 30)
    train.setdefault("eval_every", 5)
    return RunConfig(model=ModelConfig(model=model, layers=layers, hidden=16, dropout=0.2),
                     train=TrainConfig(**train), parallel=ParallelConfig(mode="single"))


def _losses(rec):
    return [e["loss"] for e in rec["epochs"]]


def test_learns_an_easy_graph(graph):
    rec = api.run(_cfg(epochs=40, lr=0.02), graph)
    check_record(rec)
    losses = _losses(rec)
    assert losses[-1] < 0.5 * losses[0]
    # chance is 1/3 with three balanced classes
    assert rec["best"]["test_acc"] >= 0.85
    assert rec["best"]["val_acc"] >= 0.85


def test_same_seed_same_losses_other_seed_other_losses(graph):
    a = _losses(api.run(_cfg(model="gcnii", layers=4, epochs=8, seed=3), graph))
    b = _losses(api.run(_cfg(model="gcnii", layers=4, epochs=8, seed=3), graph))
    c = _losses(api.run(_cfg(model="gcnii", layers=4, epochs=8, seed=4), graph))
    assert a == b
    assert a != c


def test_the_callers_random_state_is_left_alone(graph):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    api.run(_cfg(epochs=2), graph)
    assert torch.equal(torch.rand(3), expected)


def test_evaluation_schedule_and_record(graph):
    rec = api.run(_cfg(epochs=12, eval_every=5), graph)
    evaluated = [e["epoch"] for e in rec["epochs"] if e["val_acc"] is not None]
    assert evaluated == [5, 10, 12]  # every k epochs and the last one
    assert rec["mode"] == "single" and rec["world_size"] == 1
    assert rec["dataset"]["num_nodes"] == graph.num_nodes
    assert all(v == 0 for e in rec["epochs"] for v in e["bytes"].values())
    assert rec["peak_memory_bytes"][0]["source"] in ("VmHWM", "ru_maxrss")
    best = max((e for e in rec["epochs"] if e["val_acc"] is not None), key=lambda e: e["val_acc"])
    assert rec["best"]["val_acc"] == best["val_acc"]


def test_early_stopping_stops_after_patience_evaluations(graph):
    patience, k = 2, 2
    rec = api.run(_cfg(epochs=300, eval_every=k, patience=patience, lr=0.05), graph)
    run = rec["summary"]["epochs_run"]
    assert rec["summary"]["stopped_early"] and run < 300
    # stopped exactly `patience` evaluations after the best one
    assert run == rec["best"]["epoch"] + patience * k
    evals = [e for e in rec["epochs"] if e["val_acc"] is not None]
    assert all(e["val_acc"] <= rec["best"]["val_acc"] for e in evals[-patience:])


def test_early_stopping_on_val_loss_stops_after_the_lowest_loss(graph):
    patience, k = 3, 2
    rec = api.run(_cfg(epochs=400, eval_every=k, patience=patience, lr=0.05, monitor="val_loss"), graph)
    evals = [e for e in rec["epochs"] if e["val_acc"] is not None]
    losses = [e["val_loss"] for e in evals]
    assert all(x is not None and x > 0 for x in losses)
    assert rec["best"]["monitor"] == "val_loss"
    assert rec["best"]["val_loss"] == min(losses)
    assert rec["best"]["epoch"] == evals[losses.index(min(losses))]["epoch"]
    assert rec["summary"]["stopped_early"]
    assert rec["summary"]["epochs_run"] == rec["best"]["epoch"] + patience * k


def test_self_loops_are_removed_before_training(graph):
    looped = graph.add_self_loops()
    assert looped.num_edges == graph.num_edges + graph.num_nodes
    a = api.run(_cfg(epochs=4), graph)
    b = api.run(_cfg(epochs=4), looped)
    assert _losses(a) == pytest.approx(_losses(b), rel=1e-6, abs=1e-7)
    assert b["extra"]["self_loops_removed"] == graph.num_nodes


def test_float64_run(graph):
    rec = api.run(_cfg(epochs=3, dtype="float64"), graph)
    assert rec["config"]["train"]["dtype"] == "float64"
    assert all(e["loss"] is not None for e in rec["epochs"])




def test_a_gradient_that_turns_infinite_ends_the_run_as_diverged(graph, monkeypatch):
    """The loss stays finite; one parameter's gradient is made infinite at epoch 3."""
    from gnnpipe.engine.single_mode import SingleRunner

    real = SingleRunner.train_epoch

    def train_epoch(self, e, continues=False):
        stats = real(self, e, continues)
        if e + 1 == 3:
            next(iter(self.owned_parameters().values())).grad.fill_(float("inf"))
        return stats

    monkeypatch.setattr(SingleRunner, "train_epoch", train_epoch)
    rec = api.run(_cfg(epochs=10), graph)
    check_record(rec)
    assert rec["summary"]["diverged"] == {"epoch": 3, "where": "the model", "what": "a gradient is not finite"}
    assert len(rec["epochs"]) == 3 and rec["epochs"][-1]["loss"] is not None
