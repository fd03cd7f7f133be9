"""The objective and the optimizer: the loss of any row split sums to the full-graph
mean, evaluation sums add up over workers, and the layer weight decay goes to the
layer group."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.config import ModelConfig, TrainConfig
from gnnpipe.models.objective import (
    correct_counts,
    evaluation_metrics,
    evaluation_sums,
    split_accuracies,
    training_loss,
)
from gnnpipe.models.optim import model_optimizer


def test_val_loss_is_the_mean_cross_entropy_of_the_validation_rows():
    torch.manual_seed(0)
    logits, labels = torch.randn(30, 3), torch.randint(0, 3, (30,))
    masks = (torch.arange(30) < 10, (torch.arange(30) >= 10) & (torch.arange(30) < 22), torch.arange(30) >= 22)
    whole = evaluation_metrics(evaluation_sums(logits, labels, masks))
    want = torch.nn.functional.cross_entropy(logits[masks[1]].double(), labels[masks[1]])
    assert whole["val_loss"] == pytest.approx(float(want), rel=1e-12)
    # sums of any row split add up to the same figures (what the workers all-reduce)
    parts = [evaluation_sums(logits[a:b], labels[a:b], tuple(m[a:b] for m in masks)) for a, b in ((0, 13), (13, 30))]
    assert evaluation_metrics([x + y for x, y in zip(*parts)]) == pytest.approx(whole, rel=1e-12)


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


def test_training_loss_of_row_ids_is_that_of_the_mask_bit_for_bit():
    """The ids of the training rows give the mask's loss and gradient exactly (the same
    rows in the same order), an empty set included."""
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(9, 3, generator=gen)
    labels = torch.randint(0, 3, (9,), generator=gen)
    for mask in (torch.rand(9, generator=gen) < 0.5, torch.zeros(9, dtype=torch.bool)):
        a = logits.clone().requires_grad_(True)
        b = logits.clone().requires_grad_(True)
        by_mask = training_loss(a, labels, mask, 7)
        by_ids = training_loss(b, labels, mask.nonzero().squeeze(1), 7)
        by_mask.backward()
        by_ids.backward()
        assert torch.equal(by_ids, by_mask) and torch.equal(b.grad, a.grad)
