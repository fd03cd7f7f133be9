"""Mode ``single``: exact full-graph training in one process (the reference).

One epoch is one forward over the whole graph, the loss of DESIGN.md 3 (sum of
cross-entropy over the training vertices divided by their number), one backward and
one Adam step. Every ``eval_every`` epochs (and at the last one) the model is
evaluated exactly, in eval mode, on train/val/test; the reported test accuracy is
the one at the epoch with the best validation accuracy. With ``patience`` set,
training stops after that many *evaluations* in a row without a better validation
accuracy (so the patience in epochs is ``patience * eval_every``).

Seeding: the run draws weights and dropout masks from torch's default generator,
seeded with ``train.seed`` inside ``torch.random.fork_rng``, so the caller's random
state is left as it was and two runs with the same seed give the same losses on CPU.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from gnnpipe.config import RunConfig
from gnnpipe.errors import ConfigError
from gnnpipe.trainer.evaluate import evaluation_metrics, evaluation_sums, training_loss
from gnnpipe.trainer.optim import model_optimizer
from gnnpipe.trainer.progress import Progress
from gnnpipe.trainer.record import (
    EpochRecord,
    build_record,
    graph_summary,
    machine_info,
    measure_peak_memory,
    monitored_value,
    select_best,
)

__all__ = ["train_single", "EarlyStopping"]

log = logging.getLogger("gnnpipe.train")


class EarlyStopping:
    """Counts evaluations without a new best of the monitored validation figure.

    ``update(metrics)`` (the dict of an evaluation: ``val``, ``val_loss``, ...)
    returns True when training should stop: ``patience`` evaluations in a row have
    not beaten the best (ties do not count as better; ``val_acc`` is maximised,
    ``val_loss`` minimised). ``patience=None`` never stops. Shared with the
    distributed engine.
    """

    def __init__(self, patience: int | None, monitor: str = "val_acc") -> None:
        self.patience = patience
        self.monitor = monitor
        self.best: float | None = None
        self.bad = 0

    def update(self, metrics: dict[str, float | None]) -> bool:
        value = monitored_value(metrics, self.monitor)
        if self.best is None or value > self.best:
            self.best = value
            self.bad = 0
        else:
            self.bad += 1
        return self.patience is not None and self.bad >= self.patience


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_single(config: RunConfig, graph: Any) -> dict[str, Any]:
    """Train ``config.model`` on ``graph`` in this process; return the result record.

    ``config.parallel.mode`` must be ``single``. The graph's self-loops are removed
    once here (layers add their own, ARCHITECTURE.md). Raises ConfigError / DataError
    for bad input.
    """
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.models import build_model
    from gnnpipe.partition import whole_graph_plan

    t_start = time.perf_counter()
    if config.parallel.mode != "single":
        raise ConfigError(f"parallel.mode: expected single for train_single, found {config.parallel.mode!r}")
    graph.validate()
    config.check_against_graph(graph.num_nodes)
    tc, pc = config.train, config.parallel
    device = torch.device(pc.resolved_device())
    dtype = tc.torch_dtype

    g = graph.remove_self_loops()
    plan = whole_graph_plan(g)
    ops = ChunkOps.build(plan, device=device, dtype=dtype, backend=pc.kernel_backend)
    x = g.features.to(device=device, dtype=dtype)
    y = g.labels.to(device)
    masks = tuple(m.to(device) for m in (g.train_mask, g.val_mask, g.test_mask))
    num_train = int(g.train_mask.sum())
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    fork_devices = [device] if device.type == "cuda" else []
    epochs: list[EpochRecord] = []
    stopper = EarlyStopping(tc.patience, tc.monitor)
    stopped_early = False
    with torch.random.fork_rng(devices=fork_devices):
        torch.manual_seed(tc.seed)
        model = build_model(config.model, in_features=g.num_features, num_classes=g.num_classes)
        model = model.to(device=device, dtype=dtype)
        optimizer = model_optimizer(model, tc)
        num_params = sum(p.numel() for p in model.parameters())
        log.info("single: %s on %s, %d parameters, device %s, dtype %s",
                 config.model.model, graph, num_params, device, tc.dtype)
        progress = Progress(tc.epochs, log_every=tc.log_every)
        for epoch in range(1, tc.epochs + 1):
            _sync(device)
            t0 = time.perf_counter()
            model.train()
            optimizer.zero_grad(set_to_none=True)
            logits = model(x, ops)
            loss = training_loss(logits, y, masks[0], num_train)
            loss.backward()
            optimizer.step()
            loss_value = float(loss.detach())
            _sync(device)
            dt = time.perf_counter() - t0
            rec = EpochRecord(epoch=epoch, loss=loss_value, epoch_time_s=dt, compute_s=dt)
            if epoch % tc.eval_every == 0 or epoch == tc.epochs:
                t1 = time.perf_counter()
                model.eval()
                with torch.no_grad():
                    metrics = evaluation_metrics(evaluation_sums(model(x, ops), y, masks))
                _sync(device)
                rec.set_evaluation(metrics)
                rec.eval_time_s = time.perf_counter() - t1
                stop = stopper.update(metrics)
            else:
                stop = False
            epochs.append(rec)
            progress.update(epoch, loss_value, dt, rec.val_acc)
            if not torch.isfinite(loss.detach()):
                log.warning("epoch %d: loss is not finite (%s); stopping", epoch, loss_value)
                break
            if stop:
                stopped_early = epoch < tc.epochs
                if stopped_early:
                    log.info("early stopping at epoch %d: %d evaluations without a better %s",
                             epoch, tc.patience, tc.monitor)
                break
        progress.close()

    machine = machine_info(device.type, None)
    return build_record(
        config, mode="single", world_size=1, graph_info=graph_summary(graph), epochs=epochs,
        best=select_best(epochs, tc.monitor), peak_memory=[measure_peak_memory(device, rank=0)],
        partition_stats=None,
        extra={"num_parameters": int(num_params),
               "self_loops_removed": int(graph.num_edges - g.num_edges)},
        wall_time_s=time.perf_counter() - t_start, machine=machine, stopped_early=stopped_early,
    )
