"""Best-epoch selection and early stopping: one policy for every mode.

The epoch loop (:mod:`gnnpipe.trainer.loop`) hands every evaluated epoch to a
:class:`Monitor`. It keeps the epoch with the best monitored validation figure
(``train.monitor``: the highest ``val_acc`` or the lowest ``val_loss``; the earliest
on a tie) and counts the evaluations since that best, which is what ``patience``
bounds. The record's ``best`` block is :meth:`Monitor.best`. Its state is a small
dict, so a checkpoint can carry it across a resume.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["Monitor", "MONITORS", "monitored_value"]

#: The validation figures a run can be monitored on.
MONITORS = ("val_acc", "val_loss")


def monitored_value(val_acc: float | None, val_loss: float | None, monitor: str) -> float:
    """The monitored figure of an evaluation, signed so that larger is better; a
    missing or non-finite figure is the worst value."""
    if monitor == "val_acc":
        value = val_acc
        sign = 1.0
    elif monitor == "val_loss":
        value = val_loss
        sign = -1.0
    else:
        raise ValueError(f"monitor: expected one of {', '.join(MONITORS)}, found {monitor!r}")
    if value is None or not math.isfinite(value):
        return -math.inf
    return sign * float(value)


class Monitor:
    """Tracks the best evaluated epoch and the evaluations since it.

    ``update(epoch, val_acc, val_loss, test_acc)`` returns True when training should
    stop: ``patience`` evaluations in a row have not beaten the best (ties do not
    count as better). ``patience=None`` never stops, nor does a graph without
    validation vertices (``has_validation=False``), whose best epoch is the last one.
    """

    def __init__(self, monitor: str = "val_acc", patience: int | None = None, *,
                 has_validation: bool = True) -> None:
        monitored_value(None, None, monitor)  # refuses an unknown monitor
        self.monitor = monitor
        self.patience = patience
        # Without validation vertices there is nothing to select on: the best epoch is
        # the last evaluated one and nothing stops early (the entry warns once).
        self.has_validation = bool(has_validation)
        self._best: dict[str, Any] | None = None
        self._best_value = -math.inf
        self.since_best = 0

    def update(self, epoch: int, val_acc: float | None, val_loss: float | None,
               test_acc: float | None) -> bool:
        value = monitored_value(val_acc, val_loss, self.monitor)
        if self._best is None or value > self._best_value or not self.has_validation:
            self._best = {"epoch": int(epoch), "val_acc": _opt(val_acc), "val_loss": _opt(val_loss),
                          "test_acc": _opt(test_acc)}
            self._best_value = value
            self.since_best = 0
        else:
            self.since_best += 1
        return self.patience is not None and self.since_best >= self.patience

    def best(self) -> dict[str, Any]:
        """``{epoch, val_acc, val_loss, test_acc, monitor}`` of the best evaluated epoch
        (figures None when nothing was evaluated)."""
        base = self._best or {"epoch": None, "val_acc": None, "val_loss": None, "test_acc": None}
        return {**base, "monitor": self.monitor}

    # ------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {"monitor": self.monitor, "best": None if self._best is None else dict(self._best),
                "best_value": self._best_value, "since_best": self.since_best}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["monitor"] != self.monitor:
            raise ValueError(f"monitor: expected {self.monitor!r} in the state, found {state['monitor']!r}")
        self._best = None if state["best"] is None else dict(state["best"])
        self._best_value = float(state["best_value"])
        self.since_best = int(state["since_best"])


def _opt(x: float | None) -> float | None:
    return None if x is None else float(x)
