"""Where each epoch goes as it happens: a JSON-lines file and TensorBoard scalars.

The record (:mod:`gnnpipe.trainer.record`) is written once, at the end; a run that
dies leaves none. ``train.metrics_jsonl`` makes rank 0 write every epoch's record
entry as one JSON line, flushed and synced to disk before the next epoch starts, so
the curve of a dead run survives. ``train.tensorboard`` writes the same figures as
TensorBoard scalars (the optional ``tensorboard`` package). On a resume the file is
rewritten from the epochs the checkpoint holds, so that it always matches the record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from gnnpipe.errors import ConfigError

__all__ = ["EpochSinks", "check_tensorboard"]


def check_tensorboard() -> None:
    """ConfigError (one line) when ``train.tensorboard`` is set but the package is not
    installed; called at the entry, before training."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        raise ConfigError("train.tensorboard: expected the tensorboard package "
                          "(pip install 'gnnpipe[tensorboard]'), found it is not installed") from None


class EpochSinks:
    """Rank 0's per-epoch outputs; a no-op where none is configured."""

    def __init__(self, metrics_jsonl: str | None, tensorboard: str | None) -> None:
        self._jsonl = None
        self._tb = None
        if metrics_jsonl:
            path = Path(metrics_jsonl).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            self._jsonl = path.open("w", encoding="utf-8")
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(Path(tensorboard).expanduser()))

    def write(self, entries: Sequence[dict[str, Any]]) -> None:
        """Append epoch entries (``EpochRecord.to_dict()``) and make them durable."""
        for e in entries:
            if self._jsonl is not None:
                self._jsonl.write(json.dumps(e, allow_nan=False) + "\n")
            if self._tb is not None:
                step = e["epoch"]
                for key in ("loss", "train_acc", "val_acc", "test_acc", "val_loss", "epoch_time_s"):
                    if e[key] is not None:
                        self._tb.add_scalar(f"train/{key}", e[key], step)
                for key, value in e["time"].items():
                    self._tb.add_scalar(f"time/{key}", value, step)
                self._tb.add_scalar("bytes/total", sum(e["bytes"].values()), step)
        if self._jsonl is not None:
            self._jsonl.flush()
            os.fsync(self._jsonl.fileno())
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
        if self._tb is not None:
            self._tb.close()
