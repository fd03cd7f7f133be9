"""Mode ``single``: exact full-graph training in one process (the reference).

One epoch is one forward over the whole graph, the loss of DESIGN.md 3 (sum of
cross-entropy over the training vertices divided by their number), one backward and
one Adam step; evaluation is the same forward in eval mode. The runner implements the
same :class:`~gnnpipe.engine.context.ModeRunner` protocol as the distributed modes,
with a one-rank communicator that sends nothing, so that one epoch loop
(:mod:`gnnpipe.trainer.loop`) serves every mode.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from gnnpipe.engine.context import EpochStats, ReplicaState, WorkerContext, sync
from gnnpipe.models.objective import evaluation_metrics, evaluation_sums, training_loss

__all__ = ["SingleRunner"]


class SingleRunner(ReplicaState):
    """The ``single`` mode runner: the whole graph as one chunk, the whole model."""

    def __init__(self, ctx: WorkerContext) -> None:
        from gnnpipe.kernels import ChunkOps
        from gnnpipe.models.model import model_input
        from gnnpipe.models.optim import model_optimizer
        from gnnpipe.partition import whole_graph_plan

        g = ctx.graph
        self.device = ctx.device
        self.ops = ChunkOps.build(whole_graph_plan(g), device=ctx.device, dtype=ctx.dtype,
                                  backend=ctx.config.parallel.kernel_backend, reduces=ctx.model.reduces)
        self.x = model_input(ctx.model, g.features, device=ctx.device, dtype=ctx.dtype)
        self.y = g.labels.to(ctx.device)
        self.masks = tuple(m.to(ctx.device) for m in (g.train_mask, g.val_mask, g.test_mask))
        self.num_train = int(g.train_mask.sum())
        self.model = ctx.model.to(device=ctx.device, dtype=ctx.dtype)
        self.optimizer = model_optimizer(self.model, ctx.config.train)
        self._last_logits: Tensor | None = None
        self._rows = torch.arange(g.num_nodes)

    def prepare(self) -> dict[str, Any]:
        return {"bytes": {}, "time_s": 0.0}

    def train_epoch(self, epoch: int, continues: bool = False) -> EpochStats:
        sync(self.device)
        t0 = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(self.x, self.ops)
        loss = training_loss(logits, self.y, self.masks[0], self.num_train)
        loss.backward()
        self.optimizer.step()
        self._last_logits = logits.detach()
        loss_value = float(loss.detach())
        sync(self.device)
        return EpochStats(loss=loss_value, bytes_sent={}, compute_s=time.perf_counter() - t0, comm_wait_s=0.0)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float | None]:
        self.model.eval()
        return evaluation_metrics(evaluation_sums(self.model(self.x, self.ops), self.y, self.masks))

    def predicted_bytes(self) -> None:
        return None

    def last_logits(self) -> tuple[Tensor, Tensor] | None:
        return None if self._last_logits is None else (self._rows, self._last_logits)
