"""gnnpipe.models: GNN layers (GCN, GraphSAGE, GCNII, ResGCN+, MLP), ``DeepGNN``, ``build_model``.

Layers read ``[own | halo]`` rows of their input and write their own rows through a
``gnnpipe.kernels.ChunkOps``; they know nothing of processes (ARCHITECTURE.md).
"""

from .layers import GCNIILayer, GCNLayer, GNNLayer, MLPLayer, ResGCNPlusLayer, SAGELayer, dropout
from .model import MODEL_NAMES, Classifier, DeepGNN, InputProjection, build_model, model_input

__all__ = [
    "Classifier",
    "DeepGNN",
    "GCNIILayer",
    "GCNLayer",
    "GNNLayer",
    "InputProjection",
    "MLPLayer",
    "MODEL_NAMES",
    "ResGCNPlusLayer",
    "SAGELayer",
    "build_model",
    "dropout",
    "model_input",
]
