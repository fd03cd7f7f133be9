"""The monitor: best epoch (earliest on a tie), patience, both monitored figures."""

from __future__ import annotations

import pytest

from gnnpipe.trainer.monitor import Monitor


def test_patience_counts_evaluations_without_a_better_val_acc():
    m = Monitor("val_acc", 2)
    assert [m.update(i, v, None, 0.0) for i, v in enumerate((0.5, 0.6, 0.6, 0.7, 0.7, 0.65), 1)] == \
        [False, False, False, False, False, True]
    assert m.best()["epoch"] == 4  # the earliest of the tied 0.7s
    never = Monitor("val_acc", None)
    assert not any(never.update(i, 0.1, None, 0.0) for i in range(1, 11))


def test_val_loss_is_minimised_and_accuracy_ignored():
    m = Monitor("val_loss", 2)
    stops = [m.update(i, 0.9, v, 0.5 + i / 100) for i, v in enumerate((1.0, 0.8, 0.8, 0.7, 0.75, 0.9), 1)]
    assert stops == [False, False, False, False, False, True]
    assert m.best() == {"epoch": 4, "val_acc": 0.9, "val_loss": 0.7, "test_acc": 0.54, "monitor": "val_loss"}


def test_a_missing_or_nan_loss_is_never_the_best():
    m = Monitor("val_loss")
    m.update(1, 0.5, float("nan"), 0.1)
    m.update(2, 0.4, 1.5, 0.2)
    m.update(3, 0.6, None, 0.3)
    assert m.best()["epoch"] == 2


def test_nothing_evaluated_gives_null_figures():
    assert Monitor("val_acc").best() == {"epoch": None, "val_acc": None, "val_loss": None,
                                         "test_acc": None, "monitor": "val_acc"}


def test_state_round_trip_continues_the_count():
    a = Monitor("val_acc", 3)
    for i, v in enumerate((0.5, 0.7, 0.6), 1):
        a.update(i, v, None, v)
    b = Monitor("val_acc", 3)
    b.load_state_dict(a.state_dict())
    assert b.best() == a.best() and b.since_best == 1
    assert [b.update(4, 0.6, None, 0.0), b.update(5, 0.6, None, 0.0)] == [False, True]
    with pytest.raises(ValueError, match="monitor"):
        Monitor("val_loss").load_state_dict(a.state_dict())


def test_unknown_monitor_is_refused():
    with pytest.raises(ValueError, match="val_acc or|one of"):
        Monitor("train_acc")
