"""Logging setup: every gnnpipe log line carries the worker's rank.

The library itself only logs (``logging.getLogger(__name__)``); the CLI and every
worker process call :func:`setup_logging` once to point the ``gnnpipe`` logger at
stderr with ``[rank R]`` in the prefix.
"""

from __future__ import annotations

import logging
import sys
from typing import IO

__all__ = ["setup_logging", "LOGGER_NAME"]

LOGGER_NAME = "gnnpipe"
_HANDLER_MARK = "_gnnpipe_handler"


def setup_logging(level: str | int = "INFO", rank: int = 0, stream: IO[str] | None = None) -> logging.Logger:
    """Point the ``gnnpipe`` logger at stderr with the rank in every line's prefix.

    Called by the CLI (and by worker processes); the library itself only logs.
    Calling it again replaces the previous handler, so it is safe per process.
    """
    logger = logging.getLogger(LOGGER_NAME)
    for h in list(logger.handlers):
        if getattr(h, _HANDLER_MARK, False):
            logger.removeHandler(h)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    setattr(handler, _HANDLER_MARK, True)
    handler.setFormatter(logging.Formatter(
        f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(level if isinstance(level, int) else level.upper())
    logger.propagate = False
    return logger
