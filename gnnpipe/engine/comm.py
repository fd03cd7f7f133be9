"""The one module that talks to ``torch.distributed``: point-to-point, collectives,
control messages, and the byte counters of DESIGN.md 7.

Every payload call names a *kind* (:data:`KINDS`) and adds the bytes that THIS rank
sends to a per-kind counter (receives are not counted, so summing the counters over
ranks gives each byte once). Control messages (losses, accuracies, byte totals,
objects) are not payload and are never counted.

Ordering rules, the same for gloo and NCCL:

* Between one pair of ranks, in one direction, sends and receives are matched in the
  order they are posted. Tags are passed on, but NCCL ignores them, so a program must
  never rely on a tag to reorder messages.
* NCCL runs a send and a receive between the same two ranks as GPU kernels that may
  each wait for the other side; two ranks that both ``isend`` then ``irecv`` to each
  other can deadlock (NVIDIA/nccl#479). Any exchange in which a rank both sends and
  receives must therefore be posted as ONE :meth:`Comm.batch` (``batch_isend_irecv``,
  i.e. an NCCL group), which is deadlock-free whatever the order inside it, or use
  single :meth:`Comm.isend` / :meth:`Comm.irecv`, which travel on per-direction
  groups (next point).
* NCCL also runs every single ``isend``/``irecv`` between one pair of ranks, in both
  directions, on ONE stream of one communicator, in posting order. A pipeline that
  posts its receives ahead (stage s: ``irecv`` gradient from s+1, then ``isend``
  activation to s+1; stage s+1 the mirror image) would then deadlock: each stream
  waits on a receive whose matching send sits behind the other stream's receive.
  So under NCCL (``directional=True``, the default there) every ordered pair
  ``(src, dst)`` gets its own two-rank process group, created once by every rank in
  the same order, and single sends/receives travel on the group of their direction:
  the two directions of a pair never queue behind each other, and within one
  direction sends and receives match in posting order as they must anyway.
* NCCL requires the first p2p batch of a group to involve all its ranks; the
  constructor runs one collective so that every later batch may be partial.

The weight all-reduce is a ring reduce-scatter plus all-gather built from p2p
batches, so its bytes are counted as actually sent: ``2 (P-1)/P * |theta|`` elements
per worker on average and exactly ``2 (P-1) |theta|`` over the P workers of a group.
It also leaves every rank with bit-identical sums (each segment is reduced along one
chain and then copied), so replicated optimizers stay in lock-step.

On CUDA, ``wait`` makes the current stream wait for the transfer and returns; the
measured wait time is then host-side blocking only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple, Sequence

import torch
import torch.distributed as dist

__all__ = ["KINDS", "Comm", "Handle", "P2P"]

logger = logging.getLogger(__name__)

#: Payload kinds counted by the communicator, in the order every per-kind figure is
#: listed: pipeline stage boundaries (forward activations, backward gradients), halo
#: exchange between chunks (rows forward, their gradients backward), the weight
#: all-reduce of data-parallel replicas, and whatever the full-graph evaluation sends
#: (its stage activations and halo rows, apart from training's). Defined here, where
#: the bytes are counted; the result record (:mod:`gnnpipe.trainer.record`) reports
#: them under these names.
KINDS: tuple[str, ...] = (
    "stage_activations",
    "stage_gradients",
    "halo_rows",
    "halo_gradients",
    "weight_allreduce",
    "evaluation",
)


class P2P(NamedTuple):
    """One operation of a :meth:`Comm.batch`: ``op`` is ``"send"`` or ``"recv"``."""

    op: str
    tensor: torch.Tensor
    peer: int
    kind: str
    tag: int = 0


@dataclass
class Handle:
    """Outstanding transfers; pass to :meth:`Comm.wait`. Holds references to the
    tensors so that a send buffer outlives its transfer."""

    works: list[Any]
    tensors: list[torch.Tensor] = field(default_factory=list)
    done: bool = False


class Comm:
    """Counted communication for one worker of the default process group.

    Args:
        rank / world_size: this worker's place in the default group.
        device: where payload tensors live (control tensors are made there too, as
            NCCL only moves device memory).
        directional: give each direction of each pair its own group for single
            ``isend``/``irecv`` (module docstring); default: on under NCCL only.
        timeout_s: timeout of those groups (default: torch's).
    """

    def __init__(self, rank: int, world_size: int, device: torch.device | str = "cpu", *,
                 directional: bool | None = None, timeout_s: float | None = None) -> None:
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.device = torch.device(device)
        self._counters: dict[str, int] = {k: 0 for k in KINDS}
        self._totals: dict[str, int] = {k: 0 for k in KINDS}
        self._wait_s = 0.0
        self._initialized = dist.is_available() and dist.is_initialized()
        self._dir_groups: dict[tuple[int, int], Any] = {}
        if self._initialized and self.world_size > 1:
            # First collective on the group: afterwards partial p2p batches are legal
            # under NCCL (see the module docstring); with gloo it is a cheap barrier.
            self.all_reduce_control([0.0])
            if directional is None:
                directional = dist.get_backend() == "nccl"
            if directional:
                # One group per direction of every pair (module docstring). new_group is
                # collective over all ranks: every rank walks the pairs in one order.
                for a in range(self.world_size):
                    for b in range(self.world_size):
                        if a != b:
                            g = dist.new_group([a, b], timeout=None if timeout_s is None
                                               else timedelta(seconds=timeout_s))
                            if self.rank in (a, b):
                                self._dir_groups[(a, b)] = g
        self.directional = bool(self._dir_groups)

    # ------------------------------------------------------------------ counting
    def _count(self, kind: str, tensor: torch.Tensor) -> None:
        if kind not in self._counters:
            raise ValueError(f"comm kind: expected one of {', '.join(KINDS)}, found {kind!r}")
        nbytes = tensor.numel() * tensor.element_size()
        self._counters[kind] += nbytes
        self._totals[kind] += nbytes

    def take_counters(self) -> dict[str, int]:
        """Bytes sent by this rank, by kind, since the last call; resets them."""
        out = dict(self._counters)
        self._counters = {k: 0 for k in KINDS}
        return out

    def peek_counters(self) -> dict[str, int]:
        """Bytes sent by this rank since the last :meth:`take_counters`, not reset."""
        return dict(self._counters)

    def total_counters(self) -> dict[str, int]:
        """Bytes sent by this rank since the communicator was made."""
        return dict(self._totals)

    def take_wait_time(self) -> float:
        """Seconds blocked in :meth:`wait` since the last call; resets it."""
        out, self._wait_s = self._wait_s, 0.0
        return out

    # ------------------------------------------------------------------ p2p
    def _check_peer(self, peer: int) -> None:
        if not 0 <= peer < self.world_size or peer == self.rank:
            raise ValueError(f"comm peer: expected a rank in [0, {self.world_size}) other than "
                             f"{self.rank}, found {peer}")

    def isend(self, tensor: torch.Tensor, dst: int, kind: str, tag: int = 0) -> Handle:
        """Start sending ``tensor`` (made contiguous) to ``dst``; counts its bytes."""
        self._check_peer(dst)
        t = tensor.detach().contiguous()
        self._count(kind, t)
        return Handle([dist.isend(t, dst=dst, group=self._dir_groups.get((self.rank, dst)), tag=tag)], [t])

    def irecv(self, tensor: torch.Tensor, src: int, kind: str, tag: int = 0) -> Handle:
        """Start receiving into ``tensor`` (must be contiguous) from ``src``; not counted."""
        self._check_peer(src)
        if kind not in self._counters:
            raise ValueError(f"comm kind: expected one of {', '.join(KINDS)}, found {kind!r}")
        if not tensor.is_contiguous():
            raise ValueError("comm irecv: expected a contiguous receive buffer, found a strided view")
        return Handle([dist.irecv(tensor, src=src, group=self._dir_groups.get((src, self.rank)), tag=tag)],
                      [tensor])

    def batch(self, ops: Sequence[P2P]) -> Handle:
        """Post sends and receives as one group (deadlock-free under NCCL, see the
        module docstring); counts the sends. Empty tensors are skipped, so both sides
        may skip an empty message without a matching call."""
        p2p_ops = []
        keep: list[torch.Tensor] = []
        for op in ops:
            if op.tensor.numel() == 0:
                continue
            self._check_peer(op.peer)
            if op.op == "send":
                t = op.tensor.detach().contiguous()
                self._count(op.kind, t)
                p2p_ops.append(dist.P2POp(dist.isend, t, op.peer, tag=op.tag))
            elif op.op == "recv":
                if op.kind not in self._counters:
                    raise ValueError(f"comm kind: expected one of {', '.join(KINDS)}, found {op.kind!r}")
                t = op.tensor
                if not t.is_contiguous():
                    raise ValueError("comm recv: expected a contiguous receive buffer, found a strided view")
                p2p_ops.append(dist.P2POp(dist.irecv, t, op.peer, tag=op.tag))
            else:
                raise ValueError(f"comm op: expected 'send' or 'recv', found {op.op!r}")
            keep.append(t)
        if not p2p_ops:
            return Handle([], [], done=True)
        return Handle(list(dist.batch_isend_irecv(p2p_ops)), keep)

    def wait(self, handle: Handle) -> None:
        """Block until the transfers of ``handle`` are done; the time goes to the wait
        counter (:meth:`take_wait_time`)."""
        if handle.done:
            return
        t0 = time.perf_counter()
        for w in handle.works:
            w.wait()
        self._wait_s += time.perf_counter() - t0
        handle.done = True
        # Let go of the buffers: a backend's work object holds its tensors too.
        handle.tensors = []
        handle.works = []

    def exchange(self, sends: dict[int, torch.Tensor], recvs: dict[int, torch.Tensor], kind: str) -> None:
        """Send ``sends[peer]`` to each peer and receive ``recvs[peer]`` from each, as
        one batch, and wait. Both sides must agree on which pairs exchange."""
        ops = [P2P("send", t, p, kind) for p, t in sorted(sends.items())]
        ops += [P2P("recv", t, p, kind) for p, t in sorted(recvs.items())]
        self.wait(self.batch(ops))

    # ------------------------------------------------------------ all-reduce
    def all_reduce_sum(self, tensors: Sequence[torch.Tensor], kind: str,
                       group_ranks: Sequence[int] | None = None) -> None:
        """Sum ``tensors`` in place over ``group_ranks`` (default: all ranks).

        A ring reduce-scatter then all-gather over one flattened bucket, from p2p
        batches, so the counted bytes are those sent: exactly ``2 (P-1) * numel``
        elements over the group. Every rank ends with bit-identical values. All
        tensors must share one dtype and device; every rank of the group must call
        this with tensors of the same shapes, in the same order.

        Shapes: any; the bucket is their concatenation [sum numel].
        """
        if kind not in self._counters:
            raise ValueError(f"comm kind: expected one of {', '.join(KINDS)}, found {kind!r}")
        ranks = list(range(self.world_size)) if group_ranks is None else sorted(int(r) for r in group_ranks)
        if self.rank not in ranks:
            raise ValueError(f"all_reduce_sum: rank {self.rank} is not in group {ranks}")
        p = len(ranks)
        if p == 1 or not tensors:
            return
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])
        n = flat.numel()
        bounds = [n * i // p for i in range(p + 1)]

        def seg(j: int) -> torch.Tensor:
            return flat[bounds[j]:bounds[j + 1]]

        i = ranks.index(self.rank)
        right, left = ranks[(i + 1) % p], ranks[(i - 1) % p]
        buf = torch.empty(max(bounds[j + 1] - bounds[j] for j in range(p)), dtype=flat.dtype, device=flat.device)
        # Reduce-scatter: after step s, this rank holds segment (i - s - 1) summed over
        # s + 2 ranks; after P - 1 steps it holds segment (i + 1) % P complete.
        for s in range(p - 1):
            out_j, in_j = (i - s) % p, (i - s - 1) % p
            inc = buf[: bounds[in_j + 1] - bounds[in_j]]
            self.wait(self.batch([P2P("send", seg(out_j), right, kind), P2P("recv", inc, left, kind)]))
            seg(in_j).add_(inc)
        # All-gather: pass the complete segments round the ring.
        for s in range(p - 1):
            out_j, in_j = (i + 1 - s) % p, (i - s) % p
            self.wait(self.batch([P2P("send", seg(out_j), right, kind), P2P("recv", seg(in_j), left, kind)]))
        off = 0
        for t in tensors:
            k = t.numel()
            t.copy_(flat[off:off + k].view_as(t))
            off += k

    # ---------------------------------------------------------------- control
    def all_reduce_control(self, values: Sequence[float], op: str = "sum",
                           group_ranks: Sequence[int] | None = None) -> list[float]:
        """Reduce a few numbers over all ranks (``op``: sum, max, min); uncounted.
        ``group_ranks`` other than all ranks is not supported (control traffic always
        spans the run)."""
        if group_ranks is not None and sorted(group_ranks) != list(range(self.world_size)):
            raise ValueError("all_reduce_control: only the whole world is supported")
        vals = [float(v) for v in values]
        if not self._initialized or self.world_size == 1:
            return vals
        t = torch.tensor(vals, dtype=torch.float64, device=self.device)
        red = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op]
        dist.all_reduce(t, op=red)
        return [float(v) for v in t.cpu().tolist()]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """``obj`` of rank ``src`` on every rank; uncounted."""
        if not self._initialized or self.world_size == 1:
            return obj
        box = [obj if self.rank == src else None]
        dist.broadcast_object_list(box, src=src, device=self.device)
        return box[0]

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, by rank; uncounted."""
        if not self._initialized or self.world_size == 1:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        """Wait for every rank (a tiny uncounted all-reduce, valid on every backend)."""
        if self._initialized and self.world_size > 1:
            self.all_reduce_control([0.0])
