"""torch-scatter backend: gather source rows, reduce them per CSR row with
``torch_scatter.segment_csr`` (autograd by torch-scatter).

Optional: used only when ``backend="scatter"`` is asked for and ``torch_scatter``
imports. Its ``max`` backward sends the gradient to one arg-max edge per element (the
torch-scatter rule), which differs from the even tie split of the other backends only
when distinct sources tie exactly.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import torch

from gnnpipe.errors import ConfigError
from gnnpipe.partition.plan import ChunkPlan

__all__ = ["ScatterBackend", "scatter_available"]


def _import_torch_scatter() -> ModuleType | None:
    try:
        return importlib.import_module("torch_scatter")
    except Exception:  # ImportError, or an OSError from a mismatched binary build
        return None


def scatter_available() -> bool:
    """True when ``torch_scatter`` imports."""
    return _import_torch_scatter() is not None


class ScatterBackend:
    """Per-edge tensors and normalisations of one chunk, on the target device.

    Shapes: indptr [num_own + 1]; src [nnz]; gcn_norm [nnz]; inv_degree, self_norm [num_own].
    """

    name = "scatter"

    def __init__(self, plan: ChunkPlan, device: torch.device, dtype: torch.dtype,
                 reduces: tuple[str, ...] = ()) -> None:
        # ``reduces`` (what ChunkOps.build names) changes nothing here: this backend's
        # per-reduce state is built at once, and is small.
        ts = _import_torch_scatter()
        if ts is None:
            raise ConfigError(
                "backend: expected an installed backend for 'scatter' (pip install torch-scatter), "
                "found torch_scatter not importable"
            )
        self._segment_csr = ts.segment_csr
        self.num_own = plan.num_own
        self.indptr = plan.indptr.to(device)
        self.src = plan.indices.to(device)
        dst = plan.dst_local()
        degree = plan.in_degree.to(torch.float64)
        self.inv_degree = (1.0 / degree[: plan.num_own].clamp_min(1)).to(device=device, dtype=dtype)
        d_plus_1 = degree + 1
        self.gcn_norm = (d_plus_1[plan.indices] * d_plus_1[dst]).rsqrt().to(device=device, dtype=dtype)
        self.self_norm = (1.0 / d_plus_1[: plan.num_own]).to(device=device, dtype=dtype)

    def _segment(self, messages: torch.Tensor, reduce: str) -> torch.Tensor:
        if self.num_own == 0:
            return messages.new_zeros((0, messages.shape[1])) + 0 * messages.sum()
        return self._segment_csr(messages, self.indptr, reduce=reduce)

    def aggregate(self, x_local: torch.Tensor, reduce: str, edge_weight: torch.Tensor | None) -> torch.Tensor:
        gathered = x_local[self.src]
        if reduce == "sum":
            return self._segment(gathered, "sum")
        if reduce == "mean":
            return self._segment(gathered, "sum") * self.inv_degree[:, None]
        if reduce == "gcn":
            neighbours = self._segment(gathered * self.gcn_norm[:, None], "sum")
            return neighbours + x_local[: self.num_own] * self.self_norm[:, None]
        if reduce == "weighted":
            assert edge_weight is not None
            return self._segment(gathered * edge_weight[:, None], "sum")
        if reduce == "max":
            return self._segment(gathered, "max")
        raise AssertionError(f"unvalidated reduce {reduce!r}")
