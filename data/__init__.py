"""gnnpipe.data: the graph container, dataset readers and the synthetic generator.

See :mod:`gnnpipe.data.registry` for the dataset names (README.md's "Datasets" table is
generated from it), :mod:`gnnpipe.data.formats` for the readers, and
``python -m gnnpipe.data list`` / ``info NAME`` for a command-line view, and
:mod:`gnnpipe.data.sparse` for sparse (CSR) features.
"""

from gnnpipe.data.cache import read_graph, write_graph
from gnnpipe.data.graph import Graph
from gnnpipe.data.registry import list_datasets, list_formats, load_dataset, load_from_config, load_path
from gnnpipe.data.sparse import DEFAULT_SPARSE_THRESHOLD, SparseFeatures
from gnnpipe.data.synthetic import SYNTHETIC_DEFAULTS, synthetic_graph

__all__ = [
    "Graph",
    "SparseFeatures",
    "DEFAULT_SPARSE_THRESHOLD",
    "load_dataset",
    "load_from_config",
    "list_datasets",
    "list_formats",
    "load_path",
    "synthetic_graph",
    "SYNTHETIC_DEFAULTS",
    "read_graph",
    "write_graph",
]
