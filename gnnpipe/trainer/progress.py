"""The epoch progress bar (plain stderr, no dependency).

The bar redraws one stderr line per epoch with the loss, the last validation accuracy and the epoch time; it is
on only when stderr is a terminal and the ``gnnpipe`` logger shows INFO, and only
on rank 0. Independently of the bar, rank 0 logs one INFO line every ``log_every``
epochs (and at the last epoch), so that a redirected run still shows its progress; the
other ranks log none (every rank has the same all-reduced figures: P workers would
print each line P times).
"""

from __future__ import annotations

import logging
import sys
from typing import IO, Any

from gnnpipe.logs import LOGGER_NAME

__all__ = ["Progress"]


class Progress:
    """Epoch progress: a redrawn stderr line (when enabled) plus a log line every
    ``log_every`` epochs.

    ``enabled=None`` decides automatically (TTY, INFO visible, rank 0).
    """

    def __init__(self, total: int, *, log_every: int = 10, rank: int = 0,
                 enabled: bool | None = None, stream: IO[str] | None = None,
                 logger: logging.Logger | None = None) -> None:
        self.total = int(total)
        self.rank = int(rank)
        self.log_every = max(int(log_every), 1)
        self.logger = logger or logging.getLogger(f"{LOGGER_NAME}.train")
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = bool(getattr(self.stream, "isatty", lambda: False)())
            enabled = isatty and rank == 0 and self.logger.isEnabledFor(logging.INFO)
        self.enabled = bool(enabled)
        self._drawn = False
        self._last_val: float | None = None

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False

    def update(self, epoch: int, loss: float, epoch_time_s: float, val_acc: float | None = None,
               **extra: Any) -> None:
        """Report epoch ``epoch`` (1-based)."""
        if val_acc is not None:
            self._last_val = val_acc
        val = "  -   " if self._last_val is None else f"{100 * self._last_val:5.1f}%"
        text = f"epoch {epoch:>{len(str(self.total))}}/{self.total} loss {loss:.4f} val {val} " \
               f"{epoch_time_s * 1e3:7.1f} ms/epoch"
        if extra:
            text += " " + " ".join(f"{k} {v}" for k, v in extra.items())
        if self.rank == 0 and (epoch % self.log_every == 0 or epoch == self.total):
            self._clear()
            self.logger.info(text)
        if self.enabled:
            width = 30
            done = int(width * epoch / max(self.total, 1))
            bar = "#" * done + "." * (width - done)
            self.stream.write(f"\r[{bar}] {text}")
            self.stream.flush()
            self._drawn = True

    def close(self) -> None:
        """Remove the bar line (the summary line follows)."""
        self._clear()
        if self.enabled:
            self.stream.flush()
