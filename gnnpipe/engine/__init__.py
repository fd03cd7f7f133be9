"""gnnpipe.engine: the distributed modes (graph, pipeline, hybrid).

``run_distributed(run_config, graph=None)`` starts the workers on this machine (or,
under torchrun, is one of them) and returns rank 0's result record. Inside a worker,
:class:`~gnnpipe.engine.context.WorkerContext` and :class:`~gnnpipe.engine.comm.Comm`
are what a mode runner (:data:`~gnnpipe.engine.driver.RUNNERS`) is built on.
"""

from gnnpipe.engine.comm import KINDS, Comm
from gnnpipe.engine.context import EpochStats, ModeRunner, WorkerContext
from gnnpipe.engine.driver import RUNNERS, get_runner, run_distributed, validate_layout

__all__ = ["run_distributed", "validate_layout", "get_runner", "RUNNERS", "KINDS", "Comm",
           "WorkerContext", "EpochStats", "ModeRunner"]
