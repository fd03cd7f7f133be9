"""Mode -> the :class:`~gnnpipe.engine.context.ModeRunner` class that runs it."""

from __future__ import annotations

from gnnpipe.engine.graph_mode import GraphRunner
from gnnpipe.engine.hybrid import HybridRunner
from gnnpipe.engine.pipeline import PipelineRunner
from gnnpipe.engine.single_mode import SingleRunner

__all__ = ["RUNNERS"]

#: Every mode of DESIGN.md 1 and its runner.
RUNNERS: dict[str, type] = {
    "single": SingleRunner,
    "graph": GraphRunner,
    "pipeline": PipelineRunner,
    "hybrid": HybridRunner,
}
