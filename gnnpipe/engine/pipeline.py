"""Mode ``pipeline``: GNNPipe layer pipelining (DESIGN.md 5), and the executor that
hybrid mode (DESIGN.md 6, :mod:`gnnpipe.engine.hybrid`) shares.

Rank ``way * S + stage`` runs stage ``stage`` (a run of consecutive layers; encode on
stage 0, classifier and loss on the last stage) for the chunks of way ``way``
(pipeline mode: one way, all chunks). Each epoch it executes its program of a
:class:`~gnnpipe.engine.schedule.PipelineSchedule` (a thin executor: one method per
action kind). The semantics are the simulator's (:mod:`gnnpipe.engine.simulator`):

* **Buffers.** For each of its layers ``l >= 2`` the stage keeps ``B_l`` [n_rows, d]
  of that layer's input and a gradient buffer ``G_l`` [n_rows, d], over the way's row
  space (its block's rows, then the other ways' rows that its chunks read; all N rows
  in pipeline mode). ``B_l`` starts the epoch as
  the snapshot ``S_l`` (technique 2: ``S_l`` is refreshed from ``B_l`` after every
  R-th epoch; with R = 1 ``S_l`` *is* ``B_l``, no copy). Layer 1 of stage 0 reads
  ``h0 = encode(X)``, computed for all rows at the start of the epoch, so it needs no
  buffer and its reads are exact (the gradient of encode flows through every read).
* **Forward** of chunk ``k`` at step ``t``: its input rows are written into ``B_l``;
  the layer reads ``cat(B_l[own], B_l[halo])``. A halo row of chunk ``j`` is FRESH
  when ``step(j) <= t`` (written earlier this epoch; in hybrid also by another way at
  the same step, exchanged before the layer) and STALE otherwise.
* **Backward** of chunk ``k`` (reverse order), layer by layer: one autograd call per
  layer gives the gradient of ``h_local``; its fresh halo part is added to ``G_l`` of
  the source rows (technique 3 multiplies exactly this part by 2), its stale part is
  dropped (stale rows are constants); the gradient of the layer input of ``k`` is its
  own part plus ``G_l[rows of k]``, complete because every chunk that read ``k``
  freshly came later in the order and has already done its backward.
* **Step.** Weight gradients accumulate over the chunks; stage 0 back-propagates the
  summed ``h0`` gradient through encode once; one Adam step (hybrid: after an
  all-reduce over the ways of the stage).

Transfers between stages are non-blocking isend/irecv with the next chunk's receive
posted ahead (see the schedule); there is no barrier per pipeline step. With GCNII the
chunk's ``h0`` rows travel with its activations (and their gradient with the
activation gradient), concatenated in one message and counted as stage traffic.

Time split of :class:`EpochStats`: ``bubble_s`` is the pipeline fill/drain: the wait
for the first forward input, the wait for the first backward gradient (the turn from
forward to backward) and the wait at the end of the epoch for the last stage's loss;
every other blocked wait is ``comm_wait_s``; ``compute_s`` is the rest of the epoch.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
from torch import Tensor

from gnnpipe.engine import schedule as sch
from gnnpipe.engine.context import EpochStats, WorkerContext
from gnnpipe.errors import ConfigError
from gnnpipe.trainer.evaluate import evaluation_metrics, evaluation_sums, training_loss

__all__ = ["PipelineRunner", "StagePipeline", "predicted_pipeline_bytes", "stage_layer_ranges"]

logger = logging.getLogger(__name__)

_TAG_FWD, _TAG_BWD = 11, 12


def stage_layer_ranges(split: tuple[int, ...]) -> list[tuple[int, int]]:
    """``[(a, b)]`` per stage: stage s runs ``model.layers[a:b]`` (0-based)."""
    out, a = [], 0
    for n in split:
        out.append((a, a + int(n)))
        a += int(n)
    return out


def predicted_pipeline_bytes(model: Any, num_nodes: int, split: tuple[int, ...],
                             element_size: int = 4) -> dict[str, int]:
    """DESIGN.md 7 for one training epoch of pipeline mode, total over the ranks.

    ``stage_activations = stage_gradients = e * N * sum_boundaries width``, where the
    boundary after stage s carries the input width of the next layer
    (``layer_dims[b_s]``, H for every model) plus ``h0_dim`` for GCNII: i.e.
    ``4 (S-1) N H`` each direction, twice that with h0. Independent of depth and of C.
    """
    from gnnpipe.engine.comm import KINDS

    out = dict.fromkeys(KINDS, 0)
    widths = 0
    for a, b in stage_layer_ranges(split)[:-1]:
        widths += int(model.layer_dims[b]) + (int(model.h0_dim) if model.needs_h0 else 0)
    out["stage_activations"] = out["stage_gradients"] = element_size * int(num_nodes) * widths
    return out


class _Wait:
    """Blocked-time bookkeeping: every wait is either bubble or comm wait."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.bubble = 0.0
        self.comm_s = 0.0

    def wait(self, handle: Any, bubble: bool = False) -> None:
        if handle is None:
            return
        t0 = time.perf_counter()
        self.comm.wait(handle)
        dt = time.perf_counter() - t0
        if bubble:
            self.bubble += dt
        else:
            self.comm_s += dt

    def timed(self, fn: Any, *args: Any, bubble: bool = False, **kw: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*args, **kw)
        dt = time.perf_counter() - t0
        if bubble:
            self.bubble += dt
        else:
            self.comm_s += dt
        return out


def _grad(t: Tensor) -> Tensor:
    return t.grad if t.grad is not None else torch.zeros_like(t)


class _GatherRows(torch.autograd.Function):
    """``h_local = buf[local_ids]`` as an autograd node whose gradient lands in a sink.

    The executor needs the gradient of each layer's gathered input ``h_local`` (its
    halo part goes to ``G_l``, its own part down the stage). Making ``h_local`` a leaf
    would keep every gathered ``[n_local, d]`` tensor alive from a chunk's forward to
    its backward only to read ``.grad``: the largest state of a pipelined stage, since
    ``n_local`` (own + halo rows) is 3.4x the own rows at C = 8 on the synthetic
    default. Through this node the gathered rows live only as long as the layer itself
    saves them (a GCN or GCNII layer saves none of them), and backward stops here: the
    scalar ``token`` is the leaf, ``buf`` is a constant.

    Shapes: buf [N, d]; local_ids [n_local]; output and the sunk gradient [n_local, d].
    """

    @staticmethod
    def forward(ctx: Any, token: Tensor, buf: Tensor, local_ids: Tensor, sink: list) -> Tensor:  # type: ignore[override]
        ctx.sink = sink
        return buf.index_select(0, local_ids)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:  # type: ignore[override]
        ctx.sink.append(grad)
        return torch.zeros((), dtype=grad.dtype, device=grad.device), None, None, None


def _gather_rows(buf: Tensor, local_ids: Tensor) -> tuple[Tensor, list]:
    """``(h_local, sink)``: see :class:`_GatherRows`; after the backward through the
    layer, ``sink`` holds the gradient of ``h_local`` (empty when none flowed)."""
    sink: list = []
    token = torch.zeros((), dtype=buf.dtype, device=buf.device, requires_grad=True)
    return _GatherRows.apply(token, buf, local_ids, sink), sink


def _sunk(sink: list, shape: tuple[int, int], like: Tensor) -> Tensor:
    """The gradient in ``sink`` (autograd sums every use of ``h_local`` before calling
    the node's backward once), or zeros when none flowed."""
    return sink[0] if sink else torch.zeros(shape, dtype=like.dtype, device=like.device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StagePipeline:
    """The executor of one (way, stage): pipeline mode is ``ways == 1``.

    Implements :class:`gnnpipe.engine.context.ModeRunner`.
    """

    def __init__(self, ctx: WorkerContext, ways: int = 1) -> None:
        from gnnpipe.kernels import ChunkOps
        from gnnpipe.trainer.optim import build_optimizer

        cfg = ctx.config
        pc = cfg.parallel
        self.ctx = ctx
        self.comm = ctx.comm
        self.device = ctx.device
        self.dtype = ctx.dtype
        self.W = int(ways)
        if ctx.world_size % self.W:
            raise ConfigError(f"parallel.ways: expected a divisor of workers={ctx.world_size}, found {self.W}")
        self.S = ctx.world_size // self.W
        self.rank = ctx.rank
        self.way, self.stage = divmod(ctx.rank, self.S)
        model = ctx.model
        self.model = model
        self.L = len(model.layers)
        self.split = tuple(pc.layer_split(self.L))
        if len(self.split) != self.S or sum(self.split) != self.L:
            raise ConfigError(f"parallel.stage_split: expected {self.S} stages summing to {self.L} layers, "
                              f"found {list(self.split)}")
        self.a, self.b = stage_layer_ranges(self.split)[self.stage]
        self.first = self.stage == 0
        self.last = self.stage == self.S - 1
        self.needs_h0 = bool(model.needs_h0)
        self.h0_dim = int(model.h0_dim)
        self.dims = [int(d) for d in model.layer_dims]
        self.buffered = [l for l in range(self.a + 1, self.b + 1) if l >= 2]  # 1-based layers with B_l

        # Own only what this stage runs; move just that to the device.
        for i in range(self.a, self.b):
            model.layers[i].to(device=self.device, dtype=self.dtype)
        if self.first:
            model.encode.to(device=self.device, dtype=self.dtype)
        if self.last:
            model.decode.to(device=self.device, dtype=self.dtype)
        self._owned = {n: p for n, p in model.named_parameters() if self._owns(n)}
        layer_ids = {id(p) for i in range(self.a, self.b) for p in model.layers[i].parameters()}
        owned = list(self._owned.values())
        self.optimizer = build_optimizer(cfg.train, [p for p in owned if id(p) in layer_ids],
                                         [p for p in owned if id(p) not in layer_ids])

        chunked = ctx.chunked
        g = chunked.graph
        self.N = g.num_nodes
        self.plans = chunked.plans
        self.C = len(self.plans)
        self.blocks = sch.way_blocks(self.C, self.W)
        self.my_chunks = self.blocks[self.way]
        self.way_of = torch.empty(self.C, dtype=torch.int64)
        for w, blk in enumerate(self.blocks):
            self.way_of[list(blk)] = w
        self.ops = {k: ChunkOps.build(self.plans[k], device=self.device, dtype=self.dtype,
                                      backend=pc.kernel_backend) for k in self.my_chunks}
        self.block_rows = {w: (self.plans[blk[0]].row_start, self.plans[blk[-1]].row_end)
                           for w, blk in enumerate(self.blocks)}
        self._build_row_space()
        row_of = self.row_of
        self.local_ids = {k: row_of[self.plans[k].local_global_nid].to(self.device) for k in self.my_chunks}
        self.halo_ids = {k: row_of[self.plans[k].halo_global_nid].to(self.device) for k in self.my_chunks}
        self.own = {k: slice(self.plans[k].row_start - self.r0, self.plans[k].row_end - self.r0)
                    for k in self.my_chunks}
        self.halo_chunk = {k: self.plans[k].halo_chunk.to(self.device) for k in self.my_chunks}
        if self.first:
            self.x = self._rows_of(g.features).to(device=self.device, dtype=self.dtype)
        if self.last:
            self.y = self._rows_of(g.labels).to(self.device)
            self.masks = tuple(self._rows_of(m).to(self.device) for m in (g.train_mask, g.val_mask, g.test_mask))
        self.num_train = int(g.train_mask.sum())
        self._build_exchange_lists()

        self.period = int(pc.snapshot_period)
        self.unbiased = bool(pc.unbiased_scale)
        self.shuffle = bool(pc.shuffle)
        self.seed = int(cfg.train.seed)
        self.history_init = pc.history_init
        # Buffers (allocated here, filled by the history init at the first epoch).
        self.B = {l: torch.zeros(self.n_rows, self.dims[l - 1], device=self.device, dtype=self.dtype)
                  for l in self.buffered}
        self.snap = self.B if self.period == 1 else {l: b.clone() for l, b in self.B.items()}
        self.G = {l: torch.zeros_like(b) for l, b in self.B.items()}
        self.epochs_done = 0
        self._initialized = False
        self.element_size = torch.empty(0, dtype=self.dtype).element_size()
        self._last_logits: tuple[Tensor, Tensor] | None = None
        self.untracked_bytes: dict[str, int] = {}
        logger.info("rank %d: way %d/%d stage %d/%d, layers %d..%d, %d chunks, buffers %s",
                    self.rank, self.way, self.W, self.stage, self.S, self.a + 1, self.b,
                    len(self.my_chunks), self.buffered)

    # ---------------------------------------------------------------- helpers
    def _owns(self, name: str) -> bool:
        if name.startswith("encode."):
            return self.first
        if name.startswith("decode."):
            return self.last
        i = int(name.split(".")[1])
        return self.a <= i < self.b

    def _peer(self, way: int) -> int:
        return way * self.S + self.stage

    def _build_row_space(self) -> None:
        """The way's rows: row ``r`` of ``B_l``, ``G_l``, ``h0`` and the evaluation
        tensors is global row ``way_rows[r]``: first the way's block (contiguous
        global rows ``r0..r1``), then the rows of other ways' blocks that its chunks
        read, sorted. A way never touches any other row, so its buffers need no more
        (hybrid: about N / W + halo rows instead of N per layer on every rank).
        Pipeline mode (one way): the identity, all N rows in order.

        Shapes: way_rows int64 [n_rows]; row_of int64 [N] (-1 for rows not held).
        """
        r0, r1 = self.block_rows[self.way]
        self.r0, self.n_block = r0, r1 - r0
        halo = torch.cat([self.plans[k].halo_global_nid for k in self.my_chunks]) if self.my_chunks \
            else torch.empty(0, dtype=torch.int64)
        foreign = torch.unique(halo[(halo < r0) | (halo >= r1)])  # sorted
        self.way_rows = torch.cat([torch.arange(r0, r1), foreign])
        self.n_rows = int(self.way_rows.numel())
        self.identity_rows = bool(torch.equal(self.way_rows, torch.arange(self.N)))
        self.row_of = torch.full((self.N,), -1, dtype=torch.int64)
        self.row_of[self.way_rows] = torch.arange(self.n_rows)

    def _rows_of(self, t: Tensor) -> Tensor:
        """The way's rows of a per-vertex tensor (global row order)."""
        return t if self.identity_rows else t.index_select(0, self.way_rows)

    def _build_exchange_lists(self) -> None:
        """Hybrid exchange lists, in this way's row space, on the device:
        ``send_rows[k][w]`` (k a chunk of this way): the rows of chunk k that chunks
        of way w read; ``recv_rows[k]`` (k a chunk of another way): the rows of chunk
        k that this way's chunks read. Summed over chunks and ways, either is ``M_W``,
        the rows exchanged per layer."""
        self.send_rows: dict[int, dict[int, Tensor]] = {}
        self.recv_rows: dict[int, Tensor] = {}
        if self.W == 1:
            return
        reads = torch.zeros(self.W, self.N, dtype=torch.bool)
        for k, p in enumerate(self.plans):
            reads[int(self.way_of[k]), p.halo_global_nid] = True
        for k, p in enumerate(self.plans):
            wk = int(self.way_of[k])
            rows = torch.arange(p.row_start, p.row_end)
            if wk == self.way:
                self.send_rows[k] = {w: self.row_of[rows[reads[w, p.row_start:p.row_end]]].to(self.device)
                                     for w in range(self.W) if w != wk}
            else:
                mine = self.row_of[rows[reads[self.way, p.row_start:p.row_end]]]
                assert bool((mine >= 0).all()), "a row this way reads is outside its row space"
                self.recv_rows[k] = mine.to(self.device)

    def _chunk_at(self, way: int, t: int) -> int | None:
        o = self.orders[way]
        return o[t] if t < len(o) else None

    def _exchange_rows(self, buf: Tensor, t: int, my_chunk: int | None, kind: str) -> None:
        """Hybrid forward exchange at step t: send the rows of my chunk that each other
        way reads, receive theirs into ``buf`` (B_l, or the evaluation tensor)."""
        sends, recvs, places = {}, {}, []
        for w in range(self.W):
            if w == self.way:
                continue
            if my_chunk is not None:
                sends[self._peer(w)] = buf.index_select(0, self.send_rows[my_chunk][w])
            k2 = self._chunk_at(w, t)
            if k2 is not None:
                rows = self.recv_rows[k2]
                r = torch.empty(rows.numel(), buf.shape[1], device=buf.device, dtype=buf.dtype)
                recvs[self._peer(w)] = r
                places.append((rows, r))
        self.timer.timed(self.comm.exchange, sends, recvs, kind)
        for rows, r in places:
            buf.index_copy_(0, rows, r)

    def _exchange_grads(self, G: Tensor, t: int, my_chunk: int | None) -> None:
        """Hybrid backward exchange at step t: send to each other way the gradient that
        my fresh reads gave to the rows of its chunk at step t (complete: my reads at
        later steps were back-propagated already, reads at step t just now); add what
        the other ways send for my chunk's rows."""
        sends, recvs = {}, {}
        for w in range(self.W):
            if w == self.way:
                continue
            k2 = self._chunk_at(w, t)
            if k2 is not None:
                sends[self._peer(w)] = G.index_select(0, self.recv_rows[k2])
            if my_chunk is not None:
                rows = self.send_rows[my_chunk][w]
                recvs[self._peer(w)] = torch.empty(rows.numel(), G.shape[1], device=G.device, dtype=G.dtype)
        self.timer.timed(self.comm.exchange, sends, recvs, "halo_gradients")
        if my_chunk is not None:
            for w in range(self.W):
                if w != self.way:
                    G.index_add_(0, self.send_rows[my_chunk][w], recvs[self._peer(w)])

    # -------------------------------------------------------- exact full forward
    @torch.no_grad()
    def _full_forward(self, capture: bool) -> Tensor | None:
        """Exact full-graph inference of this way's rows, layer by layer (no stale
        reads): stage s receives the way's layer input from s-1, computes its layers
        over the way's chunks (hybrid: exchanging the rows other ways read before every
        layer >= 2), and sends on. Every transfer is kind ``evaluation``. With
        ``capture`` the exact layer inputs are stored as the snapshots S_l. Returns the
        logits of the way's rows on the last stage."""
        model = self.model
        was = model.training
        model.eval()
        try:
            nb = self.n_block  # the way's block: rows [0, nb) of its row space
            d_in = self.dims[self.a]
            if self.first:
                h0 = model.encode(self.x)
                h = h0.clone()
            else:
                width = d_in + (self.h0_dim if self.needs_h0 else 0)
                buf = torch.empty(nb, width, device=self.device, dtype=self.dtype)
                if buf.numel():
                    self.timer.wait(self.comm.irecv(buf, self.rank - 1, "evaluation", _TAG_FWD))
                h = torch.zeros(self.n_rows, d_in, device=self.device, dtype=self.dtype)
                h[:nb] = buf[:, :d_in]
                h0 = None
                if self.needs_h0:
                    h0 = torch.zeros(self.n_rows, self.h0_dim, device=self.device, dtype=self.dtype)
                    h0[:nb] = buf[:, d_in:]
            for i in range(self.a, self.b):
                l = i + 1
                layer = model.layers[i]
                if l >= 2 and self.W > 1:
                    # All rows of the way's block that other ways read, at once.
                    self._exchange_block(h)
                if capture and l >= 2:
                    self.snap[l].copy_(h)
                out = torch.zeros(self.n_rows, self.dims[l], device=self.device, dtype=self.dtype)
                for k in self.my_chunks:
                    own = self.own[k]
                    out[own] = layer(h.index_select(0, self.local_ids[k]), self.ops[k],
                                     h0[own] if layer.needs_h0 else None)
                h = out
            if not self.last:
                msg = h[:nb]
                if self.needs_h0:
                    msg = torch.cat([msg, h0[:nb]], dim=1)
                if msg.numel():
                    self.timer.wait(self.comm.isend(msg, self.rank + 1, "evaluation", _TAG_FWD))
                return None
            return model.decode(h[:nb])
        finally:
            model.train(was)

    def _exchange_block(self, h: Tensor) -> None:
        sends, recvs, places = {}, {}, []
        for w in range(self.W):
            if w == self.way:
                continue
            mine = [self.send_rows[k][w] for k in self.blocks[self.way]]
            sends[self._peer(w)] = h.index_select(0, torch.cat(mine))
            theirs = torch.cat([self.recv_rows[k] for k in self.blocks[w]])
            r = torch.empty(theirs.numel(), h.shape[1], device=h.device, dtype=h.dtype)
            recvs[self._peer(w)] = r
            places.append((theirs, r))
        self.timer.timed(self.comm.exchange, sends, recvs, "evaluation")
        for rows, r in places:
            h.index_copy_(0, rows, r)

    def _init_history(self) -> None:
        if self.history_init == "exact":
            self._full_forward(capture=True)
            if self.period != 1:
                for l in self.buffered:
                    self.B[l].copy_(self.snap[l])
        self._initialized = True

    # ---------------------------------------------------------------- epoch
    def train_epoch(self, epoch: int) -> EpochStats:
        """One pipelined epoch (DESIGN.md 5 / 6) and one optimizer step."""
        # Whatever was sent since the last epoch (evaluation) is not this epoch's.
        self._stash(self.comm.take_counters())
        self.comm.take_wait_time()
        self.timer = _Wait(self.comm)
        if not self._initialized:
            self._init_history()
            self._stash(self.comm.take_counters())  # the exact history init: "evaluation" bytes
            self.timer = _Wait(self.comm)
        _sync(self.device)
        t_start = time.perf_counter()
        model = self.model
        model.train()
        self.optimizer.zero_grad(set_to_none=True)
        self.orders = sch.way_orders(self.blocks, epoch, self.seed, self.shuffle)
        order = self.orders[self.way]
        steps = max(len(o) for o in self.orders)
        step_of = torch.empty(self.C, dtype=torch.int64)
        for o in self.orders:
            for t, k in enumerate(o):
                step_of[k] = t
        self.step_of = step_of.to(self.device)
        schedule = sch.build_schedule(self.S, self.C, order, num_steps=steps)
        if self.epochs_done == 0 and logger.isEnabledFor(logging.DEBUG):
            logger.debug("rank %d: schedule of the first epoch\n%s", self.rank, schedule)

        if self.period != 1:
            for l in self.buffered:
                self.B[l].copy_(self.snap[l])
        for G in self.G.values():
            G.zero_()
        if self.first:
            self.h0_full = model.encode(self.x)
            self.h0_det = self.h0_full.detach()
            self.h0_grad = torch.zeros_like(self.h0_det)
        self.recv_f: dict[int, tuple[Any, Tensor]] = {}
        self.recv_b: dict[int, tuple[Any, Tensor]] = {}
        self.sends: list[Any] = []
        self.saved: dict[int, dict[str, Any]] = {}
        self.loss_sum = 0.0
        self.logits: dict[int, Tensor] = {}
        self.first_fwd_wait = True
        self.first_bwd_wait = True

        for action in schedule.for_stage(self.stage):
            self._execute(action)

        if self.last:
            rows = torch.cat([self.plans[k].own_global_nid for k in sorted(self.logits)]) \
                if self.logits else torch.empty(0, dtype=torch.int64)
            logits = torch.cat([self.logits[k] for k in sorted(self.logits)]) if self.logits else \
                torch.empty(0, self.model.num_classes, device=self.device, dtype=self.dtype)
            self._last_logits = (rows, logits)
        # The chunk losses add up to the global loss (DESIGN.md 3); waiting for the last
        # stage's total is the pipeline drain.
        (loss,) = self.timer.timed(self.comm.all_reduce_control, [self.loss_sum if self.last else 0.0],
                                   bubble=True)
        # Technique 2: refresh the snapshot every R epochs (R = 1: B_l is the snapshot).
        if self.period != 1 and (self.epochs_done + 1) % self.period == 0:
            for l in self.buffered:
                self.snap[l].copy_(self.B[l])
        self.epochs_done += 1
        self.saved = {}
        _sync(self.device)
        wall = time.perf_counter() - t_start
        self.comm.take_wait_time()
        return EpochStats(loss=loss, bytes_sent=self.comm.take_counters(),
                          compute_s=max(0.0, wall - self.timer.comm_s - self.timer.bubble),
                          comm_wait_s=self.timer.comm_s, bubble_s=self.timer.bubble)

    def _stash(self, counters: dict[str, int]) -> None:
        for k, v in counters.items():
            self.untracked_bytes[k] = self.untracked_bytes.get(k, 0) + v

    # ------------------------------------------------------------- the actions
    def _execute(self, a: Any) -> None:
        if isinstance(a, sch.PostRecvForward):
            width = self.dims[self.a] + (self.h0_dim if self.needs_h0 else 0)
            buf = torch.empty(self.plans[a.chunk].num_own, width, device=self.device, dtype=self.dtype)
            h = self.comm.irecv(buf, self.rank - 1, "stage_activations", _TAG_FWD) if buf.numel() else None
            self.recv_f[a.chunk] = (h, buf)
        elif isinstance(a, sch.WaitRecvForward):
            self.timer.wait(self.recv_f[a.chunk][0], bubble=self.first_fwd_wait)
            self.first_fwd_wait = False
        elif isinstance(a, sch.Forward):
            self._forward(a.chunk, a.step)
        elif isinstance(a, sch.SendForward):
            msg = self.saved[a.chunk]["send"]
            if msg.numel():
                self.sends.append(self.comm.isend(msg, self.rank + 1, "stage_activations", _TAG_FWD))
        elif isinstance(a, sch.PostRecvBackward):
            width = self.dims[self.b] + (self.h0_dim if self.needs_h0 else 0)
            buf = torch.empty(self.plans[a.chunk].num_own, width, device=self.device, dtype=self.dtype)
            h = self.comm.irecv(buf, self.rank + 1, "stage_gradients", _TAG_BWD) if buf.numel() else None
            self.recv_b[a.chunk] = (h, buf)
        elif isinstance(a, sch.WaitRecvBackward):
            self.timer.wait(self.recv_b[a.chunk][0], bubble=self.first_bwd_wait)
            self.first_bwd_wait = False
        elif isinstance(a, sch.Backward):
            self._backward(a.chunk, a.step)
        elif isinstance(a, sch.SendBackward):
            msg = self.saved.pop(a.chunk)["grad_in"]
            if msg.numel():
                self.sends.append(self.comm.isend(msg, self.rank - 1, "stage_gradients", _TAG_BWD))
        elif isinstance(a, sch.IdleForward):
            for l in self.buffered:
                self._exchange_rows(self.B[l], a.step, None, "halo_rows")
        elif isinstance(a, sch.IdleBackward):
            for l in reversed(self.buffered):
                self._exchange_grads(self.G[l], a.step, None)
        elif isinstance(a, sch.WaitSends):
            for h in self.sends:
                self.timer.wait(h)
            self.sends = []
        elif isinstance(a, sch.Step):
            self._step()
        else:  # pragma: no cover - the schedule has no other actions
            raise TypeError(f"unknown schedule action {a!r}")

    def _forward(self, k: int, t: int) -> None:
        """Chunk k through the stage's layers (last stage: classifier and loss)."""
        model = self.model
        own = self.own[k]
        ops = self.ops[k]
        if self.first:
            x_own = None
            h0_k = self.h0_det[own].clone().requires_grad_(self.needs_h0)
        else:
            buf = self.recv_f.pop(k)[1]
            d_in = self.dims[self.a]
            x_own = buf[:, :d_in]
            h0_k = buf[:, d_in:].clone().requires_grad_(True) if self.needs_h0 else None
        layers = []
        out = None
        for i in range(self.a, self.b):
            l = i + 1
            layer = model.layers[i]
            if l == 1:
                # Stage 0, layer 1: reads encode(X) of every local row, all exact.
                h_local, sink = _gather_rows(self.h0_det, self.local_ids[k])
            else:
                self.B[l][own] = x_own
                if self.W > 1:
                    self._exchange_rows(self.B[l], t, k, "halo_rows")
                h_local, sink = _gather_rows(self.B[l], self.local_ids[k])
            out = layer(h_local, ops, h0_k if layer.needs_h0 else None)
            layers.append((l, sink, out))
            del h_local  # kept only where the layer's backward saved it
            x_own = out.detach()
        state: dict[str, Any] = {"layers": layers, "h0": h0_k}
        if self.last:
            logits = model.decode(out)
            loss = training_loss(logits, self.y[own], self.masks[0][own], self.num_train)
            state["loss"] = loss
            self.loss_sum += float(loss.detach())
            self.logits[k] = logits.detach()
        else:
            msg = x_own
            if self.needs_h0:
                msg = torch.cat([msg, h0_k.detach()], dim=1)
            state["send"] = msg.contiguous()
        self.saved[k] = state

    def _backward(self, k: int, t: int) -> None:
        """Chunk k back through the stage's layers, one autograd call per layer."""
        state = self.saved[k]
        p = self.plans[k]
        own = self.own[k]
        n_own = p.num_own
        h0_k = state["h0"]
        if self.last:
            g_out = None
            g_h0_next = None
        else:
            buf = self.recv_b.pop(k)[1]
            d_out = self.dims[self.b]
            g_out = buf[:, :d_out]
            g_h0_next = buf[:, d_out:] if self.needs_h0 else None
        fresh = None
        g_in = None
        for l, sink, out in reversed(state["layers"]):
            if g_out is None:
                torch.autograd.backward(state["loss"])  # classifier + last layer
            else:
                torch.autograd.backward(out, g_out)
            gl = _sunk(sink, (p.num_local, self.dims[l - 1]), out)
            if l == 1:
                self.h0_grad.index_add_(0, self.local_ids[k], gl)
                g_in = None
                continue
            halo_g = gl[n_own:]
            if fresh is None:
                # step(j) <= t: written earlier this epoch (or by another way at step t).
                fresh = (self.step_of[self.halo_chunk[k]] <= t).unsqueeze(1)
            # Stale reads are constants: their gradient is dropped. Technique 3 scales
            # the gradient that flows to fresh halo rows by 2 (a neighbour chunk came
            # earlier with probability about 1/2 under a random order).
            halo_g = torch.where(fresh, halo_g, torch.zeros((), dtype=halo_g.dtype, device=halo_g.device))
            if self.unbiased:
                halo_g = halo_g * 2.0
            G = self.G[l]
            G.index_add_(0, self.halo_ids[k], halo_g)
            if self.W > 1:
                self._exchange_grads(G, t, k)
            g_in = gl[:n_own] + G[own]
            g_out = g_in
        # h0 of GCNII: this stage's layers' gradient plus what the next stages sent.
        g_h0 = None
        if self.needs_h0:
            g_h0 = _grad(h0_k)
            if g_h0_next is not None:
                g_h0 = g_h0 + g_h0_next
        if self.first:
            if g_h0 is not None:
                self.h0_grad[own] += g_h0
            self.saved.pop(k)
        else:
            msg = g_in if g_h0 is None else torch.cat([g_in, g_h0], dim=1)
            state["grad_in"] = msg.contiguous()
            state["layers"] = None
            state.pop("loss", None)

    def _step(self) -> None:
        if self.first:
            # encode's backward once, with the h0 gradient summed over every read.
            self.h0_full.backward(self.h0_grad)
            self.h0_full = self.h0_det = self.h0_grad = None  # type: ignore[assignment]
        params = list(self._owned.values())
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        if self.W > 1 and grads:
            group = [w * self.S + self.stage for w in range(self.W)]
            self.timer.timed(self.comm.all_reduce_sum, grads, "weight_allreduce", group)
        for p, g in zip(params, grads):
            p.grad = g
        self.optimizer.step()

    # ---------------------------------------------------------------- protocol
    def evaluate(self) -> dict[str, float]:
        """Exact full-graph accuracies: layer-by-layer inference through the stages;
        the last stage counts and every rank gets the totals."""
        self.timer = _Wait(self.comm)
        logits = self._full_forward(capture=False)
        if logits is not None:
            nb = self.n_block
            sums = evaluation_sums(logits, self.y[:nb], tuple(m[:nb] for m in self.masks))
        else:
            sums = [0.0] * 7
        return evaluation_metrics(self.comm.all_reduce_control(sums))

    def predicted_bytes(self) -> dict[str, int]:
        return predicted_pipeline_bytes(self.model, self.N, self.split, self.element_size)

    def owned_parameters(self) -> dict[str, Tensor]:
        return dict(self._owned)

    def last_logits(self) -> tuple[Tensor, Tensor] | None:
        return self._last_logits


class PipelineRunner(StagePipeline):
    """The ``pipeline`` mode runner: S = workers stages, one way (DESIGN.md 5)."""

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx, ways=1)
