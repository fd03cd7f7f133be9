"""Stage 0's encode of one epoch, one group of rows at a time, as the chunks first read them.

Layer 1 of stage 0 reads ``h0 = encode(X)`` of every row a chunk reads, own and halo.
Encoding all rows before the first chunk and back-propagating all of them after the
last one puts the whole encode (forward and backward) where no other stage can work:
on Amazon Photo (7,650 x 745 dense features, GCNII-32, S = 2, C = 8) 47 ms of a 0.47 s
epoch, which the last stage waits through at both ends, so that moving layers off
stage 0 could not help (timed ad hoc: 16/16 0.48-0.50 s, 15/17 0.49 s, 14/18 0.52 s;
the A/B of this change: ``bench/results/encode_groups_ab/``).

A row's encode is first needed by the first chunk in the epoch's order that reads
it, and its gradient is complete once that same chunk's backward is done: the backward
runs the order in reverse, so every later reader of the row has already added its
part. So the rows are grouped by the step of their first reader
(:func:`first_reader_groups`): group ``t`` is encoded just before the chunk at step
``t`` runs (:meth:`Encoded.encode`) and back-propagated just after its backward on
stage 0 (:meth:`Encoded.backward`). Only group 0 (the first chunk's own and halo
rows) is left before any chunk flows and after the last one; the rest is stage 0's
work among the others, which a cost-balanced stage split (stage 0 fewer layers) evens
out. The values are one whole encode's: one dropout draw over all of X at the
epoch's start (:meth:`gnnpipe.models.model.InputProjection.drop`), each row projected
once. Sparse features are encoded whole (one group: see :func:`first_reader_groups`).

No autograd graph is kept from a group's forward to its backward: a group is
projected without one (its rows of X after dropout gathered for the product only),
and its backward takes the weights' gradients from
:meth:`gnnpipe.models.model.InputProjection.weight_grads`, with the group's rows of
``det`` for the activation's derivative. So stage 0 holds ``det`` and X after dropout,
and nothing per group: what the whole encode held (its output, which autograd kept for
the activation, and X after dropout, kept for the weight's gradient).

A group is projected and back-propagated in blocks of rows (:func:`encode_block_rows`:
at most :data:`ENCODE_BLOCK_BYTES` of temporaries a block), not all at once: the
backward of a group of ``m`` rows gathers their rows of ``det``, of ``grad`` and of X
after dropout and forms the activation's derivative, about ``m x (3 H + 2 F)``
values. Group 0 is the first chunk's own and halo rows, and its backward ends the
epoch on stage 0, on top of everything the stage holds then: on the 200k systems
graph (GCN-32, C = 2, 171k rows in group 0) those temporaries were 0.31 GiB, and
they set stage 0's peak (a heap trace of the run, ad hoc). The weights' gradients
are then sums over blocks (a different order of the same additions). A group of every
row (sparse features' whole encode) goes at once: its product reuses the features'
transposed structure, which a block of rows would have to build again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import Tensor

from gnnpipe.engine.cross_epoch import call_with

__all__ = ["ENCODE_BLOCK_BYTES", "Encoded", "encode_block_rows", "first_reader_groups"]

#: The most bytes of temporaries one block of a group's encode or backward makes.
ENCODE_BLOCK_BYTES = 32 * 2**20


def encode_block_rows(in_width: int, out_width: int, element_size: int,
                      budget_bytes: int = ENCODE_BLOCK_BYTES) -> int:
    """Rows per block of a group's encode and backward: what ``budget_bytes`` holds
    of a block's temporaries, its rows of X after dropout (gathered, then masked:
    ``2 x in_width``) and of ``det``, ``grad`` and the activation's derivative
    (``3 x out_width``); at least 1. ``in_width`` 0 for sparse features (a block's
    rows of them are its stored values only)."""
    return max(1, budget_bytes // max(1, (2 * in_width + 3 * out_width) * element_size))


def first_reader_groups(local_ids: Mapping[int, Tensor] | Sequence[Tensor], order: Sequence[int], steps: range,
                        n_rows: int, *, split: bool = True) -> dict[int, Tensor]:
    """Rows of the row space grouped by the step (in ``steps``) of the first chunk of
    ``order`` that reads them: ``{t: rows first read by chunk order[t]}``, each in
    ascending order; rows no chunk at those steps reads are in no group.

    ``split=False``: every read row in the group of the first step (the whole encode
    before the first chunk, back-propagated after its backward, the last). For sparse
    features: projecting CSR rows group by group needs each group's own transposed
    structure for the backward, which costs more than spreading the cheap sparse
    projection saves (BlogCatalog, 8,189 features at 0.87 %, C = 8, one thread, timed
    ad hoc: 47-49 ms a forward + backward in groups against 15-17 ms whole; 86 % of the
    rows are the first chunk's anyway).

    Shapes: local_ids[k] int64 [num_local_k] (chunk k's own then halo rows, in the row
    space of ``n_rows``) -> each group int64 [m_t]."""
    if len(steps) == 0:
        return {}
    device = local_ids[order[steps[0]]].device
    never = steps.stop
    first = torch.full((n_rows,), never, dtype=torch.int64, device=device)
    ids = torch.cat([local_ids[order[t]] for t in steps])
    at = torch.cat([torch.full((local_ids[order[t]].numel(),), t, dtype=torch.int64, device=device)
                    for t in steps])
    first.scatter_reduce_(0, ids, at, reduce="amin")
    if not split:
        return {steps.start: (first < never).nonzero().squeeze(1)}
    by_step = torch.argsort(first, stable=True)
    counts = torch.bincount(first - steps.start, minlength=len(steps) + 1).tolist()
    parts = torch.split(by_step, counts)
    return {t: parts[t - steps.start] for t in steps}


@dataclass
class Encoded:
    """Stage 0's ``encode(X)`` for one epoch (or for the chunks run ahead of it): the
    rows chunks read (``det``), the gradient summed over every read (``grad``), and,
    unless the encode is the identity, the groups still to encode or to back-propagate
    (module docstring).

    ``project(rows)`` returns the encoded rows (no autograd graph); ``project(None)``
    all of them, without selecting rows (a group of every row: the projection's own
    whole-input path, whose sparse product reuses the features' transposed structure).
    ``accumulate(rows, h, grad_h)`` adds the weights' gradients of those rows (``rows``
    None: all), whose output was ``h``, for their output gradient ``grad_h``.

    ``block_rows``: a group's rows are projected and back-propagated that many at a
    time (0: all at once; module docstring).

    Shapes: det, grad [n_rows, H]; groups[t] int64 [m_t].
    """

    det: Tensor
    grad: Tensor
    project: Callable[[Tensor | None], Tensor] | None = None
    accumulate: Callable[[Tensor | None, Tensor, Tensor], None] | None = None
    groups: dict[int, Tensor] = field(default_factory=dict)
    pending: set[int] = field(default_factory=set)
    block_rows: int = 0

    @classmethod
    def constant(cls, x: Tensor) -> "Encoded":
        """The identity encode: chunks read ``x`` itself, whose gradient nothing needs."""
        return cls(det=x, grad=torch.zeros_like(x))

    @classmethod
    def grouped(cls, project: Callable[[Tensor | None], Tensor],
                accumulate: Callable[[Tensor | None, Tensor, Tensor], None], groups: dict[int, Tensor],
                n_rows: int, width: int, device: torch.device, dtype: torch.dtype,
                block_rows: int = 0) -> "Encoded":
        """An encode whose group ``t`` is projected by :meth:`encode` ``(t)`` and
        back-propagated by :meth:`backward` ``(t)``, ``block_rows`` rows at a time."""
        det = torch.empty(n_rows, width, device=device, dtype=dtype)
        return cls(det=det, grad=torch.zeros_like(det), project=project, accumulate=accumulate, groups=groups,
                   block_rows=block_rows)

    @classmethod
    def of_projection(cls, enc: Any, x: Any, groups: dict[int, Tensor], n_rows: int, *,
                      generator: torch.Generator | None, weights: dict[str, Tensor] | None) -> "Encoded":
        """The grouped encode of the input projection ``enc``
        (:class:`gnnpipe.models.model.InputProjection`, enabled) over ``x`` (the row
        space's features, dense or sparse): its dropout drawn now from ``generator``;
        with ``weights`` (a stash, :mod:`gnnpipe.engine.cross_epoch`) projected with
        those and their leaves take the gradients, which the step adds to the
        parameters', else the parameters do, as autograd would have put them."""
        dropped = enc.drop(x, generator)
        targets = weights or dict(enc.named_parameters())
        leaves = (targets["linear.weight"], targets["linear.bias"])

        def project(rows: Tensor | None) -> Tensor:
            with torch.no_grad():
                return call_with(enc, weights, dropped, rows=rows)

        def accumulate(rows: Tensor | None, h: Tensor, grad_h: Tensor) -> None:
            for leaf, g in zip(leaves, enc.weight_grads(dropped, rows, h, grad_h)):
                leaf.grad = g if leaf.grad is None else leaf.grad.add_(g)

        like = enc.linear.weight
        in_width = 0 if x.is_sparse else int(x.shape[1])  # as the stage tells them apart
        block_rows = encode_block_rows(in_width, enc.out_dim, like.element_size())
        return cls.grouped(project, accumulate, groups, n_rows, enc.out_dim, like.device, like.dtype, block_rows)

    def _rows(self, t: int) -> Tensor | None:
        """Group ``t``'s rows, None when it is every row (ascending and unique)."""
        rows = self.groups[t]
        return None if rows.numel() == self.det.shape[0] else rows

    def encode(self, t: int) -> None:
        """Project group ``t`` into ``det`` (before the chunk at step ``t`` reads it);
        nothing for the identity encode or an empty group."""
        if self.project is None or t not in self.groups or self.groups[t].numel() == 0:
            return
        rows = self._rows(t)
        if rows is None:
            self.det.copy_(self.project(None))
        else:
            for block in self._blocks(rows):
                self.det.index_copy_(0, block, self.project(block))
        self.pending.add(t)

    def backward(self, t: int) -> None:
        """Add group ``t``'s weight gradients from its summed output gradient (after
        the backward of the chunk at step ``t``, its last reader)."""
        if t not in self.pending:
            return
        self.pending.discard(t)
        rows = self._rows(t)
        if rows is None:
            self.accumulate(None, self.det, self.grad)  # type: ignore[misc]
            return
        for block in self._blocks(rows):
            self.accumulate(block, self.det.index_select(0, block), self.grad.index_select(0, block))  # type: ignore[misc]

    def _blocks(self, rows: Tensor) -> tuple[Tensor, ...]:
        """``rows`` in consecutive blocks of at most ``block_rows`` (views)."""
        return rows.split(self.block_rows) if 0 < self.block_rows < rows.numel() else (rows,)

    def check_done(self) -> None:
        """Raise if a group was encoded and not back-propagated (a schedule that
        skipped a chunk's backward: its weight gradient would be missing)."""
        if self.pending:
            raise RuntimeError(f"stage 0's encode: groups of steps {sorted(self.pending)} were encoded and not "
                               "back-propagated; expected every chunk's backward before the step")
