"""Mode ``pipeline``: GNNPipe layer pipelining (DESIGN.md 5), and the stage runner
that hybrid mode (DESIGN.md 6, :mod:`gnnpipe.engine.hybrid`) shares.

Each epoch the runner of rank ``way * S + stage`` draws the chunk order of every way
(:func:`~gnnpipe.engine.schedule.way_orders`, the same on every rank), builds the
epoch's :class:`~gnnpipe.engine.schedule.PipelineSchedule`, makes a fresh
:class:`~gnnpipe.engine.epoch_state.EpochState` and has the executor run its stage's
program against its :class:`~gnnpipe.engine.stage.Stage`. Transfers between stages
are non-blocking isend/irecv with the next chunk's receive posted ahead (see the
schedule); there is no barrier per pipeline step.

Time split of :class:`EpochStats`: ``bubble_s`` is the pipeline fill/drain (the wait
for the first forward input, the wait for the first backward gradient and the wait at
the end of the epoch for the last stage's loss); every other blocked wait is
``comm_wait_s``; ``compute_s`` is the rest of the epoch.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import torch
from torch import Tensor

from gnnpipe.engine import schedule as sch
from gnnpipe.engine.comm import KINDS
from gnnpipe.engine.context import EpochStats, WorkerContext, sync
from gnnpipe.engine.epoch_state import EpochState, StageTimer
from gnnpipe.engine.executor import execute
from gnnpipe.engine.layout import stage_layer_ranges
from gnnpipe.engine.stage import Stage
from gnnpipe.engine.stage_inference import exact_forward
from gnnpipe.models.objective import evaluation_metrics, evaluation_sums

__all__ = ["PipelineRunner", "StageRunner", "predicted_pipeline_bytes"]

logger = logging.getLogger(__name__)


def predicted_pipeline_bytes(model: Any, num_nodes: int, split: tuple[int, ...],
                             element_size: int = 4) -> dict[str, int]:
    """DESIGN.md 7 for one training epoch of pipeline mode, total over the ranks.

    ``stage_activations = stage_gradients = e * N * sum_boundaries width``, where the
    boundary after stage s carries the input width of the next layer
    (``layer_dims[b_s]``, H for every model) plus ``h0_dim`` for GCNII: i.e.
    ``4 (S-1) N H`` each direction, twice that with h0. Independent of depth and of C.
    """
    out = dict.fromkeys(KINDS, 0)
    widths = 0
    for _a, b in stage_layer_ranges(split)[:-1]:
        widths += int(model.layer_dims[b]) + (int(model.h0_dim) if model.needs_h0 else 0)
    out["stage_activations"] = out["stage_gradients"] = element_size * int(num_nodes) * widths
    return out


class StageRunner:
    """The :class:`~gnnpipe.engine.context.ModeRunner` of one (way, stage): pipeline
    mode is one way, hybrid mode several."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.layout = ctx.layout
        self.comm = ctx.comm
        self.stage = Stage(ctx)
        self.seed = int(ctx.config.train.seed)
        self.shuffle = bool(ctx.config.parallel.shuffle)
        self.history_init = ctx.config.parallel.history_init
        self.cross_epoch_chunks = int(ctx.config.parallel.cross_epoch_chunks)
        self._next: EpochState | None = None  # the next epoch, begun at the last turn
        self.epochs_done = 0
        self.element_size = torch.empty(0, dtype=ctx.dtype).element_size()
        # Stage messages travel in parallel.stage_dtype (DESIGN.md 7 counts 4 bytes per
        # float32 value; a bfloat16 message is 2); halo rows and weights do not.
        self.stage_element_size = torch.empty(0, dtype=self.stage.wire_dtype).element_size()
        self._last_logits: tuple[Tensor, Tensor] | None = None

    # ---------------------------------------------------------------- protocol
    def prepare(self) -> dict[str, Any]:
        """The history start, before the first epoch: with ``history_init = exact`` one
        exact forward fills the snapshots (its bytes are kind ``evaluation``); with
        ``zeros`` the buffers stay zero. Returns what it sent and how long it took."""
        t0 = time.perf_counter()
        st = self.stage
        if self.history_init == "exact":
            exact_forward(st, StageTimer(self.comm), capture=True)
            st.bufs.restore()  # B_l from the snapshots it captured (R = 1: they are B_l)
        return {"history_init": self.history_init, "bytes": self.comm.take_counters(),
                "time_s": time.perf_counter() - t0}

    def _epoch_state(self, epoch: int) -> EpochState:
        st = self.stage
        orders = sch.way_orders(st.blocks, epoch, self.seed, self.shuffle)
        steps = [0] * st.num_chunks
        for o in orders:
            for t, k in enumerate(o):
                steps[k] = t
        return EpochState(orders=orders, step_of=torch.tensor(steps, dtype=torch.int64, device=st.device),
                          steps=tuple(steps), timer=StageTimer(self.comm), epoch=epoch)

    def train_epoch(self, epoch: int, continues: bool = False) -> EpochStats:
        """One pipelined epoch (DESIGN.md 5 / 6) and one optimizer step.

        ``continues``: epoch ``epoch + 1`` follows with nothing in between but an
        evaluation (no checkpoint): with ``parallel.cross_epoch_chunks = K`` the stages
        but the last then run its first K chunks ahead at this epoch's turn."""
        st, layout = self.stage, self.layout
        sync(st.device)
        t_start = time.perf_counter()
        state, self._next = self._next, None
        if state is None:
            state = self._epoch_state(epoch)
        state.refresh_snapshot = st.period != 1 and (self.epochs_done + 1) % st.period == 0
        ahead: tuple[int, ...] = ()
        if continues and self.cross_epoch_chunks > 0 and layout.stages > 1:
            state.next = self._epoch_state(epoch + 1)
            ahead = state.next.ahead = state.next.orders[st.way][:self.cross_epoch_chunks]
        schedule = sch.build_schedule(layout.stages, st.num_chunks, state.orders[st.way],
                                      num_steps=max(len(o) for o in state.orders),
                                      carried=len(state.ahead), ahead=ahead)
        if self.epochs_done == 0 and logger.isEnabledFor(logging.DEBUG):
            logger.debug("rank %d: schedule of the first epoch\n%s", st.rank, schedule)
        st.begin_epoch(state)
        execute(st, schedule.for_stage(st.stage), state, after_compute=self.ctx.heap_trim, trace=self.ctx.trace)
        self._next = state.next
        if st.last:
            chunks = sorted(state.logits)
            rows = torch.cat([st.plans[k].own_global_nid for k in chunks]) if chunks \
                else torch.empty(0, dtype=torch.int64)
            logits = torch.cat([state.logits[k] for k in chunks]) if chunks else \
                torch.empty(0, st.model.num_classes, device=st.device, dtype=st.dtype)
            self._last_logits = (rows, logits)
        # The chunk losses add up to the global loss (DESIGN.md 3); waiting for the last
        # stage's total is the pipeline drain.
        loss_sum = float(state.loss_sum) if st.last else 0.0  # the epoch's one read of it
        trace = self.ctx.trace
        with trace.span(None, epoch, "LossAllReduce") if trace is not None else contextlib.nullcontext():
            (loss,) = state.timer.timed(self.comm.all_reduce_control, [loss_sum], bubble=True)
        self.epochs_done += 1
        if trace is not None:
            trace.flush()
        if state.refresh_snapshot:  # not done at a turn
            st.refresh_snapshot()
        sync(st.device)
        wall = time.perf_counter() - t_start
        self.comm.take_wait_time()
        timer = state.timer
        return EpochStats(loss=loss, bytes_sent=self.comm.take_counters(),
                          compute_s=max(0.0, wall - timer.comm_s - timer.bubble),
                          comm_wait_s=timer.comm_s, bubble_s=timer.bubble,
                          history_drift=state.drift_sums(len(st.model.layers)))

    def end_training(self) -> None:
        """Settle a next epoch begun at the last turn that will not run (early stopping,
        divergence): its sends complete, the last stage takes the messages it had
        posted receives for, and the stash is dropped, so that no rank leaves a
        transfer unmatched."""
        nxt, self._next = self._next, None
        if nxt is None:
            return
        for h in nxt.sends:
            self.comm.wait(h)
        for h, _buf in nxt.recv_f.values():
            if h is not None:
                self.comm.wait(h)

    def evaluate(self) -> dict[str, float | None]:
        """Exact full-graph accuracies: layer-by-layer inference through the stages;
        the last stage counts and every rank gets the totals."""
        st = self.stage
        logits = exact_forward(st, StageTimer(self.comm), capture=False)
        if logits is not None:
            nb = st.rows.n_block
            sums = evaluation_sums(logits, st.y[:nb], tuple(m[:nb] for m in st.masks))
        else:
            sums = [0.0] * 7
        return evaluation_metrics(self.comm.all_reduce_control(sums))

    def predicted_bytes(self) -> dict[str, int]:
        return predicted_pipeline_bytes(self.stage.model, self.stage.num_nodes, self.layout.stage_split,
                                        self.stage_element_size)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the owned parameters, the optimizer, the historical
        buffers (and the snapshots when they are separate copies, R > 1) and the epoch
        count that times the snapshot refresh. The gradient buffers are zeroed at every
        epoch's start, so they are not kept."""
        st = self.stage
        if self._next is not None:
            raise RuntimeError("state_dict: an epoch was begun ahead; the loop runs none before a checkpoint")
        return {"params": {n: p.detach() for n, p in st.owned.items()}, "optimizer": st.optimizer.state_dict(),
                "B": dict(st.B), "snap": None if st.snap is st.B else dict(st.snap),
                "epochs_done": self.epochs_done}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        st = self.stage
        with torch.no_grad():
            for n, p in st.owned.items():
                p.copy_(state["params"][n])
            # A block-only B_l (one chunk per way) takes the block rows, the first of the
            # row space, of a checkpoint that kept all of them; any other shape mismatch
            # still fails the copy.
            rows = slice(0, st.rows.n_block) if st.one_chunk_per_way else slice(None)
            for l, b in st.B.items():
                b.copy_(state["B"][l][rows])
            if st.snap is not st.B:
                for l, b in st.snap.items():
                    b.copy_(state["snap"][l][rows])
        st.optimizer.load_state_dict(state["optimizer"])
        self.epochs_done = int(state["epochs_done"])

    def owned_parameters(self) -> dict[str, Tensor]:
        return dict(self.stage.owned)

    def last_logits(self) -> tuple[Tensor, Tensor] | None:
        return self._last_logits


class PipelineRunner(StageRunner):
    """The ``pipeline`` mode runner: S = workers stages, one way (DESIGN.md 5)."""
