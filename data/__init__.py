"""gnnpipe.data: the graph container, dataset loaders and the synthetic generator.

See :mod:`gnnpipe.data.registry` for the table of dataset names, and
``python -m gnnpipe.data list`` / ``info NAME`` for a command-line view.
"""

from gnnpipe.data.graph import Graph
from gnnpipe.data.registry import list_datasets, list_formats, load_dataset, load_path
from gnnpipe.data.synthetic import SYNTHETIC_DEFAULTS, synthetic_graph

__all__ = [
    "Graph",
    "load_dataset",
    "list_datasets",
    "list_formats",
    "load_path",
    "synthetic_graph",
    "SYNTHETIC_DEFAULTS",
]
