"""Mode ``graph``: exact graph parallelism (DESIGN.md 4).

Worker p owns chunk p of a P-way partition and ALL L layers for those rows. Per layer
it needs the layer input of its halo rows, which other workers own:

* layer 1 reads ``encode(X)``; X is replicated on every worker, so each worker
  encodes its halo rows itself and nothing crosses workers (DESIGN.md 4: "Layer 1
  needs no exchange when X is replicated");
* layers 2..L: before layer l every worker sends the rows of its layer-(l-1) output
  that others read (:func:`gnnpipe.partition.halo_send_lists`) and receives its own
  halo rows; in backward the gradients of those halo rows travel back to their owners,
  who add them to the gradients of their own rows (:class:`_HaloExchange`).

Weight gradients are summed over the workers (one bucketed ring all-reduce) and every
worker takes the same Adam step on its full replica, so with dropout 0 the run equals
``single`` up to float re-association: same logits, loss and gradients. (With dropout
> 0 a halo row of layer l is dropped out by its reader with a mask of its own, the
same distribution as in ``single`` but not the same sample; see
:mod:`gnnpipe.models.layers`.)

Volume (DESIGN.md 7, total over all workers, element size ``e`` of the dtype):
``halo_rows = halo_gradients = e * M * sum_{l=2..L} d_l`` (``d_l`` the input width of
layer l: H for every model), the "less the first term" form because X is replicated,
and ``weight_allreduce = e * 2 (P-1) |theta|``: what the ring of
:meth:`Comm.all_reduce_sum` actually sends. ``M`` = sum of the halo sizes.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
from torch import Tensor

from gnnpipe.engine.comm import KINDS
from gnnpipe.engine.context import EpochStats, ReplicaState, WorkerContext, sync
from gnnpipe.models.layers import INPUT_DROPPED, dropout_grad_in_place_, dropout_in_place_
from gnnpipe.models.objective import evaluation_metrics, evaluation_sums, training_loss

__all__ = ["GraphRunner", "HaloExchanger", "halo_exchange", "predicted_graph_bytes"]

logger = logging.getLogger(__name__)


class HaloExchanger:
    """Which own rows this worker sends to whom, and where received rows go.

    Built once from the chunk plans. Chunks are contiguous and a halo is sorted by
    ``global_nid``, so the halo rows owned by chunk q form one contiguous slice of this
    chunk's halo, and chunk p's send list to q is, in order, that slice of q's halo.

    The layer input :meth:`local_rows` returns lives in one buffer per width and
    dtype, kept from call to call (:attr:`buffers`), so that the halo rows are received
    into pages the worker has touched before. A fresh ``[num_local, d]`` tensor per
    layer was a new mapping each time (over glibc's mmap threshold on large graphs),
    faulted in page by page while the peer's rows arrived: on the 200,000-vertex GCN-32
    (2 workers, 71,000 halo rows) a forward exchange took 171-204 ms on average after both
    workers had posted it, a backward exchange of the same bytes (received into
    heap-served memory) 29-30 ms. A caller must not keep the result past the next call: the graph
    runner gives a layer that saves it its own copy (:meth:`GraphRunner._forward`).

    Shapes: ``send_index[q]`` int64 [n_pq] (own local_nid sent to q);
    ``recv_slice[q]`` a slice of the halo rows [num_halo]; a buffer [num_local, d].
    """

    def __init__(self, plans: Any, rank: int, comm: Any, device: torch.device) -> None:
        from gnnpipe.partition import halo_send_lists

        self.rank = rank
        self.comm = comm
        plan = plans[rank]
        self.num_own = plan.num_own
        self.num_halo = plan.num_halo
        send = halo_send_lists(plans)[rank]
        self.send_index: dict[int, Tensor] = {
            q: (send[q] - plan.row_start).to(device)
            for q in range(len(plans)) if q != rank and send[q].numel()
        }
        self.buffers: dict[tuple[int, torch.dtype], Tensor] = {}
        counts = torch.bincount(plan.halo_chunk, minlength=len(plans)).tolist()
        self.recv_slice: dict[int, slice] = {}
        start = 0
        for q, n in enumerate(counts):
            if n:
                self.recv_slice[q] = slice(start, start + n)
            start += n

    def local_rows(self, h_own: Tensor, kind: str) -> Tensor:
        """``cat(h_own, halo rows)``: sends the rows others read, receives this chunk's
        halo straight into the tail of the result (no second copy). The result is the
        kept buffer of its width (class docstring), valid until the next call.

        Shapes: h_own [num_own, d] -> [num_local, d]."""
        d = h_own.shape[1]
        h_local = self.buffers.get((d, h_own.dtype))
        if h_local is None:
            h_local = torch.empty(self.num_own + self.num_halo, d, dtype=h_own.dtype, device=h_own.device)
            self.buffers[(d, h_own.dtype)] = h_local
        h_local[: self.num_own] = h_own
        halo = h_local[self.num_own:]
        sends = {q: h_own.index_select(0, idx) for q, idx in self.send_index.items()}
        recvs = {q: halo[s] for q, s in self.recv_slice.items()}
        self.comm.exchange(sends, recvs, kind)
        return h_local.detach()  # a tensor of its own over the buffer: autograd's output

    def holds(self, t: Tensor) -> bool:
        """Whether ``t`` lies in one of the kept buffers."""
        ptr = t.untyped_storage().data_ptr()
        return any(ptr == b.untyped_storage().data_ptr() for b in self.buffers.values())

    def own_gradients(self, grad_local: Tensor, kind: str) -> Tensor:
        """Backward of :meth:`local_rows`: send the halo-row gradients to their owners
        and add what the readers of this worker's rows sent back to the own-row
        gradient.

        Shapes: grad_local [num_local, d] -> [num_own, d]."""
        d = grad_local.shape[1]
        grad_local = grad_local.contiguous()
        grad_halo = grad_local[self.num_own:]
        sends = {q: grad_halo[s] for q, s in self.recv_slice.items()}
        recvs = {q: torch.empty(idx.numel(), d, dtype=grad_local.dtype, device=grad_local.device)
                 for q, idx in self.send_index.items()}
        self.comm.exchange(sends, recvs, kind)
        grad_own = grad_local[: self.num_own].clone()
        for q, g in recvs.items():
            # A row read by several workers gets the sum of their gradients.
            grad_own.index_add_(0, self.send_index[q], g)
        return grad_own


class _HaloExchange(torch.autograd.Function):
    """``h_local = local_rows(h_own)`` forward; halo gradients back to their owners in
    backward.

    Every worker runs the same layers in the same order, so every worker reaches the
    backward of the same exchange in the same order and the p2p batches pair up.

    ``p > 0``: the next layer's input dropout (a layer that ``drops_input_rows``) is
    applied here, in place on the fresh ``h_local`` and on its gradient, drawn as the
    layer would draw it; the layer is then called with ``INPUT_DROPPED``. Applied by
    the layer it was a second ``[num_local, d]`` tensor each way.
    """

    @staticmethod
    def forward(ctx: Any, h_own: Tensor, exchanger: HaloExchanger, p: float) -> Tensor:  # type: ignore[override]
        ctx.exchanger, ctx.p = exchanger, p
        h_local = exchanger.local_rows(h_own.detach(), "halo_rows")
        if p > 0:
            dropout_in_place_(ctx, h_local, p)
        return h_local

    @staticmethod
    def backward(ctx: Any, grad_local: Tensor) -> tuple[Tensor, None, None]:  # type: ignore[override]
        if ctx.p > 0:
            grad_local = dropout_grad_in_place_(ctx, grad_local)
        return ctx.exchanger.own_gradients(grad_local, "halo_gradients"), None, None


def halo_exchange(h_own: Tensor, exchanger: Any, layer: Any) -> tuple[Tensor, Any]:
    """``(h_local, keep)`` for ``layer(h_local, ops, h0, keep)`` in training: the
    exchanged rows, with the layer's input dropout applied in place where the layer
    allows it (``keep`` is then ``INPUT_DROPPED``, else None: the layer drops).

    Shapes: h_own [num_own, d] -> h_local [num_local, d]."""
    p = layer.in_place_dropout
    return _HaloExchange.apply(h_own, exchanger, p), (INPUT_DROPPED if p > 0 else None)


def _unpack(t: Tensor) -> Tensor:
    return t


def predicted_graph_bytes(model: Any, M: int, world_size: int, element_size: int = 4) -> dict[str, int]:
    """DESIGN.md 7 for one training epoch of ``graph`` mode, total over all workers.

    ``model`` gives the layer input widths (``model.layer_dims``) and ``|theta|``.
    """
    out = dict.fromkeys(KINDS, 0)
    widths = sum(int(d) for d in model.layer_dims[1:model.num_layers])  # inputs of layers 2..L
    out["halo_rows"] = out["halo_gradients"] = element_size * int(M) * widths
    numel = sum(p.numel() for p in model.parameters())
    out["weight_allreduce"] = element_size * 2 * (world_size - 1) * numel
    return out


class GraphRunner(ReplicaState):
    """The ``graph`` mode runner (:class:`gnnpipe.engine.context.ModeRunner`).

    Rank p owns chunk p (``config.parallel.chunks == world_size``) and a full replica
    of the model.
    """

    def __init__(self, ctx: WorkerContext) -> None:
        from gnnpipe.kernels import ChunkOps
        from gnnpipe.models.model import model_input
        from gnnpipe.models.optim import model_optimizer

        cfg = ctx.config
        chunked = ctx.chunked
        self.ctx = ctx
        self.comm = ctx.comm
        self.device = ctx.device
        self.rank = ctx.rank
        plan = chunked.plans[ctx.rank]
        self.plan = plan
        g = chunked.graph
        self.ops = ChunkOps.build(plan, device=ctx.device, dtype=ctx.dtype, backend=cfg.parallel.kernel_backend,
                                  reduces=ctx.model.reduces)
        self.exchanger = HaloExchanger(chunked.plans, ctx.rank, ctx.comm, ctx.device)
        # X is replicated: this worker reads the features of its own AND halo rows.
        self.x_local = model_input(ctx.model, g.features[plan.local_global_nid], device=ctx.device,
                                   dtype=ctx.dtype)
        own = slice(plan.row_start, plan.row_end)
        self.labels = g.labels[own].to(ctx.device)
        self.masks = tuple(m[own].to(ctx.device) for m in (g.train_mask, g.val_mask, g.test_mask))
        self.num_train = int(g.train_mask.sum())
        self.model = ctx.model.to(device=ctx.device, dtype=ctx.dtype)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = model_optimizer(self.model, cfg.train)
        self.element_size = torch.empty(0, dtype=ctx.dtype).element_size()
        self._last_logits: Tensor | None = None
        logger.info("graph mode: chunk %d rows [%d, %d), halo %d, sends to %d workers",
                    plan.chunk_idx, plan.row_start, plan.row_end, plan.num_halo,
                    len(self.exchanger.send_index))

    # ------------------------------------------------------------------ forward
    def _forward(self, training: bool) -> Tensor:
        """Logits of the own rows; halo exchanges counted as training or evaluation.

        Shapes: -> [num_own, C]."""
        model, ops = self.model, self.ops
        h0_local = model.encode(self.x_local)             # [num_local, H]: no exchange
        h0 = h0_local[: ops.num_own] if model.needs_h0 else None
        h_own = model.layers[0](h0_local, ops, h0)
        # Each layer's input is the exchanger's kept buffer, which the next layer's
        # exchange overwrites: whatever a layer saves of it for its backward (SAGE its
        # own rows, a layer that projects first all of them) gets a copy of its own.
        with torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack):
            for layer in model.layers[1:]:
                keep = None
                if training:
                    h_local, keep = halo_exchange(h_own, self.exchanger, layer)
                else:
                    h_local = self.exchanger.local_rows(h_own, "evaluation")
                h_own = layer(h_local, ops, h0, keep)
        return model.decode(h_own)

    def _pack(self, t: Tensor) -> Tensor:
        return t.clone() if self.exchanger.holds(t) else t

    # ------------------------------------------------------------------ protocol
    def prepare(self) -> dict[str, Any]:
        """Nothing to start: graph mode keeps no history."""
        return {"bytes": self.comm.take_counters(), "time_s": 0.0}

    def train_epoch(self, epoch: int, continues: bool = False) -> EpochStats:
        """One forward/backward over the whole graph, summed gradients, one step."""
        # The epoch loop has taken the counters of whatever came before (evaluation).
        sync(self.device)
        t0 = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=False)
        logits = self._forward(training=True)
        loss = training_loss(logits, self.labels, self.masks[0], self.num_train)
        loss.backward()
        # Every worker must all-reduce the same bucket: a parameter that no own row
        # touched still contributes its zero gradient.
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        self.comm.all_reduce_sum(grads, "weight_allreduce")
        for p, g in zip(self.params, grads):
            p.grad = g
        self.optimizer.step()
        self._last_logits = logits.detach()
        # The losses of the parts add up to the full-graph loss (DESIGN.md 3).
        (total_loss,) = self.comm.all_reduce_control([float(loss.detach())])
        sync(self.device)
        wall = time.perf_counter() - t0
        wait = self.comm.take_wait_time()
        return EpochStats(loss=total_loss, bytes_sent=self.comm.take_counters(),
                          compute_s=max(0.0, wall - wait), comm_wait_s=wait)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Exact full-graph inference in eval mode (fresh halo rows at every layer)."""
        self.model.eval()
        sums = evaluation_sums(self._forward(training=False), self.labels, self.masks)
        return evaluation_metrics(self.comm.all_reduce_control(sums))

    def predicted_bytes(self) -> dict[str, int]:
        return predicted_graph_bytes(self.model, self.ctx.chunked.stats.M, self.ctx.world_size,
                                     self.element_size)

    def last_logits(self) -> tuple[Tensor, Tensor] | None:
        if self._last_logits is None:
            return None
        return self.plan.own_global_nid, self._last_logits
