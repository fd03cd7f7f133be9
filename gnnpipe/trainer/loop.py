"""The epoch loop: one for every mode, single included.

Per epoch ``e`` (0-based for the runner, 1-based in the record):
``stats = runner.train_epoch(e, continues)``; every ``eval_every`` epochs and at the last one
``runner.evaluate()`` (exact, full graph); then two uncounted control all-reduces sum
the payload bytes over the ranks (training kinds from ``stats``, ``evaluation`` from
the counters) and gather every rank's time split: the record keeps each rank's
(``time_per_rank``) and, as ``time``, the slowest rank's (so that ``compute + comm
wait + bubble = epoch time``). The
:class:`~gnnpipe.trainer.monitor.Monitor` picks the best epoch and decides early
stopping; every rank sees the same loss and accuracies, so every rank takes the same
decision and none is left waiting. A loss or a gradient that is not finite ends the
loop: the run has diverged, and the result says at which epoch and where.

The loop knows nothing of processes: ``comm`` is the rank's communicator (a one-rank
:class:`~gnnpipe.engine.comm.Comm` in single mode, whose reductions are the identity).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from gnnpipe.engine.comm import KINDS
from gnnpipe.engine.context import sync
from gnnpipe.trainer.monitor import Monitor
from gnnpipe.trainer.progress import Progress
from gnnpipe.trainer.record import EpochRecord
from gnnpipe.trainer.sinks import EpochSinks

__all__ = ["LoopResult", "run_epochs"]

logger = logging.getLogger("gnnpipe.train")


@dataclass
class LoopResult:
    """What the loop measured: the epochs, the best one, how it ended."""

    epochs: list[EpochRecord]
    best: dict[str, Any]
    stopped_early: bool
    diverged: dict[str, Any] | None


def _gather_ranks(comm: Any, rank: int, world_size: int, mine: list[float],
                  shared: list[float]) -> tuple[list[float], list[list[float]]]:
    """``(shared summed over the ranks, every rank's figures mine by rank)`` with one
    uncounted all-reduce (each rank fills its own slot of the second part)."""
    n, m = len(mine), len(shared)
    slots = list(map(float, shared)) + [0.0] * (n * world_size)
    slots[m + rank * n:m + (rank + 1) * n] = mine
    allv = comm.all_reduce_control(slots, "sum")
    return allv[:m], [allv[m + r * n:m + (r + 1) * n] for r in range(world_size)]


def _relative_drift(sums: list[float]) -> list[float | None]:
    """Per layer ``sqrt(sum |fresh - historical|^2 / sum |fresh|^2)`` from the summed
    ``(num, den)`` pairs; None for a layer without history (layer 1, whose input is
    exact) or whose fresh values were all zero."""
    return [math.sqrt(num / den) if den > 0 else None for num, den in zip(sums[0::2], sums[1::2])]


def _gradients_finite(runner: Any) -> bool:
    grads = [p.grad for p in runner.owned_parameters().values() if p.grad is not None]
    return bool(torch.stack([torch.isfinite(g).all() for g in grads]).all()) if grads else True


def run_epochs(runner: Any, comm: Any, train: Any, *, rank: int, world_size: int, device: Any,
               before_epoch: Callable[[int], None] | None = None, checkpointer: Any = None,
               resume_state: dict[str, Any] | None = None, extra_state: dict[str, Any] | None = None,
               describe_rank: Callable[[int], str] = lambda r: f"rank {r}",
               has_validation: bool = True) -> LoopResult:
    """Train ``runner`` for ``train.epochs`` epochs (``train``: a TrainConfig) on this
    rank's ``device`` and return the measured epochs.

    ``before_epoch(epoch)`` runs first in every epoch (the launcher's failure-injection
    test hook). With a ``checkpointer`` (:class:`gnnpipe.trainer.checkpoint.Checkpointer`)
    the runner's and the loop's state are saved when it is due and at the end;
    ``resume_state`` is the loop state of the checkpoint to continue from (the runner
    has already loaded its own); ``extra_state`` rides along in every checkpoint.
    A loss or an owned gradient that is not finite ends the loop; ``describe_rank``
    names the rank where a gradient went bad first (e.g. "stage 1").
    """
    predicted = runner.predicted_bytes()
    predicted = None if predicted is None else {k: int(v) for k, v in predicted.items()}
    monitor = Monitor(train.monitor, train.patience, has_validation=has_validation)
    sinks = EpochSinks(train.metrics_jsonl, train.tensorboard) if rank == 0 else None
    progress = Progress(train.epochs, log_every=train.log_every, rank=rank,
                        enabled=None if rank == 0 else False)
    epochs: list[EpochRecord] = []
    stopped_early = False
    diverged: dict[str, Any] | None = None
    first = 0
    if resume_state is not None:
        epochs = list(resume_state["epochs"])
        monitor.load_state_dict(resume_state["monitor"])
        first = len(epochs)
        if sinks is not None:
            sinks.write([e.to_dict() for e in epochs])
        if resume_state["stopped_early"]:  # the run had ended: nothing left to train
            stopped_early, first = True, train.epochs
    comm.take_counters()
    comm.take_wait_time()
    for e in range(first, train.epochs):
        epoch = e + 1
        if before_epoch is not None:
            before_epoch(epoch)
        sync(device)
        t0 = time.perf_counter()
        # Whether the next epoch follows this one with no checkpoint between (a
        # pipelined runner with cross-epoch overlap then begins it at this one's turn;
        # a checkpoint holds no half-begun epoch, so a resume continues exactly).
        continues = epoch < train.epochs and not (checkpointer is not None and checkpointer.due(epoch, False))
        stats = runner.train_epoch(e, continues)
        sync(device)
        dt = time.perf_counter() - t0
        evaluated = epoch % train.eval_every == 0 or epoch == train.epochs
        metrics: dict[str, Any] | None = None
        eval_dt = 0.0
        if evaluated:
            t1 = time.perf_counter()
            metrics = runner.evaluate()
            sync(device)
            eval_dt = time.perf_counter() - t1
        mine = dict(stats.bytes_sent)
        for k, v in comm.take_counters().items():  # evaluation (and anything after the epoch)
            mine[k] = mine.get(k, 0) + v
        comm.take_wait_time()
        # One uncounted all-reduce: the bytes summed, and every rank's time split and
        # gradient flag in its own slot (the slowest rank's split adds up to the epoch).
        allv = _gather_ranks(comm, rank, world_size, [dt, stats.comm_wait_s, stats.bubble_s, eval_dt,
                                                      0.0 if _gradients_finite(runner) else 1.0],
                             shared=[mine.get(k, 0) for k in KINDS] + list(stats.history_drift or ()))
        summed, per_rank = allv
        summed, drift_sums = summed[:len(KINDS)], summed[len(KINDS):]
        time_per_rank = [{"rank": r, "epoch_s": v[0], "compute_s": max(0.0, v[0] - v[1] - v[2]),
                          "comm_wait_s": v[1], "bubble_s": v[2]} for r, v in enumerate(per_rank)]
        slowest = max(time_per_rank, key=lambda t: t["epoch_s"])
        eval_s = max(v[3] for v in per_rank)
        bad_ranks = [r for r, v in enumerate(per_rank) if v[4]]
        rec = EpochRecord(epoch=epoch, loss=float(stats.loss), epoch_time_s=slowest["epoch_s"],
                          compute_s=slowest["compute_s"], comm_wait_s=slowest["comm_wait_s"],
                          bubble_s=slowest["bubble_s"], bytes={k: int(round(v)) for k, v in zip(KINDS, summed)},
                          bytes_predicted=None if predicted is None else dict(predicted),
                          history_drift=_relative_drift(drift_sums) if stats.history_drift is not None else None,
                          time_per_rank=time_per_rank)
        stop = False
        if metrics is not None:
            rec.set_evaluation(metrics)
            rec.eval_time_s = eval_s
            stop = monitor.update(epoch, rec.val_acc, rec.val_loss, rec.test_acc)
        epochs.append(rec)
        if sinks is not None:
            sinks.write([rec.to_dict()])
        progress.update(epoch, rec.loss, rec.epoch_time_s, rec.val_acc)
        if not math.isfinite(rec.loss) or bad_ranks:
            # The same on every rank: the loss and the flags were all-reduced.
            what = f"the training loss is {rec.loss}" if not math.isfinite(rec.loss) else "a gradient is not finite"
            where = describe_rank(bad_ranks[0]) if bad_ranks else "the loss"
            diverged = {"epoch": epoch, "where": where, "what": what}
            if rank == 0:
                logger.error("diverged at epoch %d (%s): %s; stopping", epoch, where, what)
            break
        final = stop or epoch == train.epochs
        if checkpointer is not None and checkpointer.due(epoch, final):
            checkpointer.save(epoch, runner.state_dict(),
                              {"epochs": epochs, "monitor": monitor.state_dict(),
                               "stopped_early": bool(stop and epoch < train.epochs), **(extra_state or {})})
        if stop:
            stopped_early = epoch < train.epochs
            if stopped_early and rank == 0:
                logger.info("early stopping at epoch %d: %d evaluations without a better %s",
                            epoch, train.patience, train.monitor)
            break
    runner.end_training()  # an epoch begun ahead that will not run (early stop, divergence)
    progress.close()
    if sinks is not None:
        sinks.close()
    return LoopResult(epochs=epochs, best=monitor.best(), stopped_early=stopped_early, diverged=diverged)
