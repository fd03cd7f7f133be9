"""A single-process simulator of GNNPipe (DESIGN.md 5) and its hybrid (DESIGN.md 6):
the oracle that the distributed runners must match.

It is written plainly and independently of :mod:`gnnpipe.engine.pipeline`: no
processes, no gradient buffers, no per-layer backward. One epoch is ONE autograd
graph:

* the layer-``l`` input of every chunk (``l >= 2``) lives in a list ``cur[l][chunk]``;
  at the start of the epoch each entry is the snapshot's rows, a constant;
* at step ``t`` and layer ``l``, first the chunk of every way at that step writes its
  input into ``cur[l]`` (the live tensor, carrying autograd history), then every such
  chunk computes layer ``l`` from ``cat(its own rows, its halo rows read from cur[l])``.
  A halo row whose chunk was written earlier in this epoch (or, in hybrid, by another
  way at the same step) therefore carries history (FRESH: the gradient flows to it),
  every other row is the snapshot constant (STALE: no gradient) -- "exact for the
  forward that was run, taking stale rows as constants";
* layer 1 reads ``h0 = encode(X)`` of all rows, computed once per epoch (exact);
* the loss is the sum of the chunks' losses; one ``backward``; one Adam step over all
  parameters (per-stage Adam steps over disjoint parameters are the same thing, and so
  is the hybrid all-reduce: autograd already sums over the ways).

Technique 3 multiplies by 2 the gradient that flows into every FRESH halo row read at
a layer ``l >= 2`` (the reads of layer 1 are exact and are not scaled). The stage
split does not change these semantics (every stage sees the same order), only which
stage owns which parameters, which :meth:`stage_of` reports.

Dropout as ``parallel.dropout_masks`` says. ``row``: one mask per row and layer per
epoch over each way's rows from a generator keyed by ``(seed, epoch, layer, way)``
(:class:`gnnpipe.models.masks.EpochMasks`), as a stage draws it, so the distributed
runs match the simulator with dropout too. ``chunk``: each layer call draws from this
process's default generator (same distribution as a stage's draws, other samples: the
oracle comparisons of that setting use dropout 0). As in hybrid mode, each way
encodes its own rows (its block and the rows its chunks read) with its own input
dropout. The oracle comparisons use float64.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import Tensor, nn

from gnnpipe.engine.cross_epoch import module_stash
from gnnpipe.engine.layout import stage_layer_ranges
from gnnpipe.engine.row_space import build_row_space
from gnnpipe.engine.schedule import way_blocks, way_orders
from gnnpipe.kernels import ChunkOps
from gnnpipe.models.masks import EpochMasks
from gnnpipe.models.model import model_input
from gnnpipe.models.objective import evaluation_metrics, evaluation_sums, training_loss
from gnnpipe.models.optim import model_optimizer

__all__ = ["PipelineSimulator"]

logger = logging.getLogger(__name__)


class _ScaleGrad(torch.autograd.Function):
    """Identity forward; multiplies the incoming gradient by ``factor`` (technique 3)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, factor: float) -> Tensor:  # type: ignore[override]
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        return g * ctx.factor, None


class _RoundTrip(torch.autograd.Function):
    """A stage message in ``parallel.stage_dtype``: the value rounded to ``wire`` and
    widened again in forward, and the same for the gradient in backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, wire: torch.dtype) -> Tensor:  # type: ignore[override]
        ctx.wire = wire
        return x.to(wire).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        return g.to(ctx.wire).to(g.dtype), None


class PipelineSimulator:
    """Train ``model`` (in place) with pipeline (``ways == 1``) or hybrid semantics.

    Args:
        model: the full ``DeepGNN``; moved to ``device`` and the config's dtype.
        chunked: the ``ChunkedGraph`` (reordered graph without self-loops, plans).
        config: a ``RunConfig``; reads ``parallel`` (shuffle, snapshot_period,
            unbiased_scale, history_init, layer_split, ways, kernel_backend) and
            ``train`` (seed, lr, weight decays, dtype).
        ways: W (default: ``config.parallel.ways`` in hybrid mode, else 1).
    """

    def __init__(self, model: nn.Module, chunked: Any, config: Any, *,
                 device: torch.device | str = "cpu", ways: int | None = None) -> None:
        self.config = config
        self.device = torch.device(device)
        self.dtype = config.train.torch_dtype
        self.model = model.to(device=self.device, dtype=self.dtype)
        self.chunked = chunked
        pc = config.parallel
        self.ways = int(ways if ways is not None else (pc.ways if pc.mode == "hybrid" else 1))
        g = chunked.graph
        self.plans = chunked.plans
        self.num_chunks = len(self.plans)
        self.blocks = way_blocks(self.num_chunks, self.ways)
        self.ops = [ChunkOps.build(p, device=self.device, dtype=self.dtype, backend=pc.kernel_backend,
                                   reduces=self.model.reduces) for p in self.plans]
        self.x = model_input(self.model, g.features, device=self.device, dtype=self.dtype)
        self.y = g.labels.to(self.device)
        self.masks = tuple(m.to(self.device) for m in (g.train_mask, g.val_mask, g.test_mask))
        self.num_train = int(g.train_mask.sum())
        # Each way's rows (the rows its stage 0 encodes and its dropout masks cover),
        # and each chunk's local rows and own rows in its way's row space.
        spaces = [build_row_space(self.plans, self.blocks, w, g.num_nodes) for w in range(self.ways)]
        self.way_rows = [s.n_rows for s in spaces]
        self.way_x = [self.x if s.identity else
                      model_input(self.model, s.rows_of(g.features), device=self.device, dtype=self.dtype)
                      for s in spaces]
        self.way_of: dict[int, int] = {}
        self.local_rows: dict[int, Tensor] = {}
        self.own_rows: dict[int, slice] = {}
        for w, blk in enumerate(self.blocks):
            for k in blk:
                p = self.plans[k]
                self.way_of[k] = w
                self.local_rows[k] = spaces[w].row_of[p.local_global_nid].to(self.device)
                self.own_rows[k] = slice(p.row_start - spaces[w].r0, p.row_end - spaces[w].r0)
        self.L = len(model.layers)
        self.split = pc.layer_split(self.L) if pc.mode in ("pipeline", "hybrid") else (self.L,)
        self.optimizer = model_optimizer(self.model, config.train)
        self.period = int(pc.snapshot_period)
        self.wire = pc.stage_torch_dtype
        # 1-based layer -> the stage that runs it.
        self.layer_stage = {i + 1: s for s, (a, b) in enumerate(stage_layer_ranges(self.split)) for i in range(a, b)}
        self.epochs_done = 0
        self.snapshot: dict[int, Tensor] | None = None
        self.last_order: tuple[tuple[int, ...], ...] = ()
        self._last_logits: Tensor | None = None
        self._grads: dict[str, Tensor] = {}
        self._before_step: dict[str, Tensor] = {}

    # ------------------------------------------------------------ ownership
    def stage_of(self, name: str) -> int:
        """The stage that owns parameter ``name`` (encode: 0, decode: last)."""
        if name.startswith("encode."):
            return 0
        if name.startswith("decode."):
            return len(self.split) - 1
        layer = int(name.split(".")[1])  # "layers.<i>.<...>"
        bound = 0
        for s, n in enumerate(self.split):
            bound += n
            if layer < bound:
                return s
        raise ValueError(f"parameter {name!r} is in no stage")

    def stage_parameters(self, stage: int) -> dict[str, Tensor]:
        return {n: p for n, p in self.model.named_parameters() if self.stage_of(n) == stage}

    def gradients(self) -> dict[str, Tensor]:
        """Name -> the summed gradient of the last epoch (the one its step used)."""
        return dict(self._grads)

    def stage_gradients(self, stage: int) -> dict[str, Tensor]:
        return {n: g for n, g in self._grads.items() if self.stage_of(n) == stage}

    def last_logits(self) -> Tensor | None:
        """Logits [N, classes] of the last epoch's forward (reordered ids)."""
        return self._last_logits

    # ------------------------------------------------------------ full forward
    @torch.no_grad()
    def _exact_inputs(self) -> tuple[dict[int, Tensor], Tensor]:
        """Exact full-graph layer inputs (eval mode = train mode without dropout),
        ``{l: [N, d_{l-1}]}`` for l = 1..L+1 (L+1: the last layer's output)."""
        was = self.model.training
        self.model.eval()
        try:
            h0 = self.model.encode(self.x)
            h = h0
            inputs = {1: h}
            for l, layer in enumerate(self.model.layers, start=1):
                parts = []
                for p, ops in zip(self.plans, self.ops):
                    parts.append(layer(h[p.local_global_nid.to(self.device)], ops,
                                       h0[p.row_start:p.row_end] if layer.needs_h0 else None))
                h = torch.cat(parts)
                inputs[l + 1] = h
            return inputs, self.model.decode(h)
        finally:
            self.model.train(was)

    def evaluate(self) -> dict[str, float]:
        """Exact full-graph accuracies (no stale reads)."""
        _, logits = self._exact_inputs()
        return evaluation_metrics(evaluation_sums(logits, self.y, self.masks))

    def _init_snapshot(self) -> None:
        dims = self.model.layer_dims
        n = self.x.shape[0]
        if self.config.parallel.history_init == "exact":
            inputs, _ = self._exact_inputs()
            self.snapshot = {l: inputs[l].clone() for l in range(2, self.L + 1)}
        else:
            self.snapshot = {l: torch.zeros(n, dims[l - 1], device=self.device, dtype=self.dtype)
                             for l in range(2, self.L + 1)}

    # ------------------------------------------------------------ one epoch
    def train_epoch(self, epoch: int, carried: int = 0) -> float:
        """One pipelined epoch; returns the global training loss.

        ``carried`` (cross-epoch overlap, pipeline mode): the first ``carried`` chunks of
        this epoch's order ran ahead at the previous epoch's turn, so their layers on
        every stage but the last, and the encode they read (their ``h0`` rows at every
        stage), used the weights of before the previous step; those uses' gradients
        count in this step."""
        pc = self.config.parallel
        if self.snapshot is None:
            self._init_snapshot()
        assert self.snapshot is not None
        model = self.model
        model.train()
        self.optimizer.zero_grad(set_to_none=True)
        orders = way_orders(self.blocks, epoch, self.config.train.seed, pc.shuffle)
        self.last_order = orders
        plans = self.plans
        offsets = [p.row_start for p in plans]

        row_masks = pc.dropout_masks == "row"
        masks = [EpochMasks(self.config.train.seed, epoch, self.device, stream=w) for w in range(self.ways)]

        def keep(k: int, slot: int, p: float, width: int, rows: Tensor | slice) -> Tensor | None:
            """Rows ``rows`` (of chunk k's way's row space) of slot ``slot``'s mask."""
            if p == 0.0 or not row_masks:
                return None
            w = self.way_of[k]
            return masks[w].keep(slot, self.way_rows[w], width, p)[rows]

        # The weights of before the previous step, as leaves, for what ran ahead.
        last_stage = len(self.split) - 1
        before = {}
        if carried and last_stage > 0:
            before = {n: t.clone().requires_grad_(True) for n, t in self._before_step.items()
                      if self.stage_of(n) < last_stage}
        ahead = set(orders[0][:carried]) if before else set()

        # Each way's stage 0 encodes the way's rows ([n_rows_w, H]); the chunks that ran
        # ahead read an encode with the weights of before the previous step.
        def encode(w: int, stale: bool) -> Tensor:
            gen = masks[w].generator(0) if row_masks else None
            if stale:
                return torch.func.functional_call(model.encode, module_stash(before, "encode"), (self.way_x[w],),
                                                  {"generator": gen})
            return model.encode(self.way_x[w], generator=gen)

        def at_stages(h0: Tensor) -> list[Tensor]:
            # h0 as each stage holds it: it travels with the activations, rounded to the
            # stage dtype at every stage boundary (a round trip changes nothing at "same").
            at = [h0]
            for _ in self.split[1:]:
                at.append(_RoundTrip.apply(at[-1], self.wire) if self.wire is not None else at[-1])
            return at

        h0_way = [encode(w, False) for w in range(self.ways)]
        h0_at = [at_stages(h0) for h0 in h0_way]
        h0_way_ahead = [encode(w, True) for w in range(self.ways)] if ahead else h0_way
        h0_at_ahead = [at_stages(h0) for h0 in h0_way_ahead] if ahead else h0_at
        # cur[l][j]: layer-l input rows of chunk j: the snapshot constant until written.
        cur = {l: [self.snapshot[l][p.row_start:p.row_end] for p in plans] for l in range(2, self.L + 1)}
        written: dict[int, set[int]] = {l: set() for l in range(2, self.L + 1)}
        loss = h0_way[0].sum() * 0.0
        logits_parts: dict[int, Tensor] = {}
        steps = max(len(o) for o in orders)
        for t in range(steps):
            active = [o[t] for o in orders if t < len(o)]
            inp: dict[int, Tensor] = {}
            for l in range(1, self.L + 1):
                layer = model.layers[l - 1]
                if l >= 2:
                    if self.wire is not None and self.layer_stage[l] != self.layer_stage[l - 1]:
                        inp = {k: _RoundTrip.apply(v, self.wire) for k, v in inp.items()}  # a stage message
                    for k in active:  # every way writes first: same-step rows are fresh
                        cur[l][k] = inp[k]
                        written[l].add(k)
                new = {}
                for k in active:
                    p = plans[k]
                    w = self.way_of[k]
                    if l == 1:
                        h_local = (h0_way_ahead if k in ahead else h0_way)[w][self.local_rows[k]]
                    else:
                        pieces = [cur[l][k]]
                        halo = p.halo_global_nid
                        for j in torch.unique_consecutive(p.halo_chunk).tolist():
                            rows = (halo[p.halo_chunk == j] - offsets[j]).to(self.device)
                            piece = cur[l][j][rows]
                            if pc.unbiased_scale and j in written[l]:
                                piece = _ScaleGrad.apply(piece, 2.0)
                            pieces.append(piece)
                        h_local = torch.cat(pieces)
                    h0_own = ((h0_at_ahead if k in ahead else h0_at)[w][self.layer_stage[l]][self.own_rows[k]]
                              if layer.needs_h0 else None)
                    args = (h_local, self.ops[k], h0_own,
                            keep(k, l, layer.input_dropout, layer.in_dim, self.local_rows[k]))
                    if k in ahead and self.layer_stage[l] < last_stage:
                        new[k] = torch.func.functional_call(layer, module_stash(before, f"layers.{l - 1}"), args)
                    else:
                        new[k] = layer(*args)
                inp = new
            for k in active:
                p = plans[k]
                sl = slice(p.row_start, p.row_end)
                dec = model.decode
                logits = dec(inp[k], keep(k, self.L + 1, dec.input_dropout, dec.in_dim, self.own_rows[k]))
                logits_parts[k] = logits.detach()
                loss = loss + training_loss(logits, self.y[sl], self.masks[0][sl], self.num_train)
        loss.backward()
        params = dict(model.named_parameters())
        for n, t in before.items():
            if t.grad is not None:
                params[n].grad = t.grad if params[n].grad is None else params[n].grad + t.grad
        self._grads = {n: p.grad.detach().clone() for n, p in params.items() if p.grad is not None}
        self._before_step = {n: p.detach().clone() for n, p in params.items()}
        self.optimizer.step()
        self._last_logits = torch.cat([logits_parts[k] for k in range(self.num_chunks)])
        # What the epoch started from (stale reads saw it) and its fresh layer inputs,
        # rows in partition order: the history drift's two terms (gnnpipe.engine.stage).
        self.last_history = self.snapshot
        self.last_fresh = {l: torch.cat([c.detach() for c in cur[l]]) for l in cur}
        # Technique 2: refresh the snapshot from the buffers every R epochs.
        if (self.epochs_done + 1) % self.period == 0:
            self.snapshot = self.last_fresh
        self.epochs_done += 1
        return float(loss.detach())
