"""What every mode runner is given, and what it reports per epoch.

A :class:`WorkerContext` is built once per worker process (by
:mod:`gnnpipe.trainer.worker`), after the process group is up: it holds this worker's
rank and device, the resolved layout, the run configuration, the graph (chunked once,
shared by every worker; whole in single mode), the communicator and the FULL model. The model is built with ``torch.manual_seed(config.train.seed)`` on
every rank, identically, so that its parameters equal those of ``single`` mode; a
runner keeps (and moves to its device) only the parameters it owns.

:class:`ModeRunner` is the protocol that the graph, pipeline and hybrid runners
implement (single mode too, with a one-rank communicator); the epoch loop
(:mod:`gnnpipe.trainer.loop`) calls nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

import torch

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from gnnpipe.config import RunConfig
    from gnnpipe.data import Graph
    from gnnpipe.engine.comm import Comm
    from gnnpipe.engine.layout import Layout
    from gnnpipe.engine.trace import ActionTrace
    from gnnpipe.partition import ChunkedGraph

__all__ = ["WorkerContext", "EpochStats", "ModeRunner", "ReplicaState", "sync"]


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA), so that a wall-clock reading covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class WorkerContext:
    """Everything one worker process needs to run its share of a mode.

    Attributes:
        rank: this worker's place in the default process group.
        layout: the resolved layout (degrees, rank arithmetic), identical on every rank.
        device: ``cuda:LOCAL_RANK`` with CUDA, else ``cpu``.
        dtype: the floating-point type of weights and activations (``train.dtype``).
        config: the run configuration (identical on every rank).
        graph: the graph the runner trains on (self-loops removed; reordered by the
            partition in the distributed modes).
        chunked: the partitioned graph (``.graph`` is ``graph``; ``.plans``;
            ``.partition``; ``.stats``), identical on every rank; None in single mode.
        comm: the communicator; the only way a runner talks to other workers.
        model: the FULL model on the CPU, seeded identically on every rank.
        local_rank: the index of the worker on its node (selects the GPU).
        heap_trim: what a stage calls after each chunk compute to give the host heap's
            free pages back (:func:`gnnpipe.engine.host_heap.heap_trimmer`), or None.
        trace: where a stage records its schedule's actions
            (:func:`gnnpipe.engine.trace.action_trace`), or None.
    """

    rank: int
    layout: "Layout"
    device: torch.device
    dtype: torch.dtype
    config: "RunConfig"
    graph: "Graph"
    chunked: "ChunkedGraph | None"
    comm: "Comm"
    model: Any  # gnnpipe.models.DeepGNN
    local_rank: int = 0
    heap_trim: Callable[[], None] | None = None
    trace: "ActionTrace | None" = None

    @property
    def world_size(self) -> int:
        return self.layout.world_size


@dataclass(frozen=True)
class EpochStats:
    """One training epoch as seen by one worker.

    Attributes:
        loss: the global training loss of the epoch (identical on every rank).
        bytes_sent: THIS rank's payload bytes by kind during the epoch.
        compute_s: seconds spent computing (forward, backward, step).
        comm_wait_s: seconds blocked waiting for communication.
        bubble_s: seconds idle for pipeline dependencies (0 in graph mode).
        history_drift: pipeline and hybrid: ``(num_1, den_1, ..., num_L, den_L)``,
            THIS rank's sums of squared (fresh - historical) and squared fresh values
            of each layer's input (:mod:`gnnpipe.engine.stage`), zeros for layers it
            does not own; None in the exact modes, which read no history.
    """

    loss: float
    bytes_sent: dict[str, int]
    compute_s: float
    comm_wait_s: float
    bubble_s: float = 0.0
    history_drift: tuple[float, ...] | None = None


class ModeRunner(Protocol):
    """The interface of a distributed mode (graph, pipeline, hybrid)."""

    def __init__(self, ctx: WorkerContext) -> None: ...

    def prepare(self) -> dict[str, Any]:
        """Once, before the first epoch (not on a resume): e.g. the history start.
        Returns what it measured (``bytes`` sent by kind, ``time_s``)."""
        ...

    def train_epoch(self, epoch: int, continues: bool = False) -> EpochStats:
        """One forward and backward over the whole graph and one optimizer step.
        ``continues``: epoch ``epoch + 1`` follows with no checkpoint in between (a
        pipelined runner may begin it during this one: ``parallel.cross_epoch_chunks``)."""
        ...

    def end_training(self) -> None:
        """After the last ``train_epoch``: settle anything begun for an epoch that will
        not run (so that no transfer is left unmatched)."""
        ...

    def evaluate(self) -> dict[str, float]:
        """Exact full-graph accuracies ``{"train", "val", "test"}``, computed by the
        workers, identical on every rank."""
        ...

    def predicted_bytes(self) -> dict[str, int] | None:
        """DESIGN.md 7 prediction for one training epoch, TOTAL over all ranks, by kind
        (None where the mode sends nothing: single)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything this rank needs to continue bit for bit after a restart (its
        parameters, optimizer state, historical buffers), for a checkpoint shard."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` of the same rank of the same layout."""
        ...

    def owned_parameters(self) -> dict[str, torch.Tensor]:
        """Name (as in ``model.named_parameters()``) -> the device parameter this rank
        owns and steps."""
        ...

    def last_logits(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(global_nid rows, logits)`` this rank computed in its last train_epoch.

        Shapes: int64 [R], [R, num_classes]."""
        ...


class ReplicaState:
    """The checkpoint state and owned parameters of a runner that holds the WHOLE
    model and steps all of it (single mode; graph mode, whose ranks are replicas): its
    parameters and its optimizer, nothing else (no history)."""

    model: Any
    optimizer: Any

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def owned_parameters(self) -> dict[str, torch.Tensor]:
        return dict(self.model.named_parameters())

    def end_training(self) -> None:
        """Nothing is ever begun ahead of an epoch here."""
