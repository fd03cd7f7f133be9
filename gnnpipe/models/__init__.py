"""gnnpipe.models: GNN layers (GCN, GraphSAGE, GCNII, ResGCN+, MLP), ``DeepGNN``, ``build_model``.

Layers read ``[own | halo]`` rows of their input and write their own rows through a
``gnnpipe.kernels.ChunkOps``; they know nothing of processes (ARCHITECTURE.md).
"""

from .layers import GCNIILayer, GCNLayer, GNNLayer, MLPLayer, ResGCNPlusLayer, SAGELayer, dropout
from .model import MODEL_NAMES, Classifier, DeepGNN, InputProjection, build_model, model_input

__all__ = [
    "GNNLayer",
    "GCNLayer",
    "SAGELayer",
    "GCNIILayer",
    "ResGCNPlusLayer",
    "MLPLayer",
    "MODEL_NAMES",
    "InputProjection",
    "Classifier",
    "DeepGNN",
    "build_model",
    "model_input",
    "dropout",
]
