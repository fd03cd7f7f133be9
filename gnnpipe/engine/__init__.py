"""gnnpipe.engine: how each mode executes on its workers.

:mod:`~gnnpipe.engine.layout` resolves and validates the parallel layout once;
:mod:`~gnnpipe.engine.comm` is the only module that talks to other workers;
:mod:`~gnnpipe.engine.launch` starts local workers or joins a torchrun launch; the
mode runners (:data:`gnnpipe.engine.runners.RUNNERS`: single, graph, pipeline,
hybrid) implement :class:`~gnnpipe.engine.context.ModeRunner`, which the one epoch
loop (:mod:`gnnpipe.trainer.loop`) drives. Pipeline and hybrid are a
:class:`~gnnpipe.engine.stage.Stage` (what a rank owns), a schedule as data
(:mod:`~gnnpipe.engine.schedule`) and its executor (:mod:`~gnnpipe.engine.executor`).
Submodules are imported on use.
"""
