"""The autograd pieces of a pipeline stage's chunk compute (:mod:`gnnpipe.engine.stage`).

* :func:`gather_rows` reads a layer's ``h_local`` rows out of a buffer as an autograd
  node whose gradient lands in a sink, so that no gathered copy is kept alive only to
  read its ``.grad``, and applies the layer's input dropout to them in place;
* :func:`saved_holder` / :func:`unhold` / :func:`share_saved_output` let a layer's saved
  output be read from the next layer's buffer rather than kept twice;
* :func:`sunk_grad` and :func:`grad_or_zeros` read gradients that may not have flowed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from gnnpipe.models.layers import dropout_grad_in_place_, dropout_in_place_
from gnnpipe.models.masks import MaskRows

__all__ = ["gather_rows", "saved_holder", "unhold", "share_saved_output", "sunk_grad", "grad_or_zeros"]


class _GatherRows(torch.autograd.Function):
    """``h_local = buf[local_ids]`` as an autograd node whose gradient lands in a sink.

    The stage needs the gradient of each layer's gathered input ``h_local`` (its halo
    part goes to ``G_l``, its own part down the stage). Making ``h_local`` a leaf
    would keep every gathered ``[n_local, d]`` tensor alive from a chunk's forward to
    its backward only to read ``.grad``: the largest state of a pipelined stage, since
    ``n_local`` (own + halo rows) is 3.4x the own rows at C = 8 on the synthetic
    default. Through this node the gathered rows live only as long as the layer itself
    saves them (a GCN or GCNII layer saves none of them), and backward stops here: the
    scalar ``token`` is the leaf, ``buf`` is a constant.

    With ``drop = (p, keep)`` the node also applies the layer's input dropout mask
    (unscaled: the layer folds ``1 / (1 - p)`` into its weights) to the gathered rows in
    place, and to their gradient in backward, so that the sink holds the gradient of
    the rows *before* dropout: the layer is then called with
    :data:`~gnnpipe.models.layers.INPUT_DROPPED`. ``keep`` is the layer's mask rows
    (:class:`~gnnpipe.models.masks.MaskRows`), or None to draw the mask here as the
    layer would have (the same generator, the same shape: the same values). Applied
    out of place, the mask's multiply wrote a second ``[n_local, d]`` tensor per
    layer and chunk, forward and backward; on a dense graph that is several times N
    rows a layer (BlogCatalog, C = 8: 6.4 N).

    Shapes: buf [N, d]; local_ids [n_local]; output and the sunk gradient [n_local, d].
    """

    @staticmethod
    def forward(ctx: Any, token: Tensor, buf: Tensor, local_ids: Tensor, sink: list,  # type: ignore[override]
                alt: tuple[Tensor, Tensor] | None, extra: tuple[Tensor, Tensor] | None,
                drop: tuple[float, MaskRows | None] | None,
                used_rows: tuple[tuple[int, int], ...] | None) -> Tensor:
        ctx.sink = sink
        ctx.used_rows = used_rows
        if extra is not None:  # rows after these from a second buffer
            other, other_ids = extra
            n = local_ids.numel()
            out = buf.new_empty((n + other_ids.numel(), buf.shape[1]))
            torch.index_select(buf, 0, local_ids, out=out[:n])
            torch.index_select(other, 0, other_ids, out=out[n:])
        else:
            out = buf.index_select(0, local_ids)
            if alt is not None:  # rows taken from another buffer (cross-epoch: the history)
                alt_buf, pos = alt
                out.index_copy_(0, pos, alt_buf.index_select(0, local_ids[pos]))
        ctx.dropped = drop is not None
        if drop is not None:
            dropout_in_place_(ctx, out, *drop)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None, None, None, None, None]:  # type: ignore[override]
        if ctx.dropped:
            grad = dropout_grad_in_place_(ctx, grad, ctx.used_rows)
        ctx.sink.append(grad)
        return torch.zeros((), dtype=grad.dtype, device=grad.device), None, None, None, None, None, None, None


def gather_rows(buf: Tensor, local_ids: Tensor, alt: tuple[Tensor, Tensor] | None = None,
                extra: tuple[Tensor, Tensor] | None = None,
                drop: tuple[float, MaskRows | None] | None = None,
                used_rows: tuple[tuple[int, int], ...] | None = None) -> tuple[Tensor, list]:
    """``(h_local, sink)``: see :class:`_GatherRows`; after the backward through the
    layer, ``sink`` holds the gradient of ``h_local`` (empty when none flowed).
    ``alt = (other, pos)``: the rows at positions ``pos`` of ``h_local`` come from
    ``other`` instead of ``buf``. ``extra = (other, ids)``: ``h_local`` is
    ``buf[local_ids]`` followed by ``other[ids]`` (a way's own rows, then the rows it
    received from other ways, kept apart: :class:`~gnnpipe.engine.stage.Stage`).
    ``drop = (p, keep)``: ``h_local`` with the layer's input dropout applied (the
    sink's gradient is still that of the rows before it). ``used_rows``: runs
    ``(start, stop)`` of the rows whose gradient the caller reads; the backward applies
    the mask to those alone (the others' sunk gradient is left as it came; None: all)."""
    sink: list = []
    token = torch.zeros((), dtype=buf.dtype, device=buf.device, requires_grad=True)
    return _GatherRows.apply(token, buf, local_ids, sink, alt, extra, drop, used_rows), sink


def saved_holder(holders: list[list[Tensor]]) -> Any:
    """A pack hook that keeps each tensor autograd saves in a one-element list, kept in
    ``holders``, so that the stage can later point it at equal values elsewhere."""

    def pack(t: Tensor) -> list[Tensor]:
        h = [t]
        holders.append(h)
        return h
    return pack


def unhold(h: list[Tensor]) -> Tensor:
    return h[0]


def share_saved_output(holders: list[list[Tensor]], out: Tensor, copy: Tensor) -> list[list[Tensor]]:
    """Let a layer's backward read its output from ``copy`` (the rows just written into
    the next layer's buffer ``B_{l+1}``, equal to ``out`` bit for bit and not written
    again before the backward) and free ``out``'s own memory.

    A ReLU-ended layer (GCN, SAGE, GCNII) saves its output for the backward; without
    this the stage would hold every chunk's layer outputs twice, once saved and once
    in ``B_{l+1}`` (measured on the 200k-vertex GCN-32, 2 stages: peak 9.37 -> 8.05 GiB
    per worker). ``out`` stays the root of the
    layer's backward, which reads only its shape. Its memory is freed only when every
    saved tensor that shares it was pointed at ``copy``. Returns the holders it
    pointed at ``copy`` (a cross-epoch turn gives them their own copy again before it
    writes those rows of ``B_{l+1}``).

    Shapes: out and copy [num_own, d].
    """
    storage = out.untyped_storage()
    ptr = storage.data_ptr()
    if ptr == 0:
        return []
    shared = [h for h in holders if h[0].untyped_storage().data_ptr() == ptr]
    if not shared or any(h[0].shape != out.shape or h[0].stride() != out.stride()
                         or h[0].storage_offset() != out.storage_offset() for h in shared):
        return []
    for h in shared:
        h[0] = copy
    storage.resize_(0)
    return shared


def sunk_grad(sink: list, shape: tuple[int, int], like: Tensor) -> Tensor:
    """The gradient in ``sink`` (autograd sums every use of ``h_local`` before calling
    the node's backward once), or zeros when none flowed. It is taken out of the sink:
    a stage reads it once per layer, and the sinks of a chunk's layers live until the
    chunk's backward ends, so a gradient left in them would keep a ``[n_local, d]``
    tensor per layer alive through it (on the 200k-vertex GCN-32 at C = 8, R = 1: peak
    8.19 -> 7.72 GiB per worker, one run each, 2026-12-05).
    """
    return sink.pop() if sink else torch.zeros(shape, dtype=like.dtype, device=like.device)


def grad_or_zeros(t: Tensor) -> Tensor:
    return t.grad if t.grad is not None else torch.zeros_like(t)
