"""One pipeline stage: the layers, parameters and buffers a rank owns, and the
computation of one chunk through them (DESIGN.md 5; hybrid: 6).

Rank ``way * S + stage`` owns ``model.layers[a:b]`` (plus encode on stage 0, the
classifier and the loss on the last stage) for the chunks of its way. As the stage
of ``torch.distributed.pipelining``, a :class:`Stage` owns its buffers and its
point-to-point transfers, and knows nothing of the order in which they happen: the
executor (:mod:`gnnpipe.engine.executor`) runs the actions of a schedule against it.
The semantics are the simulator's (:mod:`gnnpipe.engine.simulator`):

* **Buffers** (:mod:`gnnpipe.engine.stage_buffers`). For each of its layers ``l >= 2``
  the stage keeps ``B_l`` of that layer's input over the way's row space (all N rows
  in pipeline mode) and ``G_l`` over only the rows a read can give a gradient (in
  pipeline mode in the memory of a slot the first chunk back saved for that layer,
  where it fits: :mod:`gnnpipe.engine.grad_buffers`).
  ``B_l`` starts the epoch as the snapshot ``S_l`` (technique 2: ``S_l`` is refreshed
  from ``B_l`` after every R-th epoch; with R = 1 ``S_l`` *is* ``B_l``, no copy).
  Layer 1 of stage 0 reads ``h0 = encode(X)``, each row projected just before the
  first chunk that reads it (:mod:`gnnpipe.engine.encode_groups`), so it needs no
  buffer and its reads are exact.
* **Saved tensors.** What a layer saves for its backward is moved, after the layer,
  into the chunk's slots of the stage's arena (:mod:`gnnpipe.engine.saved_arena`),
  out of the heap where the forward's temporaries come and go.
* **Forward** of chunk ``k`` at step ``t``: its input rows are written into ``B_l``;
  the layer reads ``cat(B_l[own], B_l[halo])``. A halo row of chunk ``j`` is FRESH
  when ``step(j) <= t`` (written earlier this epoch; in hybrid also by another way at
  the same step, exchanged before the layer) and STALE otherwise.
* **Backward** of chunk ``k``, layer by layer: one autograd call per layer gives the
  gradient of ``h_local``; its fresh halo part is added to ``G_l`` of the source rows
  (technique 3 multiplies exactly this part by 2), its stale part is dropped (stale
  rows are constants: a layer that aggregates its input rows as read,
  ``aggregates_input_rows``, gets operators that hold them constant, whose transposed
  products skip their entries, :meth:`ChunkOps.with_constant_rows`; layer 1 of stage 0
  reads ``h0``, exact, with the full ones); the gradient of the layer input of ``k``
  is its own part plus ``G_l[rows of k]``, complete because every chunk that read
  ``k`` freshly came later in the order and has already done its backward.
* **Dropout** (``parallel.dropout_masks``). ``chunk`` (the default): each layer call
  draws a mask for the rows it reads, own and halo, from the default generator, so a
  halo row gets one sample per reading chunk. ``row``: one mask per row and layer per
  epoch over the way's rows, drawn from a generator keyed by ``(seed, epoch, layer,
  way)`` (:class:`gnnpipe.models.masks.EpochMasks`); every chunk of the way reading a
  row, own or halo, fresh or stale, applies that row's mask, as a whole-graph run
  does, and the simulator draws the same masks.
* **Step.** Weight gradients accumulate over the chunks (stage 0 back-propagates the
  summed ``h0`` gradient of the rows a chunk first read right after that chunk's
  backward); one Adam step (hybrid: after an all-reduce over the ways of the stage).

* **History drift** (a measure, not part of the semantics): when chunk ``k``'s fresh
  input rows overwrite ``B_l[rows of k]``, the values they replace are what every
  stale read of those rows saw this epoch. The stage sums ``|fresh - historical|^2``
  and ``|fresh|^2`` over the first :data:`DRIFT_ROWS` rows of each chunk, per layer;
  the record reports ``sqrt`` of their ratio per layer and epoch (``history_drift``):
  how far stale reads are from fresh ones over training.

With GCNII the chunk's ``h0`` rows travel with its activations (and their gradient
with the activation gradient), concatenated in one message, counted as stage traffic.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import Tensor

from gnnpipe.engine.cross_epoch import add_stash_gradients, call_with, module_stash, stash_weights
from gnnpipe.engine.encode_groups import Encoded, first_reader_groups
from gnnpipe.engine.epoch_state import EpochState
from gnnpipe.engine.saved_arena import SavedArena
from gnnpipe.engine.stage_buffers import StageBuffers
from gnnpipe.engine.stage_autograd import (gather_rows, grad_or_zeros, saved_holder, share_saved_output, sunk_grad,
                                           unhold)
from gnnpipe.models.layers import INPUT_DROPPED
from gnnpipe.models.masks import EpochMasks, MaskRows
from gnnpipe.models.objective import training_loss

__all__ = ["Stage", "TAG_FWD", "TAG_BWD", "DRIFT_ROWS"]

logger = logging.getLogger(__name__)

#: p2p tags of the forward (activations) and backward (gradients) directions.
TAG_FWD, TAG_BWD = 11, 12

#: Rows of each chunk on which the history drift is measured: a sample, so that the
#: measure costs nothing next to the layer (the chunk's rows are in partition order,
#: unrelated to the features).
DRIFT_ROWS = 256


class Stage:
    """What rank ``ctx.rank`` owns in pipeline or hybrid mode, and its chunk compute."""

    def __init__(self, ctx: Any) -> None:
        from gnnpipe.kernels import ChunkOps
        from gnnpipe.models.model import model_input
        from gnnpipe.models.optim import build_optimizer

        layout = ctx.layout
        pc = ctx.config.parallel
        self.comm = ctx.comm
        self.device, self.dtype = ctx.device, ctx.dtype
        self.rank = ctx.rank
        self.way, self.stage = layout.way_of(ctx.rank), layout.stage_of(ctx.rank)
        self.prev_rank, self.next_rank = layout.prev_stage_rank(ctx.rank), layout.next_stage_rank(ctx.rank)
        self.stage_group = layout.stage_group(self.stage)
        self.num_ways = layout.ways
        model = ctx.model
        self.model = model
        self.a, self.b = layout.layer_range(self.stage)
        self.first, self.last = self.prev_rank is None, self.next_rank is None
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
        self.owned = {n: p for n, p in model.named_parameters() if self._owns(n)}
        layer_ids = {id(p) for i in range(self.a, self.b) for p in model.layers[i].parameters()}
        owned = list(self.owned.values())
        self.optimizer = build_optimizer(ctx.config.train, [p for p in owned if id(p) in layer_ids],
                                         [p for p in owned if id(p) not in layer_ids])

        g = ctx.chunked.graph
        self.num_nodes = g.num_nodes
        self.plans = ctx.chunked.plans
        self.num_chunks = len(self.plans)
        self.blocks = layout.way_blocks()
        self.my_chunks = self.blocks[self.way]
        self.ops = {k: ChunkOps.build(self.plans[k], device=self.device, dtype=self.dtype,
                                      backend=pc.kernel_backend, reduces=self.model.reduces)
                    for k in self.my_chunks}
        self.bufs = StageBuffers(self.plans, layout, ctx.rank, ctx.comm, num_nodes=self.num_nodes,
                                 widths={l: self.dims[l - 1] for l in self.buffered},
                                 snapshot_period=pc.snapshot_period, device=self.device, dtype=self.dtype,
                                 lend_grads=int(pc.cross_epoch_chunks) == 0)
        bufs = self.bufs
        self.rows, self.local_ids, self.own, self.halo_chunk = bufs.rows, bufs.local_ids, bufs.own, bufs.halo_chunk
        self.exchange = bufs.exchange
        if self.first:
            self.x = model_input(model, self.rows.rows_of(g.features), device=self.device, dtype=self.dtype)
        if self.last:
            self.y = self.rows.rows_of(g.labels).to(self.device)
            self.masks = tuple(self.rows.rows_of(m).to(self.device)
                               for m in (g.train_mask, g.val_mask, g.test_mask))
            # Each chunk's training rows as ids (read once here): a bool mask would be
            # turned into ids in every chunk's loss, a device read each time.
            self.train_rows = {k: self.masks[0][self.own[k]].nonzero().squeeze(1) for k in self.my_chunks}
        self.num_train = int(g.train_mask.sum())
        self.seed = int(ctx.config.train.seed)
        self.row_masks = pc.dropout_masks == "row"
        self.num_layers = len(model.layers)

        # The type stage messages travel in (``parallel.stage_dtype``): the compute
        # dtype, or bfloat16 (rounded when sent, widened again when received).
        self.wire_dtype = pc.stage_torch_dtype or self.dtype
        self.period = bufs.period
        self.unbiased = bool(pc.unbiased_scale)
        # Historical buffers (filled by the history start before the first epoch) and
        # gradient buffers: stage_buffers.
        self.one_chunk_per_way = bufs.one_chunk_per_way
        self.B, self.snap, self.foreign = bufs.B, bufs.snap, bufs.foreign
        self.own_ids, self.foreign_ids = bufs.own_ids, bufs.foreign_ids
        self.grads, self.G = bufs.grads, bufs.G
        # What the layers save for their backward, out of the heap (saved_arena); by
        # epoch parity too when a chunk's next forward may run before its backward.
        self.arena = SavedArena(self.device)
        self.arena_parity = int(pc.cross_epoch_chunks) > 0
        logger.info("rank %d: way %d/%d stage %d/%d, layers %d..%d, %d chunks, buffers %s "
                    "(%d rows, gradients of %d%s)", self.rank, self.way, self.num_ways, self.stage,
                    layout.stages, self.a + 1, self.b, len(self.my_chunks), self.buffered, self.rows.n_rows,
                    self.grads.num_rows, ", borrowing saved slots that hold them" if self.grads.lend else "")

    def _owns(self, name: str) -> bool:
        if name.startswith("encode."):
            return self.first
        if name.startswith("decode."):
            return self.last
        i = int(name.split(".")[1])
        return self.a <= i < self.b

    def boundary_width(self, layer_input: int) -> int:
        """Width of a stage-boundary message: the layer input plus h0 with GCNII."""
        return self.dims[layer_input] + (self.h0_dim if self.needs_h0 else 0)

    # ------------------------------------------------------------ epoch bounds
    def begin_epoch(self, st: EpochState) -> None:
        """Buffers from the snapshot, stage 0 encodes every row (when ``st.begun`` the
        buffers and masks were set at the previous turn); the last stage also sets up
        its backward here (:meth:`begin_backward`), while it waits for its first chunk
        anyway.

        The restore cannot move to the previous epoch's turn, as the gradient set-up
        does: ``B_l``'s own rows of a chunk hold the saved output of the layer before
        (``share_saved_output``) until that chunk's backward."""
        if st.begun:
            if st.ahead:
                # B_l still holds the last epoch's values but for the rows the ahead
                # chunks wrote: the rest starts from the snapshot now.
                self.bufs.restore(st.ahead)
            st.history = None
        else:
            self.bufs.restore()
        if self.last:
            self.begin_backward(st)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        if not st.begun:
            self._draw_masks(st)
        if self.first:
            st.h0 = self._encode(st, None, range(len(st.ahead), len(st.orders[self.way])))

    def begin_backward(self, st: EpochState) -> None:
        """The turn of epoch ``st``: its forwards are done. Set up what its backwards
        need: the gradient buffers zeroed and their slots for this order (from the
        host's copy of it: no device read). No forward touches them.

        A stage but the last calls this before it waits for its first gradient, so
        this work fills that wait instead of the epoch's start, where the next stages
        wait for this one's first chunk (on BlogCatalog, GCNII-32, S = 2, C = 8, it took
        stage 0 4.0-4.1 ms an epoch, measured: bench/results/stage_start/); the last
        stage calls it in :meth:`begin_epoch`, during its fill. Once per epoch (later
        calls return at once)."""
        if st.backward_begun:
            return
        st.backward_begun = True
        self.grads.begin_epoch(torch.tensor(st.steps, dtype=torch.int64))

    def _draw_masks(self, st: EpochState) -> None:
        """The epoch's dropout masks (``row``; with ``chunk`` each layer call draws)."""
        if self.row_masks:
            st.masks = EpochMasks(self.seed, st.epoch, self.device, stream=self.way)
            # Draw the epoch's masks now: a later stage would otherwise draw each layer's
            # on its first chunk, inside the pipeline's fill, where it now waits anyway.
            for i in range(self.a, self.b):
                p = self.model.layers[i].input_dropout
                if p > 0:
                    st.masks.keep(i + 1, self.rows.n_rows, self.dims[i], p)

    def _encode(self, st: EpochState, stash: dict[str, Tensor] | None, steps: range) -> Encoded:
        """Stage 0's encode for the chunks at ``steps`` of epoch ``st``'s order (with the
        weights ``stash`` when given: :mod:`gnnpipe.engine.cross_epoch`): its dropout
        drawn over all of X now (row masks: from the epoch's slot-0 generator, the same
        draw at every call), its rows projected group by group as those chunks first
        read them (:mod:`gnnpipe.engine.encode_groups`)."""
        enc = self.model.encode
        if not enc.enabled:
            return Encoded.constant(enc(self.x))
        groups = first_reader_groups(self.local_ids, st.orders[self.way], steps, self.rows.n_rows,
                                     split=not self.x.is_sparse)
        return Encoded.of_projection(enc, self.x, groups, self.rows.n_rows,
                                     generator=st.masks.generator(0) if st.masks is not None else None,
                                     weights=None if stash is None else module_stash(stash, "encode"))

    def _h0(self, st: EpochState, k: int) -> Encoded:
        """The encode chunk ``k`` reads: the stashed one if it ran ahead."""
        return st.h0_ahead if st.h0_ahead is not None and k in st.ahead else st.h0  # type: ignore[return-value]

    def begin_next(self, st: EpochState, nxt: EpochState) -> None:
        """The turn of epoch ``st`` (cross-epoch overlap): its forward is done, its
        first gradient is on the way. Refresh the snapshot if due (``B_l`` holds all of
        this epoch's values now), set up ``nxt`` (whose ``ahead`` chunks run next) with
        a stash of the weights not yet stepped, and give this epoch's saved outputs of
        those chunks their own memory, since their rows of ``B_l`` are written again."""
        if st.refresh_snapshot:
            self.refresh_snapshot()
            st.refresh_snapshot = False
        for k in nxt.ahead:
            for h in st.saved[k]["shared"]:
                h[0] = h[0].clone()
        nxt.stash = stash_weights({n: p for n, p in self.owned.items() if not n.startswith("decode.")})
        nxt.history = self.snap if self.period != 1 else None
        self._draw_masks(nxt)
        if self.first:
            nxt.h0_ahead = self._encode(nxt, nxt.stash, range(len(nxt.ahead)))
        nxt.begun = True

    def refresh_snapshot(self) -> None:
        """Technique 2: the snapshot from ``B_l`` (:meth:`StageBuffers.refresh_snapshot`)."""
        self.bufs.refresh_snapshot()

    # ------------------------------------------------------------- transfers
    def post_recv_forward(self, st: EpochState, k: int) -> None:
        buf = torch.empty(self.plans[k].num_own, self.boundary_width(self.a), device=self.device,
                          dtype=self.wire_dtype)
        h = self.comm.irecv(buf, self.prev_rank, "stage_activations", TAG_FWD) if buf.numel() else None
        st.recv_f[k] = (h, buf)

    def post_recv_backward(self, st: EpochState, k: int) -> None:
        buf = torch.empty(self.plans[k].num_own, self.boundary_width(self.b), device=self.device,
                          dtype=self.wire_dtype)
        h = self.comm.irecv(buf, self.next_rank, "stage_gradients", TAG_BWD) if buf.numel() else None
        st.recv_b[k] = (h, buf)

    def send_forward(self, st: EpochState, k: int) -> None:
        # The state lets go of the message: the send's handle holds it until
        # release_forward_sends (or WaitSends) sees the send through.
        msg = st.saved[k].pop("send")
        if msg.numel():
            h = self.comm.isend(msg, self.next_rank, "stage_activations", TAG_FWD)
            st.sends.append(h)
            st.forward_sends.append(h)

    def release_forward_sends(self, st: EpochState) -> None:
        """Wait for this epoch's forward sends and free their messages, at the first
        backward. The next stage runs all of an epoch's forwards before any of its
        backwards (schedule: every chunk's forward, then the turn), so the gradient this
        backward received proves every forward message received: the wait returns at
        once. Kept until the epoch's ``WaitSends`` instead, the C messages (each
        [num_own, width]) stayed through the backward, where a stage's memory peaks."""
        for h in st.forward_sends:
            st.timer.wait(h)
        st.sends = [h for h in st.sends if not h.done]  # WaitSends waits the rest
        st.forward_sends = []

    def send_backward(self, st: EpochState, k: int) -> None:
        msg = st.saved.pop(k)["grad_in"]
        if msg.numel():
            st.sends.append(self.comm.isend(msg, self.prev_rank, "stage_gradients", TAG_BWD))

    def idle_forward(self, st: EpochState, t: int) -> None:
        """Hybrid: a way with no chunk at step t still serves the other ways' reads."""
        for l in self.buffered:
            self.exchange.rows(self.B[l], st.orders, t, None, "halo_rows", st.timer.timed,  # type: ignore[union-attr]
                               self.foreign.get(l))

    def idle_backward(self, st: EpochState, t: int) -> None:
        self.begin_backward(st)
        for l in reversed(self.buffered):
            self.exchange.grads(self.grads.buffer(l), st.orders, t, None, st.timer.timed)  # type: ignore[union-attr]

    # --------------------------------------------------------------- compute
    def forward(self, st: EpochState, k: int, t: int) -> None:
        """Chunk k through the stage's layers (last stage: classifier and loss)."""
        model = self.model
        own = self.own[k]
        ops = self.ops[k]
        if self.first:
            x_own = None
            h0 = self._h0(st, k)
            h0.encode(t)  # the rows chunk k is the first to read
            # A leaf for the gradient of the own rows of h0 (GCNII); nothing else reads it.
            h0_k = h0.det[own].clone().requires_grad_(True) if self.needs_h0 else None
        else:
            buf = st.recv_f.pop(k)[1].to(self.dtype)
            d_in = self.dims[self.a]
            x_own = buf[:, :d_in]
            h0_k = buf[:, d_in:].clone().requires_grad_(True) if self.needs_h0 else None
        layers = []
        out = None
        saved: list[list[Tensor]] = []
        shared: list[list[Tensor]] = []
        # Cross-epoch: a chunk run ahead at the turn uses the stashed weights, and its
        # stale reads come from the history while B_l still holds the last epoch's rows.
        stash = st.stash if k in st.ahead else None
        arena_key = (k, st.epoch % 2 if self.arena_parity else 0)
        self.arena.begin(arena_key)
        # The halo rows read stale: those of the chunks after step t, decided on the host
        # from the plan's halo runs by source chunk (ChunkPlan.halo_blocks).
        blocks = self.plans[k].halo_blocks
        stale_chunks = frozenset(j for j, _, _ in blocks if st.steps[j] > t)
        # The local rows whose gradient the backward uses: the own rows and the fresh
        # halo runs (a stale read's gradient is dropped).
        fresh_runs = tuple((a, b) for j, a, b in blocks if j not in stale_chunks)
        used_rows = None if not stale_chunks else ((0, self.plans[k].num_own),) + fresh_runs
        alt_pos = None
        if st.history is not None:
            runs = [torch.arange(a, b, device=self.device) for j, a, b in blocks if j in stale_chunks]
            alt_pos = torch.cat(runs) if runs else torch.empty(0, dtype=torch.int64, device=self.device)
        # The operators of the layers that read a buffer hold the stale rows constant, so
        # that their transposed products skip the gradient the backward drops (about half
        # of a chunk's halo under a random order; ChunkOps.with_constant_chunks). Layer 1
        # of stage 0 reads h0, exact everywhere, with the chunk's own operators.
        read_ops = self.ops[k].with_constant_chunks(stale_chunks)
        for i in range(self.a, self.b):
            l = i + 1
            layer = model.layers[i]
            if l > 1:
                self._measure_drift(st, l, own, x_own)
                self.B[l][own] = x_own
                if out is not None:
                    shared += share_saved_output(saved, out, self.B[l][own])
                if self.exchange is not None:
                    self.exchange.rows(self.B[l], st.orders, t, k, "halo_rows", st.timer.timed, self.foreign.get(l))
            saved = []
            keep = self._keep(st, l, layer.input_dropout, self.dims[l - 1], self.local_ids[k])
            # The layer's input dropout, applied in place as the rows are gathered (the
            # same mask: drawn there as the layer would draw it, or the same mask rows).
            p_drop = layer.in_place_dropout
            drop = None
            if p_drop > 0:
                drop, keep = (p_drop, keep), INPUT_DROPPED
            weights = None if stash is None else module_stash(stash, f"layers.{i}")
            with torch.autograd.graph.saved_tensors_hooks(saved_holder(saved), unhold):
                if l == 1:
                    # Stage 0, layer 1: reads encode(X) of every local row, all exact.
                    h_local, sink = gather_rows(self._h0(st, k).det, self.local_ids[k], drop=drop)
                elif self.one_chunk_per_way:
                    h_local, sink = gather_rows(self.B[l], self.own_ids[k],
                                                extra=(self.foreign[l], self.foreign_ids[k]), drop=drop)
                else:
                    alt = None if alt_pos is None else (st.history[l], alt_pos)  # type: ignore[index]
                    h_local, sink = gather_rows(self.B[l], self.local_ids[k], alt, drop=drop, used_rows=used_rows)
                layer_ops = read_ops if l > 1 and layer.aggregates_input_rows else ops
                out = call_with(layer, weights, h_local, layer_ops,
                                h0_k if layer.needs_h0 else None, keep)
            placed = self.arena.adopt(arena_key, saved, out)
            # The layer's largest slot: dead from this chunk's backward of the layer
            # on, so G_l may borrow it for the epoch (grad_buffers: lent memory).
            offer = max(placed, key=lambda v: v.numel() * v.element_size(), default=None) \
                if self.grads.lend else None
            layers.append((l, sink, out, offer))
            del h_local  # kept only where the layer's backward saved it
            x_own = out.detach()
        state: dict[str, Any] = {"layers": layers, "h0": h0_k, "shared": shared, "fresh_runs": fresh_runs}
        if self.last:
            dec = model.decode
            keep = self._keep(st, self.num_layers + 1, dec.input_dropout, dec.in_dim, own)
            logits = dec(out, keep)
            loss = training_loss(logits, self.y[own], self.train_rows[k], self.num_train)
            state["loss"] = loss
            # Summed on the device in float64 (as the float sum it replaces), read once
            # at the end of the epoch.
            st.loss_sum = st.loss_sum + loss.detach().to(torch.float64)
            st.logits[k] = logits.detach()
        else:
            msg = x_own
            if self.needs_h0:
                msg = torch.cat([msg, h0_k.detach()], dim=1)  # type: ignore[union-attr]
            state["send"] = msg.to(self.wire_dtype).contiguous()  # type: ignore[union-attr]
        st.saved[k] = state

    def _keep(self, st: EpochState, slot: int, p: float, width: int, rows: Tensor | slice) -> MaskRows | None:
        """The rows ``rows`` (row-space ids, or a slice of them) of slot ``slot``'s
        dropout mask this epoch, gathered where applied; None when the slot has no
        dropout or the layer draws its own (module docstring: Dropout)."""
        if p == 0.0 or st.masks is None:
            return None
        return MaskRows(st.masks.keep(slot, self.rows.n_rows, width, p), rows)  # type: ignore[union-attr]

    def _measure_drift(self, st: EpochState, l: int, own: slice, x_own: Tensor) -> None:
        """Layer ``l``'s drift on the first :data:`DRIFT_ROWS` rows of a chunk, taken
        before they are written: ``B_l[own]`` (or the history) still holds what the
        epoch's stale reads of them saw (module docstring)."""
        m = min(DRIFT_ROWS, own.stop - own.start)
        if m:
            old = (self.B if st.history is None else st.history)[l][own.start:own.start + m]
            st.add_drift(l, x_own[:m].detach(), old)

    def backward(self, st: EpochState, k: int, t: int) -> None:
        """Chunk k back through the stage's layers, one autograd call per layer."""
        self.begin_backward(st)
        if st.forward_sends:
            self.release_forward_sends(st)
        state = st.saved[k]
        p = self.plans[k]
        own = self.own[k]
        n_own = p.num_own
        h0_k = state["h0"]
        if self.last:
            g_out = None
            g_h0_next = None
        else:
            buf = st.recv_b.pop(k)[1].to(self.dtype)
            d_out = self.dims[self.b]
            g_out = buf[:, :d_out]
            g_h0_next = buf[:, d_out:] if self.needs_h0 else None
        g_in = None
        gr = self.grads.rows
        own_slots, own_pos = gr.own_slots[k], gr.own_pos[k]
        # step(j) <= t: written earlier this epoch (or by another way at step t). Stale
        # reads are constants: their gradient is dropped, so only the fresh halo runs
        # go into G_l (the stale rows' gradient, and their input dropout's mask, are not
        # even computed where the layer aggregates its input as read). Technique 3
        # scales the gradient that flows to fresh halo rows by 2 (a neighbour chunk came
        # earlier with probability about 1/2 under a random order).
        fresh_runs = state["fresh_runs"]
        scale = 2.0 if self.unbiased else 1.0
        for l, sink, out, offer in reversed(state["layers"]):
            if g_out is None:
                torch.autograd.backward(state["loss"])  # classifier + last layer
            else:
                torch.autograd.backward(out, g_out)
            gl = sunk_grad(sink, (p.num_local, self.dims[l - 1]), out)
            if l == 1:
                self._h0(st, k).grad.index_add_(0, self.local_ids[k], gl)
                g_in = None
                continue
            G = self.grads.buffer(l, offer)
            halo_slot = gr.halo_slot[k]
            for a, b in fresh_runs:  # local ids; the halo's slots start at n_own
                G.index_add_(0, halo_slot[a - n_own:b - n_own], gl[a:b], alpha=scale)
            if self.exchange is not None:
                self.exchange.grads(G, st.orders, t, k, st.timer.timed)
            # The input gradient of k: its own part plus what later readers left in G_l
            # (rows without a slot were read by no other chunk). In place: gl is this
            # layer's own gradient, read by nothing else.
            g_in = gl[:n_own]
            if own_pos is None:
                g_in.add_(G[own_slots])
            elif own_pos.numel():
                g_in.index_add_(0, own_pos, G[own_slots])
            self.grads.done_with(G)
            g_out = g_in
        # h0 of GCNII: this stage's layers' gradient plus what the next stages sent.
        g_h0 = None
        if self.needs_h0:
            g_h0 = grad_or_zeros(h0_k)
            if g_h0_next is not None:
                g_h0 = g_h0 + g_h0_next
        if self.first:
            if g_h0 is not None:
                self._h0(st, k).grad[own] += g_h0
            # k was the last reader of the rows it first read: their gradient is whole.
            self._h0(st, k).backward(t)
            st.saved.pop(k)
        else:
            msg = g_in if g_h0 is None else torch.cat([g_in, g_h0], dim=1)
            state["grad_in"] = msg.to(self.wire_dtype).contiguous()  # type: ignore[union-attr]
            state["layers"] = state["shared"] = None
            state.pop("loss", None)

    def step(self, st: EpochState) -> None:
        """Stage 0: every encode group was back-propagated; the weight all-reduce over
        the ways; Adam."""
        if self.first:
            # encode's backward ran group by group after each chunk's backward.
            for enc in (st.h0, st.h0_ahead):
                if enc is not None:
                    enc.check_done()
            st.h0 = st.h0_ahead = None
        if st.stash is not None:  # the share of the chunks run ahead
            add_stash_gradients(self.owned, st.stash)
            st.stash = None
        params = list(self.owned.values())
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        if self.num_ways > 1 and grads:
            st.timer.timed(self.comm.all_reduce_sum, grads, "weight_allreduce", list(self.stage_group))
        for p, g in zip(params, grads):
            p.grad = g
        self.optimizer.step()
