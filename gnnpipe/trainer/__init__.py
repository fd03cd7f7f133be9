"""gnnpipe.trainer: the single-process trainer, loss/accuracy, optimizer, progress
and the result record (record.py is its only builder).

Submodules are imported on use (``from gnnpipe.trainer.record import build_record``)
so that importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "train_single": "gnnpipe.trainer.single",
    "EarlyStopping": "gnnpipe.trainer.single",
    "EpochRecord": "gnnpipe.trainer.record",
    "build_record": "gnnpipe.trainer.record",
    "check_record": "gnnpipe.trainer.record",
    "machine_info": "gnnpipe.trainer.record",
    "build_optimizer": "gnnpipe.trainer.optim",
    "training_loss": "gnnpipe.trainer.evaluate",
    "setup_logging": "gnnpipe.trainer.progress",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gnnpipe.trainer' has no attribute {name!r}")
