"""Mode single: learns, is deterministic, stops early, removes self-loops, records."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig, TrainConfig
from gnnpipe.errors import ConfigError
from gnnpipe.trainer.evaluate import correct_counts, split_accuracies, training_loss
from gnnpipe.trainer.optim import model_optimizer
from gnnpipe.trainer.record import check_record
from gnnpipe.trainer.single import EarlyStopping, train_single
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
    rec = train_single(_cfg(epochs=40, lr=0.02), graph)
    check_record(rec)
    losses = _losses(rec)
    assert losses[-1] < 0.5 * losses[0]
    # chance is 1/3 with three balanced classes
    assert rec["best"]["test_acc"] >= 0.85
    assert rec["best"]["val_acc"] >= 0.85


def test_same_seed_same_losses_other_seed_other_losses(graph):
    a = _losses(train_single(_cfg(model="gcnii", layers=4, epochs=8, seed=3), graph))
    b = _losses(train_single(_cfg(model="gcnii", layers=4, epochs=8, seed=3), graph))
    c = _losses(train_single(_cfg(model="gcnii", layers=4, epochs=8, seed=4), graph))
    assert a == b
    assert a != c


def test_the_callers_random_state_is_left_alone(graph):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    train_single(_cfg(epochs=2), graph)
    assert torch.equal(torch.rand(3), expected)


def test_evaluation_schedule_and_record(graph):
    rec = train_single(_cfg(epochs=12, eval_every=5), graph)
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
    rec = train_single(_cfg(epochs=300, eval_every=k, patience=patience, lr=0.05), graph)
    run = rec["summary"]["epochs_run"]
    assert rec["summary"]["stopped_early"] and run < 300
    # stopped exactly `patience` evaluations after the best one
    assert run == rec["best"]["epoch"] + patience * k
    evals = [e for e in rec["epochs"] if e["val_acc"] is not None]
    assert all(e["val_acc"] <= rec["best"]["val_acc"] for e in evals[-patience:])


def test_early_stopping_counter():
    s = EarlyStopping(2)
    assert [s.update({"val": v}) for v in (0.5, 0.6, 0.6, 0.7, 0.7, 0.65)] == \
        [False, False, False, False, False, True]
    assert not any(EarlyStopping(None).update({"val": 0.1}) for _ in range(10))
    s = EarlyStopping(2, "val_loss")  # lower is better; accuracy is ignored
    assert [s.update({"val": 0.9, "val_loss": v}) for v in (1.0, 0.8, 0.8, 0.7, 0.75, 0.9)] == \
        [False, False, False, False, False, True]


def test_early_stopping_on_val_loss_stops_after_the_lowest_loss(graph):
    patience, k = 3, 2
    rec = train_single(_cfg(epochs=400, eval_every=k, patience=patience, lr=0.05, monitor="val_loss"), graph)
    evals = [e for e in rec["epochs"] if e["val_acc"] is not None]
    losses = [e["val_loss"] for e in evals]
    assert all(x is not None and x > 0 for x in losses)
    assert rec["best"]["monitor"] == "val_loss"
    assert rec["best"]["val_loss"] == min(losses)
    assert rec["best"]["epoch"] == evals[losses.index(min(losses))]["epoch"]
    assert rec["summary"]["stopped_early"]
    assert rec["summary"]["epochs_run"] == rec["best"]["epoch"] + patience * k


def test_val_loss_is_the_mean_cross_entropy_of_the_validation_rows(graph):
    from gnnpipe.trainer.evaluate import evaluation_metrics, evaluation_sums

    torch.manual_seed(0)
    logits, labels = torch.randn(30, 3), torch.randint(0, 3, (30,))
    masks = (torch.arange(30) < 10, (torch.arange(30) >= 10) & (torch.arange(30) < 22), torch.arange(30) >= 22)
    whole = evaluation_metrics(evaluation_sums(logits, labels, masks))
    want = torch.nn.functional.cross_entropy(logits[masks[1]].double(), labels[masks[1]])
    assert whole["val_loss"] == pytest.approx(float(want), rel=1e-12)
    # sums of any row split add up to the same figures (what the workers all-reduce)
    parts = [evaluation_sums(logits[a:b], labels[a:b], tuple(m[a:b] for m in masks)) for a, b in ((0, 13), (13, 30))]
    assert evaluation_metrics([x + y for x, y in zip(*parts)]) == pytest.approx(whole, rel=1e-12)


def test_self_loops_are_removed_before_training(graph):
    looped = graph.add_self_loops()
    assert looped.num_edges == graph.num_edges + graph.num_nodes
    a = train_single(_cfg(epochs=4), graph)
    b = train_single(_cfg(epochs=4), looped)
    assert _losses(a) == pytest.approx(_losses(b), rel=1e-6, abs=1e-7)
    assert b["extra"]["self_loops_removed"] == graph.num_nodes


def test_float64_run(graph):
    rec = train_single(_cfg(epochs=3, dtype="float64"), graph)
    assert rec["config"]["train"]["dtype"] == "float64"
    assert all(e["loss"] is not None for e in rec["epochs"])


def test_other_modes_are_refused(graph):
    cfg = RunConfig(model=ModelConfig(layers=4), parallel=ParallelConfig(mode="pipeline", workers=2))
    with pytest.raises(ConfigError, match="single"):
        train_single(cfg, graph)


def test_loss_of_any_row_split_sums_to_the_full_mean():
    torch.manual_seed(0)
    logits, labels = torch.randn(20, 4), torch.randint(0, 4, (20,))
    mask = torch.rand(20) < 0.5
    n_train = int(mask.sum())
    full = torch.nn.functional.cross_entropy(logits[mask], labels[mask])
    parts = sum(training_loss(logits[a:b], labels[a:b], mask[a:b], n_train) for a, b in ((0, 7), (7, 8), (8, 20)))
    assert float(parts) == pytest.approx(float(full), rel=1e-6)
    counts = correct_counts(logits, labels, (mask, ~mask))
    acc = split_accuracies(counts)
    assert acc[0] == pytest.approx(float((logits.argmax(1) == labels)[mask].float().mean()))


def test_layer_weight_decay_goes_to_the_layer_group():
    from gnnpipe.models import build_model

    model = build_model(ModelConfig(model="gcnii", layers=3, hidden=8), in_features=5, num_classes=3)
    opt = model_optimizer(model, TrainConfig(weight_decay=5e-4, layer_weight_decay=0.01))
    groups = {g["name"]: g for g in opt.param_groups}
    assert groups["layers"]["weight_decay"] == 0.01 and groups["dense"]["weight_decay"] == 5e-4
    layer_ids = {id(p) for p in model.layer_parameters()}
    assert {id(p) for p in groups["layers"]["params"]} == layer_ids
    n_all = sum(1 for _ in model.parameters())
    assert len(groups["layers"]["params"]) + len(groups["dense"]["params"]) == n_all
    same = model_optimizer(model, TrainConfig(weight_decay=0.1))
    assert all(g["weight_decay"] == 0.1 for g in same.param_groups)
