"""GNN layers: one layer computes its own rows from ``[own | halo]`` rows of its input.

Every layer follows the contract of ARCHITECTURE.md::

    y_own = layer(h_local, ops, h0=None)

``h_local`` is ``cat(own rows, halo rows)`` of the layer input (``ops.num_local`` rows),
the result is the layer output for the ``ops.num_own`` own rows. All neighbourhood
aggregation goes through ``ops.aggregate`` so that the same layer runs on the whole
graph (one-chunk ops, no halo), on one chunk of a pipeline stage, or on one part in
graph parallelism, and gives the same rows up to float re-association. Every other
operation of a layer is per row, which is what makes that true.

Dropout is applied to the layer *input* (``h_local``, own and halo rows), as Kipf &
Welling and GCNII do. A layer draws its own mask unless it is given ``keep``, the keep
mask of its ``h_local`` rows: a chunked engine passes each chunk the rows of one mask
per layer (:class:`gnnpipe.models.masks.EpochMasks`), so that every reader of a row
sees the same sample, as in a whole-graph run, and no reader draws.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .masks import MaskRows, PackedKeep, draw_keep, draw_packed

__all__ = [
    "dropout",
    "dropout_scale",
    "masked_dropout",
    "dropout_in_place_",
    "dropout_grad_in_place_",
    "INPUT_DROPPED",
    "scaled_weight",
    "GNNLayer",
    "GCNLayer",
    "SAGELayer",
    "GCNIILayer",
    "ResGCNPlusLayer",
    "MLPLayer",
]


def _glorot_(w: Tensor) -> Tensor:
    """Glorot/Xavier uniform, the initialisation of Kipf & Welling (and PyG's GCNConv)."""
    return nn.init.xavier_uniform_(w)


class _Dropout(torch.autograd.Function):
    """Dropout that keeps its mask for backward in at most 1 byte per entry: the random
    words it was cut from where ``p`` needs fewer than 8 bits an entry (1 bit at 0.5:
    :class:`~gnnpipe.models.masks.PackedKeep`, unpacked again in backward), else a bool
    mask; the kept entries are multiplied by ``scale`` (1: the caller folds
    ``1 / (1 - p)`` into the linear map that follows, :func:`dropout_scale`).

    ``x * float_mask`` would keep a float mask (4 bytes per entry) alive until
    backward; in a pipelined stage that mask covers own *and* halo rows of every layer
    of every chunk in flight, which made it the largest saved tensor. ``keep`` is the
    mask when given (drawn once for all readers of the rows), else it is drawn here; a
    :class:`MaskRows` is gathered again in backward and nothing is saved.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, p: float, keep: Tensor | MaskRows | None,  # type: ignore[override]
                generator: torch.Generator | None, scale: float) -> Tensor:
        ctx.scale = scale
        return _masked(x, _take_mask(ctx, x, p, keep, generator), scale)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None, None]:  # type: ignore[override]
        return _masked(grad, _mask_again(ctx), ctx.scale), None, None, None, None


def _take_mask(ctx: Any, x: Tensor, p: float, keep: Tensor | MaskRows | None,
               generator: torch.Generator | None) -> Tensor:
    """The keep mask to apply to ``x`` in an autograd function's forward, recorded on
    ``ctx`` for :func:`_mask_again` in the fewest bytes: the rows of a larger mask
    (:class:`MaskRows`: a reference, nothing saved), the random words of a mask drawn
    here where ``p`` needs fewer than 8 bits an entry, else the bool mask (saved with
    ``ctx.save_for_backward``, so that saved-tensor hooks see it).

    ``keep`` (bool or :class:`MaskRows`): the mask the caller drew; None: drawn here
    from ``generator`` (default: torch's default generator) with :func:`draw_packed`.

    Shapes: x [n, d] -> bool [n, d].
    """
    ctx.mask_rows = ctx.packed = None
    if isinstance(keep, MaskRows):
        # The full mask and the row ids outlive the backward anyway (the stage holds
        # them): keep a reference, not a [rows, d] copy.
        ctx.mask_rows = keep
        return keep.gather()
    saved = keep
    if keep is None:
        packed = draw_packed(x.shape, p, generator=generator, device=x.device)
        saved = keep = packed.unpack()
        if packed.bits < 8:
            # Fewer bytes than the bool mask (an eighth at p = 0.5): keep the words and
            # unpack them again in backward. Only the words are saved (a stage moves
            # saved tensors into its arena); ctx keeps what describes them.
            ctx.packed = (packed.shape, packed.bits, packed.threshold)
            saved = packed.words
    ctx.save_for_backward(saved)
    return keep


def _mask_again(ctx: Any) -> Tensor:
    """In backward, the mask :func:`_take_mask` applied in forward."""
    if ctx.mask_rows is not None:
        return ctx.mask_rows.gather()
    (saved,) = ctx.saved_tensors
    return PackedKeep(saved, *ctx.packed).unpack() if ctx.packed is not None else saved


def dropout_in_place_(ctx: Any, x: Tensor, p: float, keep: MaskRows | None = None) -> Tensor:
    """In an autograd function's forward: a layer's input dropout mask applied to ``x``
    in place (unscaled: the layer folds ``1 / (1 - p)`` into its weights, called with
    :data:`INPUT_DROPPED`), recorded on ``ctx`` for :func:`dropout_grad_in_place_`.
    ``x`` must be a tensor no one else reads (rows just gathered or received). ``keep``:
    the layer's mask rows, or None to draw the mask as the layer would (torch's default
    generator, ``x``'s shape: the same values). Out of place, the multiply wrote a second
    ``[n, d]`` tensor each way.

    Shapes: x [n, d] -> x."""
    return x.mul_(_factor(_take_mask(ctx, x, p, keep, None)))


def dropout_grad_in_place_(ctx: Any, grad: Tensor, rows: tuple[tuple[int, int], ...] | None = None) -> Tensor:
    """In the same function's backward: the mask of :func:`dropout_in_place_` applied to
    the gradient in place (the layer's gradient of the dropped rows is a fresh tensor
    no one else reads). ``rows``: runs ``(start, stop)`` of the rows to apply it to, the
    only ones the caller reads (None: all).

    Shapes: grad [n, d] -> [n, d]."""
    grad = grad.contiguous()
    factor = _factor(_mask_again(ctx))
    if rows is None:
        return grad.mul_(factor)
    for a, b in rows:
        grad[a:b].mul_(factor[a:b])
    return grad


class _InputDropped:
    """The type of :data:`INPUT_DROPPED`."""

    def __repr__(self) -> str:
        return "INPUT_DROPPED"


#: Passed as a layer's ``keep``: the caller already applied the layer's input dropout
#: mask to ``h_local`` (unscaled: the layer still folds ``1 / (1 - p)`` into its
#: weights). Only for a layer whose :attr:`GNNLayer.drops_input_rows` is True.
INPUT_DROPPED = _InputDropped()


def _masked(x: Tensor, keep: Tensor, scale: float) -> Tensor:
    """``x * keep * scale``: one pass when ``scale`` is 1 (folded elsewhere), two else."""
    out = x.mul(_factor(keep))
    return out if scale == 1.0 else out.mul_(scale)


def apply_keep(x: Tensor, keep: Tensor) -> Tensor:
    """``x`` with the bool mask ``keep`` applied, kept entries unscaled (a new tensor):
    what :func:`dropout` ``(..., scaled=False)`` returns for a mask drawn beforehand.

    Shapes: x, keep [n, d] -> [n, d]."""
    return _masked(x, keep, 1.0)


def _factor(keep: Tensor) -> Tensor:
    """A bool mask as the factor of a multiply: its bytes read as uint8 (0 or 1, no
    copy). ``float * uint8`` is about 1.5x as fast as ``float * bool`` on the CPU
    (``bench/chunk_overhead.py``) and gives the same values."""
    return keep.view(torch.uint8) if keep.dtype == torch.bool else keep


def dropout_scale(p: float, training: bool) -> float:
    """The factor ``1 / (1 - p)`` of the kept entries of inverted dropout (1 when
    dropout is off): what a caller of ``dropout(..., scaled=False)`` multiplies into
    the linear map that follows."""
    return 1.0 / (1.0 - p) if training and p != 0.0 else 1.0


def scaled_weight(weight: Tensor, scale: float) -> Tensor:
    """``weight * scale`` (``weight`` itself when ``scale`` is 1): folding dropout's
    ``1 / (1 - p)`` into a [in, out] weight costs in x out values instead of a pass
    over every dropped entry, forward and backward."""
    return weight if scale == 1.0 else weight * scale


def masked_dropout(x: Tensor, p: float, training: bool, keep: Tensor | MaskRows | None = None,
                   generator: torch.Generator | None = None) -> tuple[Tensor, float]:
    """``(x`` with dropout's mask applied and its kept entries left unscaled``, scale)``:
    the caller folds ``scale`` (``1 / (1 - p)``, or 1) into the linear map that follows
    (:func:`scaled_weight`). See :func:`dropout` (``scaled=False``)."""
    return dropout(x, p, training, keep, generator, scaled=False), dropout_scale(p, training)


def dropout(x: Tensor, p: float, training: bool, keep: Tensor | MaskRows | None = None,
            generator: torch.Generator | None = None, *, scaled: bool = True) -> Tensor:
    """Inverted dropout: each entry is zeroed with probability ``p`` and the others are
    scaled by ``1 / (1 - p)``, the same distribution as ``F.dropout``.

    ``scaled=False`` leaves the kept entries unscaled: the caller multiplies
    :func:`dropout_scale` into the linear map that follows (:func:`scaled_weight`), so
    that dropout is one multiply by the mask forward and one backward, not two each
    (on a pipeline stage's chunk they run over every own and halo row it reads).

    ``keep`` (bool, True = kept, or the :class:`MaskRows` of a larger mask) is the mask
    to apply when the caller drew it (one mask per row shared by every reader of the
    row, :mod:`gnnpipe.models.masks`); otherwise one is drawn from ``generator``
    (default: torch's default generator). :data:`INPUT_DROPPED`: the caller already
    applied the mask to ``x``, in place (a pipeline stage as it gathers a chunk's rows,
    graph mode on the rows its halo exchange wrote).

    Why not ``F.dropout``: on CPU its Bernoulli sampling is the most expensive step of
    a wide layer (about half of a GCN epoch on Cora). The mask is drawn by
    :func:`~gnnpipe.models.masks.draw_keep` (each 64-bit draw cut into lanes of the fewest
    bits on which ``p`` is exact: one bit an entry at 0.5, 16 bits where ``p`` is not a
    multiple of 2^-8, so the keep probability is ``p`` rounded to a multiple of 2^-16;
    the kept entries are scaled by ``1 / (1 - p)`` as ``F.dropout`` does): one forward + backward over a
    [5196, 100] input took 2.8 ms with a float ``rand`` draw and 1.7 ms with 16-bit lanes (one
    thread, torch 2.13, bench/results/chunk_overhead*.json). The mask kept for backward
    is its random words (1 bit an entry at p = 0.5) or a bool tensor (:class:`_Dropout`).
    The input projection also applies it to the stored values of sparse (CSR) features
    (:class:`~gnnpipe.models.model.InputProjection`): a zero entry stays zero under
    dropout, so dropping only the non-zeros is the same distribution.

    Shapes: x [n, d] -> [n, d]; keep [n, d].
    """
    if not training or p == 0.0:
        return x
    scale = dropout_scale(p, training) if scaled else 1.0
    if keep is INPUT_DROPPED:  # the caller applied the mask (unscaled) as it gathered x
        return x if scale == 1.0 else x * scale
    if not x.requires_grad:
        if keep is None:
            keep = draw_keep(x.shape, p, generator=generator, device=x.device)
        elif isinstance(keep, MaskRows):
            keep = keep.gather()
        return _masked(x, keep, scale)
    return _Dropout.apply(x, p, keep, generator, scale)


class GNNLayer(nn.Module):
    """Base class of a layer: ``forward(h_local, ops, h0=None, keep=None) -> own rows``.

    Attributes:
        in_dim: width of the layer input (``h_local.shape[1]``).
        out_dim: width of the layer output.
        needs_h0: True when the layer reads the input projection ``h0`` (GCNII).
        reduces: the aggregations (``ChunkOps`` reduce names) its forward calls, so
            that a caller builds only those operators.

    ``keep`` is the input dropout's mask for the ``h_local`` rows when the caller drew
    it (:func:`dropout`), or :data:`INPUT_DROPPED` when the caller applied it; a layer
    without input dropout ignores it.

    ``drops_input_rows``: True when the layer's input dropout applies to ``h_local``
    as given, every row (the first thing its forward does, drawing from torch's
    default generator when ``keep`` is None), so that a caller that gathers
    ``h_local`` for the layer may apply that dropout in place as it gathers
    (:func:`gnnpipe.engine.stage_autograd.gather_rows`; :attr:`in_place_dropout`) and
    pass :data:`INPUT_DROPPED`. False where the dropout applies to something computed
    from ``h_local`` (ResGCN+: after its norm) or to its own rows only (MLP).

    Shapes: h_local [ops.num_local, in_dim]; h0 [ops.num_own, H]; keep [ops.num_local, in_dim];
    output [ops.num_own, out_dim].
    """

    needs_h0: bool = False
    drops_input_rows: bool = False
    reduces: tuple[str, ...] = ()

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim = int(in_dim)
        self.out_dim = int(out_dim)

    @property
    def input_dropout(self) -> float:
        """The dropout probability this layer applies to its ``h_local`` rows (0: it
        applies none and ignores ``keep``)."""
        return float(getattr(self, "dropout", 0.0))

    @property
    def in_place_dropout(self) -> float:
        """The input dropout a caller that gathers or receives ``h_local`` for this layer
        may apply in place (:func:`dropout_in_place_`, then call the layer with
        :data:`INPUT_DROPPED`): ``input_dropout`` where ``drops_input_rows`` and the
        layer is training, else 0."""
        return self.input_dropout if self.drops_input_rows and self.training else 0.0

    @property
    def aggregates_input_rows(self) -> bool:
        """True when every aggregation of the layer reads the rows of ``h_local``
        changed by nothing trainable (at most its input dropout). A row the caller holds
        constant (a stale read) then needs no gradient through the aggregation, and the
        caller may pass operators that do not compute it
        (:meth:`gnnpipe.kernels.ChunkOps.with_constant_rows`). False where the rows
        are first multiplied by a weight or normalised: the weight's gradient needs
        every row's."""
        return False

    def forward(self, h_local: Tensor, ops: Any, h0: Tensor | None = None,
                keep: Tensor | None = None) -> Tensor:  # pragma: no cover
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"in_dim={self.in_dim}, out_dim={self.out_dim}"


def projects_first(in_dim: int, out_dim: int) -> bool:
    """Whether :func:`_aggregate_linear` transforms the rows before it aggregates them
    (the output narrower than the input)."""
    return out_dim < in_dim


def _aggregate_linear(h_local: Tensor, ops: Any, weight: Tensor, reduce: str,
                      bias: Tensor | None = None) -> Tensor:
    """``aggregate(h_local) @ weight (+ bias)``, multiplying on the narrower side first.

    ``A (H W) == (A H) W``: when the output is narrower than the input the rows are
    transformed first (so the sparse product moves ``out_dim`` columns), otherwise the
    product aggregates ``in_dim`` columns and only the own rows are transformed. The
    result is always a fresh tensor (never the aggregation's own output), so callers
    may modify it in place.

    Shapes: h_local [num_local, in]; weight [in, out]; bias [out]; result [num_own, out].
    """
    if projects_first(weight.shape[0], weight.shape[1]):
        y = ops.aggregate(h_local @ weight, reduce)
        return y + bias if bias is not None else y.clone()
    agg = ops.aggregate(h_local, reduce)
    return torch.addmm(bias, agg, weight) if bias is not None else agg @ weight


class _ActivatedLayer(GNNLayer):
    """A layer with input dropout and an optional ReLU (GCN, GraphSAGE, MLP); its
    subclass creates its weights (Glorot) and bias (zeros), in a fixed order."""

    def __init__(self, in_dim: int, out_dim: int, *, dropout: float = 0.0, activation: bool = True) -> None:
        super().__init__(in_dim, out_dim)
        self.dropout = float(dropout)
        self.activation = bool(activation)


def _glorot_weight(in_dim: int, out_dim: int) -> nn.Parameter:
    return nn.Parameter(_glorot_(torch.empty(in_dim, out_dim)))


class _DenseWeightLayer(_ActivatedLayer):
    """Shared parameters of the layers with one weight ``[in_dim, out_dim]`` and an
    optional bias: GCN and MLP."""

    def __init__(self, in_dim: int, out_dim: int, *, dropout: float = 0.0,
                 activation: bool = True, bias: bool = True) -> None:
        super().__init__(in_dim, out_dim, dropout=dropout, activation=activation)
        self.weight = _glorot_weight(in_dim, out_dim)
        self.bias = nn.Parameter(torch.zeros(out_dim)) if bias else None


class GCNLayer(_DenseWeightLayer):
    """GCN (Kipf & Welling): ``h' = act(A_hat dropout(h) W + b)``,
    ``A_hat = D^-1/2 (A + I) D^-1/2`` (the ``"gcn"`` reduce of ChunkOps).

    Shapes: h_local [num_local, in_dim] -> [num_own, out_dim].
    """

    drops_input_rows = True
    reduces = ("gcn",)

    @property
    def aggregates_input_rows(self) -> bool:
        return not projects_first(self.in_dim, self.out_dim)

    def forward(self, h_local: Tensor, ops: Any, h0: Tensor | None = None,
                keep: Tensor | None = None) -> Tensor:
        h, s = masked_dropout(h_local, self.dropout, self.training, keep)
        out = _aggregate_linear(h, ops, scaled_weight(self.weight, s), "gcn", self.bias)
        # ``out`` is a fresh tensor that no backward needs: ReLU may overwrite it.
        return F.relu(out, inplace=True) if self.activation else out


class SAGELayer(_ActivatedLayer):
    """GraphSAGE with mean aggregation:
    ``h' = act(h_v W_self + mean_{u in N(v)} h_u W_nbr + b)`` on ``dropout(h)``.

    Shapes: h_local [num_local, in_dim] -> [num_own, out_dim].
    """

    drops_input_rows = True
    reduces = ("mean",)

    def __init__(self, in_dim: int, out_dim: int, *, dropout: float = 0.0,
                 activation: bool = True, bias: bool = True) -> None:
        super().__init__(in_dim, out_dim, dropout=dropout, activation=activation)
        self.weight_self = _glorot_weight(in_dim, out_dim)
        self.weight_nbr = _glorot_weight(in_dim, out_dim)
        self.bias = nn.Parameter(torch.zeros(out_dim)) if bias else None

    @property
    def aggregates_input_rows(self) -> bool:
        return not projects_first(self.in_dim, self.out_dim)

    def forward(self, h_local: Tensor, ops: Any, h0: Tensor | None = None,
                keep: Tensor | None = None) -> Tensor:
        h, s = masked_dropout(h_local, self.dropout, self.training, keep)
        out = _sage_conv(h, ops, scaled_weight(self.weight_self, s), scaled_weight(self.weight_nbr, s), self.bias)
        return F.relu(out, inplace=True) if self.activation else out


def _sage_conv(h_local: Tensor, ops: Any, w_self: Tensor, w_nbr: Tensor, bias: Tensor | None) -> Tensor:
    """``h_own W_self + mean_nbr(h) W_nbr (+ b)``.

    Shapes: h_local [num_local, in]; w_self, w_nbr [in, out]; result [num_own, out].
    """
    own = h_local[: ops.num_own]
    nbr = _aggregate_linear(h_local, ops, w_nbr, "mean", bias)
    # nbr is fresh and addmm's backward does not need it: accumulate in place.
    return nbr.addmm_(own, w_self)


class GCNIILayer(GNNLayer):
    """GCNII (Chen et al. 2020), one layer with 1-based index ``l``:
    ``h' = act(((1-alpha) A_hat h + alpha h0) ((1-beta_l) I + beta_l W_l))``,
    ``beta_l = log(lambda / l + 1)``, dropout on the layer input ``h`` (not on ``h0``).

    Shapes: h_local [num_local, H]; h0 [num_own, H] -> [num_own, H].
    """

    needs_h0 = True
    drops_input_rows = True
    reduces = ("gcn",)
    aggregates_input_rows = True  # type: ignore[assignment]

    def __init__(self, dim: int, layer_index: int, *, alpha: float = 0.1, lambda_: float = 0.5,
                 dropout: float = 0.0, activation: bool = True) -> None:
        super().__init__(dim, dim)
        if layer_index < 1:
            raise ValueError(f"GCNII layer_index is 1-based, found {layer_index}")
        self.layer_index = int(layer_index)
        self.alpha = float(alpha)
        self.lambda_ = float(lambda_)
        self.beta = math.log(self.lambda_ / self.layer_index + 1.0)
        self.dropout = float(dropout)
        self.activation = bool(activation)
        # The GCNII reference code initialises uniform(-1/sqrt(H), 1/sqrt(H)).
        stdv = 1.0 / math.sqrt(dim)
        self.weight = nn.Parameter(torch.empty(dim, dim).uniform_(-stdv, stdv))

    def forward(self, h_local: Tensor, ops: Any, h0: Tensor | None = None,
                keep: Tensor | None = None) -> Tensor:
        if h0 is None:
            raise ValueError("GCNIILayer needs h0 (the input projection's output for the own rows)")
        h, s = masked_dropout(h_local, self.dropout, self.training, keep)
        agg = ops.aggregate(h, "gcn")
        if s != 1.0:  # dropout's 1 / (1 - p), on the own rows rather than every row read
            agg = agg * s
        # (1-alpha) A_hat h + alpha h0 in one pass.
        support = torch.lerp(agg, h0, self.alpha)
        # (1-beta) support + beta support W in one fused kernel.
        out = torch.addmm(support, support, self.weight, beta=1.0 - self.beta, alpha=self.beta)
        return F.relu(out, inplace=True) if self.activation else out

    def extra_repr(self) -> str:
        return f"dim={self.in_dim}, l={self.layer_index}, alpha={self.alpha}, beta={self.beta:.4f}"


class ResGCNPlusLayer(GNNLayer):
    """ResGCN+ (DeeperGCN "res+"): pre-activation residual block
    ``h' = h + conv(dropout(relu(LayerNorm(h))))`` with a SAGE-style mean conv.

    As in DeeperGCN the first layer (``first=True``) is the bare conv, with no norm,
    activation, dropout or residual (its input comes straight from the input
    projection; the normalisation of the last block's output is in the model's
    classifier). ``in_dim`` may differ from ``out_dim`` only for the first layer.

    Shapes: h_local [num_local, in_dim] -> [num_own, out_dim].
    """

    reduces = ("mean",)

    def __init__(self, in_dim: int, out_dim: int, *, first: bool = False, dropout: float = 0.0) -> None:
        super().__init__(in_dim, out_dim)
        if not first and in_dim != out_dim:
            raise ValueError(f"a residual ResGCN+ block needs in_dim == out_dim, found {in_dim} -> {out_dim}")
        self.first = bool(first)
        self.dropout = float(dropout)
        self.norm = None if first else nn.LayerNorm(in_dim)
        self.weight_self = nn.Parameter(_glorot_(torch.empty(in_dim, out_dim)))
        self.weight_nbr = nn.Parameter(_glorot_(torch.empty(in_dim, out_dim)))
        self.bias = nn.Parameter(torch.zeros(out_dim))

    @property
    def input_dropout(self) -> float:
        return 0.0 if self.first else self.dropout

    @property
    def aggregates_input_rows(self) -> bool:
        # A block aggregates its normalised rows; the bare first conv its input's.
        return self.first and not projects_first(self.in_dim, self.out_dim)

    def forward(self, h_local: Tensor, ops: Any, h0: Tensor | None = None,
                keep: Tensor | None = None) -> Tensor:
        if self.first:
            return _sage_conv(h_local, ops, self.weight_self, self.weight_nbr, self.bias)
        z, s = masked_dropout(F.relu(self.norm(h_local)), self.dropout, self.training, keep)
        conv = _sage_conv(z, ops, scaled_weight(self.weight_self, s), scaled_weight(self.weight_nbr, s), self.bias)
        return conv + h_local[: ops.num_own]

    def extra_repr(self) -> str:
        return f"in_dim={self.in_dim}, out_dim={self.out_dim}, first={self.first}"


class MLPLayer(_DenseWeightLayer):
    """A per-row linear layer that ignores the halo: ``h' = act(dropout(h_own) W + b)``.

    The graph-free baseline of the GCN-vs-MLP comparison.

    Shapes: h_local [num_local, in_dim] -> [num_own, out_dim].
    """

    def forward(self, h_local: Tensor, ops: Any, h0: Tensor | None = None,
                keep: Tensor | None = None) -> Tensor:
        if keep is not None:
            keep = keep.head(ops.num_own) if isinstance(keep, MaskRows) else keep[: ops.num_own]
        h, s = masked_dropout(h_local[: ops.num_own], self.dropout, self.training, keep)
        weight = scaled_weight(self.weight, s)
        out = h @ weight if self.bias is None else torch.addmm(self.bias, h, weight)
        return F.relu(out, inplace=True) if self.activation else out
