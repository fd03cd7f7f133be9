"""What every mode runner is given, and what it reports per epoch.

A :class:`WorkerContext` is built once per worker process by the driver, after the
process group is up: it holds this worker's rank and device, the run configuration,
the chunked graph (partitioned once, shared by every worker), the communicator and
the FULL model. The model is built with ``torch.manual_seed(config.train.seed)`` on
every rank, identically, so that its parameters equal those of ``single`` mode; a
runner keeps (and moves to its device) only the parameters it owns.

:class:`ModeRunner` is the protocol that the graph, pipeline and hybrid runners
implement; the driver (:mod:`gnnpipe.engine.driver`) calls nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from gnnpipe.config import RunConfig
    from gnnpipe.engine.comm import Comm
    from gnnpipe.partition import ChunkedGraph

__all__ = ["WorkerContext", "EpochStats", "ModeRunner"]


@dataclass
class WorkerContext:
    """Everything one worker process needs to run its share of a mode.

    Attributes:
        rank / world_size: this worker's place in the default process group.
        device: ``cuda:LOCAL_RANK`` with CUDA, else ``cpu``.
        dtype: the floating-point type of weights and activations (``train.dtype``).
        config: the run configuration (identical on every rank).
        chunked: the partitioned graph (``.graph`` reordered, self-loops removed;
            ``.plans``; ``.partition``; ``.stats``), identical on every rank.
        comm: the communicator; the only way a runner talks to other workers.
        model: the FULL model on the CPU, seeded identically on every rank.
        local_rank: the index of the worker on its node (selects the GPU).
    """

    rank: int
    world_size: int
    device: torch.device
    dtype: torch.dtype
    config: "RunConfig"
    chunked: "ChunkedGraph"
    comm: "Comm"
    model: Any  # gnnpipe.models.DeepGNN
    local_rank: int = 0
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EpochStats:
    """One training epoch as seen by one worker.

    Attributes:
        loss: the global training loss of the epoch (identical on every rank).
        bytes_sent: THIS rank's payload bytes by kind during the epoch.
        compute_s: seconds spent computing (forward, backward, step).
        comm_wait_s: seconds blocked waiting for communication.
        bubble_s: seconds idle for pipeline dependencies (0 in graph mode).
    """

    loss: float
    bytes_sent: dict[str, int]
    compute_s: float
    comm_wait_s: float
    bubble_s: float = 0.0


class ModeRunner(Protocol):
    """The interface of a distributed mode (graph, pipeline, hybrid)."""

    def __init__(self, ctx: WorkerContext) -> None: ...

    def train_epoch(self, epoch: int) -> EpochStats:
        """One forward and backward over the whole graph and one optimizer step."""
        ...

    def evaluate(self) -> dict[str, float]:
        """Exact full-graph accuracies ``{"train", "val", "test"}``, computed by the
        workers, identical on every rank."""
        ...

    def predicted_bytes(self) -> dict[str, int]:
        """DESIGN.md 7 prediction for one training epoch, TOTAL over all ranks, by kind."""
        ...

    def owned_parameters(self) -> dict[str, torch.Tensor]:
        """Name (as in ``model.named_parameters()``) -> the device parameter this rank
        owns and steps."""
        ...

    def last_logits(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(global_nid rows, logits)`` this rank computed in its last train_epoch.

        Shapes: int64 [R], [R, num_classes]."""
        ...
