"""gnnpipe.trainer: the one epoch loop and what surrounds it.

:mod:`~gnnpipe.trainer.loop` (the epoch loop of every mode), :mod:`~gnnpipe.trainer.monitor`
(best epoch, patience), :mod:`~gnnpipe.trainer.worker` (the body of every worker),
:mod:`~gnnpipe.trainer.distributed` (partition once, start or join the workers),
:mod:`~gnnpipe.trainer.progress` and the result record (:mod:`~gnnpipe.trainer.record`,
its only builder). Submodules are imported on use.
"""
