"""gnnpipe.kernels: device-side aggregation operators built once per ChunkPlan.

``ChunkOps.build(plan, device=..., dtype=..., backend="torch")`` then
``ops.aggregate(x_local, reduce, edge_weight=None)`` with reduce in
``sum``/``mean``/``max``/``gcn``/``weighted``; backends ``torch`` (default),
``scatter`` (torch-scatter, optional) and ``reference`` (tests).
:mod:`gnnpipe.kernels.sparse_input` holds the input projection's CSR x dense product
for sparse features.
"""

from gnnpipe.kernels.ops import BACKENDS, REDUCES, ChunkOps, available_backends

__all__ = ["ChunkOps", "BACKENDS", "REDUCES", "available_backends"]
