"""Plain reference backend: the definitions of ARCHITECTURE.md written out directly.

Slow and obvious on purpose; tests compare the fast backends against it (in
float64). Every reduce is built from per-edge gathers and ``index_add`` (or, for
``max``, a Python loop over rows), and differentiated by torch's own autograd.

``max`` uses ``Tensor.amax`` per row, whose backward splits the gradient evenly among
tied entries: the same tie rule as the torch backend.
"""

from __future__ import annotations

import torch

from gnnpipe.partition.plan import ChunkPlan

__all__ = ["ReferenceBackend"]


class ReferenceBackend:
    """Per-edge tensors of one chunk, on the target device.

    Shapes: dst, src int64 [nnz] (own local_nid, local_nid); degree [num_local].
    """

    name = "reference"

    def __init__(self, plan: ChunkPlan, device: torch.device, dtype: torch.dtype,
                 reduces: tuple[str, ...] = ()) -> None:
        # ``reduces`` (what ChunkOps.build names) changes nothing here: this backend's
        # per-reduce state is built at once, and is small.
        self.num_own = plan.num_own
        self.dst = plan.dst_local().to(device)
        self.src = plan.indices.to(device)
        self.indptr = [int(v) for v in plan.indptr]
        self.degree = plan.in_degree.to(device=device, dtype=dtype)

    def _edge_sum(self, messages: torch.Tensor) -> torch.Tensor:
        out = messages.new_zeros((self.num_own, messages.shape[1]))
        return out.index_add(0, self.dst, messages)

    def aggregate(self, x_local: torch.Tensor, reduce: str, edge_weight: torch.Tensor | None) -> torch.Tensor:
        src, dst = self.src, self.dst
        if reduce == "sum":
            return self._edge_sum(x_local[src])
        if reduce == "mean":
            summed = self._edge_sum(x_local[src])
            degree = self.degree[: self.num_own]
            return torch.where(degree[:, None] > 0, summed / degree.clamp_min(1)[:, None], torch.zeros_like(summed))
        if reduce == "gcn":
            d_plus_1 = self.degree + 1
            norm = 1.0 / torch.sqrt(d_plus_1[src] * d_plus_1[dst])
            neighbours = self._edge_sum(x_local[src] * norm[:, None])
            return neighbours + x_local[: self.num_own] / d_plus_1[: self.num_own, None]
        if reduce == "weighted":
            assert edge_weight is not None
            return self._edge_sum(x_local[src] * edge_weight[:, None])
        if reduce == "max":
            rows = []
            for v in range(self.num_own):
                a, b = self.indptr[v], self.indptr[v + 1]
                if a == b:
                    rows.append(x_local.new_zeros(x_local.shape[1]))
                else:
                    rows.append(x_local[src[a:b]].amax(dim=0))
            if not rows:
                return x_local.new_zeros((0, x_local.shape[1])) + 0 * x_local.sum()
            return torch.stack(rows)
        raise AssertionError(f"unvalidated reduce {reduce!r}")
