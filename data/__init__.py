"""gnnpipe.data: the graph container, dataset loaders and the synthetic generator."""

from gnnpipe.data.graph import Graph

__all__ = ["Graph"]
