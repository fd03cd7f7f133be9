"""Exceptions for bad input.

Every error that a user can cause with a file, a flag or a config value is a
:class:`GnnpipeInputError`. Its message is one line that names the input, what was
expected and what was found. The CLIs print that line and exit with code 2; anything
else escaping is a bug in gnnpipe.
"""

from __future__ import annotations


class GnnpipeInputError(ValueError):
    """Bad user input (file, flag, config value, layout). CLI exit code 2."""


class DataError(GnnpipeInputError):
    """A dataset file or a graph is malformed, missing or inconsistent."""


class PartitionError(GnnpipeInputError):
    """An impossible partition request (num_parts < 1 or > N, unknown method)."""


class ConfigError(GnnpipeInputError):
    """An invalid configuration value, flag, config-file key or worker layout."""


class WorkerFailedError(RuntimeError):
    """A distributed worker died or raised; the message names the rank."""

    def __init__(self, rank: int, message: str) -> None:
        super().__init__(f"worker rank {rank} failed: {message}")
        self.rank = rank


class RunTerminated(BaseException):
    """The launcher was asked to stop (SIGTERM) and has stopped every worker.

    Like :class:`KeyboardInterrupt` it derives from :class:`BaseException`, so that
    an ``except Exception`` on the way up cannot swallow a request to terminate. It
    is not bad input: the CLI prints ``error: terminated (SIGTERM)`` and exits with
    :attr:`exit_code` (``128 + signum``, 143 for SIGTERM, as a shell reports it).
    """

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = int(signum)
        try:
            name = signal.Signals(self.signum).name
        except ValueError:
            name = f"signal {self.signum}"
        super().__init__(f"terminated ({name})")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __reduce__(self) -> tuple:
        return (type(self), (self.signum,))
