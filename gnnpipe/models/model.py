"""``DeepGNN``: input projection, L GNN layers, classifier; and ``build_model``.

A model is three pieces, so that the engine can cut it into pipeline stages:

* ``encode``: per-row input projection ``F -> H`` (dropout, linear, ReLU; identity
  when ``input_proj`` is off). Its output is ``h0`` (GCNII reads it in every layer).
* ``layers``: ``nn.ModuleList`` of L :class:`GNNLayer`; layer ``l`` (1-based) is
  ``layers[l - 1]``; stage ``s`` runs ``layers[a:b]``.
* ``decode``: per-row classifier ``H -> C`` (dropout, linear; identity when
  ``classifier`` is off, and then the last layer outputs the logits with no activation).

``forward(x, ops)`` with the one-chunk ops of the whole graph is the reference.

Sparse features (a :class:`~gnnpipe.data.sparse.SparseFeatures`, CSR) are consumed by
``encode`` itself: dropout on the stored values, a CSR x dense product
(:func:`gnnpipe.kernels.sparse_input.sparse_linear`), bias and activation. A model
without an input projection (the plain models' default) reads X in layer 1, whose
dense code paths need dense rows: :func:`model_input` densifies X once there (one INFO
line) rather than per epoch. Dense features take exactly the dense path.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from gnnpipe.data.sparse import SparseFeatures
from gnnpipe.errors import ConfigError
from gnnpipe.kernels.sparse_input import sparse_linear, sparse_weight_grad

from .layers import (GCNIILayer, GCNLayer, GNNLayer, MLPLayer, ResGCNPlusLayer, SAGELayer, apply_keep,
                     dropout_scale, masked_dropout, scaled_weight)
from .masks import draw_keep

__all__ = ["MODEL_NAMES", "DroppedInput", "InputProjection", "Classifier", "DeepGNN", "build_model", "model_input"]

logger = logging.getLogger(__name__)

#: The model names that :func:`build_model` accepts.
MODEL_NAMES: tuple[str, ...] = ("gcn", "sage", "gcnii", "resgcn+", "mlp")

# Models whose structure needs the input projection and the classifier.
_NEEDS_PROJ_AND_CLASSIFIER = ("gcnii", "resgcn+")


def _init_row_linear(module: nn.Module, in_dim: int, out_dim: int, enabled: bool, dropout: float) -> None:
    """The attributes the per-row linear maps (input projection, classifier) share:
    without the map the module is the identity, so its output width is its input's."""
    module.enabled = bool(enabled)
    module.in_dim = int(in_dim)
    module.out_dim = int(out_dim) if enabled else int(in_dim)
    module.dropout = float(dropout)


@dataclass(frozen=True)
class DroppedInput:
    """The input projection's input after its dropout, drawn once: dense, the input
    and its keep mask (``keep``, applied by :meth:`select`, kept entries unscaled), or
    the input with the mask applied (``keep`` None); sparse, the features and their
    stored values after dropout. ``scale`` (``1 / (1 - p)``, or 1) is folded into the
    projection's weight. Every group of rows projected from one ``DroppedInput``
    (``InputProjection.forward(d, rows=...)``) sees the same draw, so the groups
    together give one whole forward's values.

    Why the mask and not the dropped copy: a pipeline's stage 0 keeps its epoch's draw
    from the first group's encode to the last group's backward, and the bool mask is a
    quarter of a float32 copy of X (the 200k systems graph: 12 MiB against 49 MiB),
    beside the X it holds anyway.

    Shapes: x [n, F] (Tensor or SparseFeatures); values [nnz] (sparse only); keep bool
    [n, F] (dense only).
    """

    x: Tensor | SparseFeatures
    scale: float
    values: Tensor | None = None
    keep: Tensor | None = None

    def select(self, rows: Tensor | None) -> "DroppedInput":
        """Rows ``rows`` of it, in that order, with the mask applied (all of it when
        None: itself, or the masked input).

        Shapes: rows int64 [m] -> x [m, F]."""
        if isinstance(self.x, SparseFeatures):
            if rows is None:
                return self
            xs = SparseFeatures(self.x.crow, self.x.col, self.values, self.x.shape).index_select(0, rows)
            return DroppedInput(xs, self.scale, xs.values)
        x = self.x if rows is None else self.x.index_select(0, rows)
        if self.keep is None:
            return self if rows is None else DroppedInput(x, self.scale)
        return DroppedInput(apply_keep(x, self.keep if rows is None else self.keep.index_select(0, rows)),
                            self.scale)


class InputProjection(nn.Module):
    """Per-row ``h0 = act(dropout(x) W + b)``; identity when disabled.

    ``x`` may be a :class:`SparseFeatures` (on the weight's device and dtype): dropout
    then draws one uniform per *stored* value (a zero stays zero under dense dropout
    too, so the distribution of ``dropout(x)`` is the same; the kept values are scaled
    by ``1 / (1 - p)``) and the product is the CSR x dense :func:`sparse_linear`, whose
    backward gives the gradients of ``W`` and ``b`` (X needs none). Disabled, a sparse
    ``x`` is returned densified (callers should densify once: :func:`model_input`).

    ``x`` may also be a :class:`DroppedInput` from :meth:`drop` (dropout already drawn),
    with ``rows``: then only those rows are projected (a pipeline's stage 0 encodes its
    rows group by group as chunks first read them, without autograd, and takes the
    weights' gradients from :meth:`weight_grads`: :mod:`gnnpipe.engine.encode_groups`).

    Shapes: x [n, in_dim] -> [n, out_dim] (out_dim == in_dim when disabled); with rows
    int64 [m] -> [m, out_dim].
    """

    def __init__(self, in_dim: int, out_dim: int, *, enabled: bool = True, dropout: float = 0.0,
                 activation: bool = True) -> None:
        super().__init__()
        _init_row_linear(self, in_dim, out_dim, enabled, dropout)
        self.activation = bool(activation)
        self.linear = nn.Linear(in_dim, out_dim) if enabled else None

    def drop(self, x: Tensor | SparseFeatures, generator: torch.Generator | None = None) -> DroppedInput:
        """Dropout of ``x`` (enabled projections only), drawn from ``generator``
        (default: torch's default generator): the draw :meth:`forward` makes."""
        if isinstance(x, SparseFeatures):
            # The values need no gradient: dropout's no-grad path, one draw per stored value.
            values, s = masked_dropout(x.values, self.dropout, self.training, generator=generator)
            return DroppedInput(x, s, values)
        if x.requires_grad or not self.training or self.dropout == 0.0:
            xd, s = masked_dropout(x, self.dropout, self.training, generator=generator)
            return DroppedInput(xd, s)
        # The mask masked_dropout would draw (the same generator and shape: the same
        # values), applied as rows are selected.
        keep = draw_keep(x.shape, self.dropout, generator=generator, device=x.device)
        return DroppedInput(x, dropout_scale(self.dropout, True), keep=keep)

    def forward(self, x: Tensor | SparseFeatures | DroppedInput, generator: torch.Generator | None = None,
                rows: Tensor | None = None) -> Tensor:
        """``generator``: where dropout draws from (default: torch's default generator);
        ``rows``: project only these rows of a :class:`DroppedInput`."""
        if self.linear is None:
            return x.to_dense() if isinstance(x, SparseFeatures) else x  # type: ignore[return-value]
        d = (x if isinstance(x, DroppedInput) else self.drop(x, generator)).select(rows)
        w = scaled_weight(self.linear.weight, d.scale)
        if isinstance(d.x, SparseFeatures):
            h = sparse_linear(d.x, w, self.linear.bias, values=d.values)
        else:
            h = F.linear(d.x, w, self.linear.bias)
        return F.relu(h) if self.activation else h

    def weight_grads(self, d: DroppedInput, rows: Tensor | None, h: Tensor, grad_h: Tensor) -> tuple[Tensor, Tensor]:
        """``(grad of linear.weight, grad of linear.bias)`` of ``forward(d, rows=rows)``,
        whose output was ``h``, for the output gradient ``grad_h``: what autograd would
        give, without a graph kept from the forward (a pipeline's stage 0 projects its
        rows group by group and keeps only their outputs, which it needs anyway:
        :mod:`gnnpipe.engine.encode_groups`). ReLU's derivative is read off ``h > 0``,
        as autograd reads it off its saved output.

        Shapes: h, grad_h [m, out_dim] (m: the rows, or all n) -> [out_dim, in_dim], [out_dim].
        """
        gz = grad_h * (h > 0) if self.activation else grad_h
        d = d.select(rows)
        if isinstance(d.x, SparseFeatures):
            gw = sparse_weight_grad(d.x, d.values, gz).contiguous()
        else:
            gw = gz.t() @ d.x
        return (gw * d.scale if d.scale != 1.0 else gw), gz.sum(0)


class Classifier(nn.Module):
    """Per-row ``logits = dropout(pre(h)) W + b``; identity when disabled.

    ``pre`` is LayerNorm then ReLU for ResGCN+ (the closing normalisation of a
    pre-activation network, as in DeeperGCN), nothing otherwise. ``keep`` is the
    dropout's mask of the rows when the caller drew it.

    Shapes: h [n, in_dim] -> [n, num_classes]; keep [n, in_dim].
    """

    def __init__(self, in_dim: int, num_classes: int, *, enabled: bool = True, dropout: float = 0.0,
                 pre_norm: bool = False) -> None:
        super().__init__()
        _init_row_linear(self, in_dim, num_classes, enabled, dropout)
        self.norm = nn.LayerNorm(in_dim) if (enabled and pre_norm) else None
        self.linear = nn.Linear(in_dim, num_classes) if enabled else None

    @property
    def input_dropout(self) -> float:
        """The dropout probability applied to its input rows (0 when disabled), as
        :attr:`GNNLayer.input_dropout`."""
        return self.dropout if self.linear is not None else 0.0

    def forward(self, h: Tensor, keep: Tensor | None = None) -> Tensor:
        if self.linear is None:
            return h
        if self.norm is not None:
            h = F.relu(self.norm(h))
        h, s = masked_dropout(h, self.dropout, self.training, keep)
        return F.linear(h, scaled_weight(self.linear.weight, s), self.linear.bias)


class DeepGNN(nn.Module):
    """Input projection, L GNN layers, classifier.

    Attributes:
        model_name: one of :data:`MODEL_NAMES`.
        encode, layers, decode: see the module docstring.
        layer_dims: L+1 ints, the input width of each layer and the output width of
            the last (the widths of the stage-boundary buffers).
        needs_h0: True when some layer reads ``h0`` (GCNII); ``h0_dim`` is its width.
        reduces: the aggregations its layers call (sorted ``ChunkOps`` reduce names):
            the operators a runner builds (``ChunkOps.build(..., reduces=...)``).

    Shapes: forward x [N, F] -> logits [N, C].
    """

    def __init__(self, model_name: str, encode: InputProjection, layers: list[GNNLayer],
                 decode: Classifier) -> None:
        super().__init__()
        self.model_name = model_name
        self.encode = encode
        self.layers = nn.ModuleList(layers)
        self.decode = decode
        self.layer_dims: list[int] = [layers[0].in_dim] + [layer.out_dim for layer in layers]
        self.needs_h0 = any(layer.needs_h0 for layer in layers)
        self.reduces: tuple[str, ...] = tuple(sorted({r for layer in layers for r in layer.reduces}))
        self.h0_dim = encode.out_dim
        self.num_classes = decode.out_dim

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def forward(self, x: Tensor | SparseFeatures, ops: Any) -> Tensor:
        """Whole-graph reference forward with one-chunk ops (no halo).

        Shapes: x [N, F] (dense or SparseFeatures) -> logits [N, C].
        """
        h0 = self.encode(x)
        h = h0
        for layer in self.layers:
            h = layer(h, ops, h0 if layer.needs_h0 else None)
        return self.decode(h)

    def layer_parameters(self) -> Iterator[nn.Parameter]:
        """Parameters of the GNN layers (GCNII: weight decay 0.01 on these)."""
        return self.layers.parameters()

    def dense_parameters(self) -> Iterator[nn.Parameter]:
        """Parameters of the input projection and classifier (GCNII: weight decay 5e-4)."""
        yield from self.encode.parameters()
        yield from self.decode.parameters()


def model_input(model: Any, x: Tensor | SparseFeatures, *, device: Any = None,
                dtype: torch.dtype | None = None) -> Tensor | SparseFeatures:
    """The feature rows ``x`` on ``device`` in ``dtype``, in the layout ``model.encode``
    consumes best: the one place the engines hand features to a model.

    Dense ``x``: ``x.to(device=device, dtype=dtype)``, exactly as before. Sparse ``x``
    with an input projection: stays sparse (the projection multiplies it as CSR).
    Sparse ``x`` without one (layer 1 reads X): densified here, once, with one INFO
    line, because layer 1 and the engines' row buffers are dense.

    Shapes: x [n, F] -> [n, F].
    """
    kwargs = {k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None}
    if not isinstance(x, SparseFeatures):
        return x.to(**kwargs)
    encode = getattr(model, "encode", None)
    x = x.to(**kwargs)
    if getattr(encode, "linear", None) is not None:
        return x
    logger.info("%s has no input projection: densifying the sparse features [%d, %d] (%.2f %% non-zero, "
                "%.1f MB dense) once for layer 1", getattr(model, "model_name", "the model"), x.shape[0],
                x.shape[1], 100.0 * x.density, x.numel() * x.values.element_size() / 1e6)
    return x.to_dense()


# ---------------------------------------------------------------------- builder
def _get(cfg: Any, name: str, default: Any) -> Any:
    if isinstance(cfg, Mapping):
        value = cfg.get(name, default)
    else:
        value = getattr(cfg, name, default)
    return default if value is None else value


def _check_int(what: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{what}: expected an integer >= {minimum}, found {value!r}")
    return int(value)


def _check_float(what: str, value: Any, lo: float, hi: float, *, hi_open: bool = False,
                 lo_open: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        v = float(value)
        ok = (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise ConfigError(f"{what}: expected a number in {lb}{lo}, {hi}{rb}, found {value!r}")
    return float(value)


def build_model(model_config: Any, in_features: int, num_classes: int) -> DeepGNN:
    """Build the :class:`DeepGNN` that ``model_config`` describes.

    ``model_config`` is read duck-typed (attributes or a mapping): ``model`` (one of
    :data:`MODEL_NAMES`), ``layers`` (L >= 1), ``hidden`` (H >= 1), ``dropout``
    (default 0.5), ``alpha`` (GCNII, default 0.1), ``lambda_`` (GCNII, default 0.5),
    ``input_proj`` and ``classifier`` (``None`` = the model's default: on for GCNII and
    ResGCN+, which require both; off for GCN, GraphSAGE and MLP, as PyG's
    ``models.GCN``). With both off a 2-layer GCN is Kipf & Welling's
    ``conv F->H, ReLU, conv H->C``.

    Parameters are drawn from the default torch generator in a fixed order, so the
    same config built after the same ``torch.manual_seed`` is identical in every
    process. Raises :class:`ConfigError` for a bad value.
    """
    name = _get(model_config, "model", None)
    if not isinstance(name, str) or name.lower() not in MODEL_NAMES:
        raise ConfigError(f"model: expected one of {', '.join(MODEL_NAMES)}, found {name!r}")
    name = name.lower()
    num_layers = _check_int("layers", _get(model_config, "layers", 2), 1)
    hidden = _check_int("hidden", _get(model_config, "hidden", 64), 1)
    dropout = _check_float("dropout", _get(model_config, "dropout", 0.5), 0.0, 1.0, hi_open=True)
    alpha = _check_float("alpha", _get(model_config, "alpha", 0.1), 0.0, 1.0)
    lambda_ = _check_float("lambda_", _get(model_config, "lambda_", 0.5), 0.0, float("inf"),
                           lo_open=True, hi_open=True)
    in_features = _check_int("in_features", in_features, 1)
    num_classes = _check_int("num_classes", num_classes, 1)

    # Unset: GCNII and ResGCN+ need both; the plain models (GCN, GraphSAGE, MLP) follow
    # PyG's ``models.GCN(num_layers=L)`` convention, L convolutions F -> H -> ... -> C,
    # so ``gcn --layers 2`` is Kipf & Welling's network. A deep plain model takes the
    # projection and the classifier as an opt-in (``input_proj=True``, ``classifier=True``).
    structured = name in _NEEDS_PROJ_AND_CLASSIFIER
    input_proj = _get(model_config, "input_proj", structured)
    classifier = _get(model_config, "classifier", structured)
    for key, value in (("input_proj", input_proj), ("classifier", classifier)):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true, false or unset, found {value!r}")
        if name in _NEEDS_PROJ_AND_CLASSIFIER and not value:
            raise ConfigError(f"{key}: model {name} requires {key}=true, found false")

    # Widths: layer l reads dims[l-1] and writes dims[l].
    first_in = hidden if input_proj else in_features
    last_out = hidden if classifier else num_classes
    dims = [first_in] + [hidden] * (num_layers - 1) + [last_out]

    # ResGCN+'s encoder is DeeperGCN's plain linear node encoder (the first block
    # pre-activates it); the others use dropout -> linear -> ReLU as GCNII does.
    resgcn = name == "resgcn+"
    encode = InputProjection(in_features, hidden, enabled=input_proj,
                             dropout=0.0 if resgcn else dropout, activation=not resgcn)

    layers: list[GNNLayer] = []
    for l in range(1, num_layers + 1):
        d_in, d_out = dims[l - 1], dims[l]
        # Without a classifier the last layer's output is the logits: no activation.
        act = classifier or l < num_layers
        if name == "gcn":
            layers.append(GCNLayer(d_in, d_out, dropout=dropout, activation=act))
        elif name == "sage":
            layers.append(SAGELayer(d_in, d_out, dropout=dropout, activation=act))
        elif name == "mlp":
            layers.append(MLPLayer(d_in, d_out, dropout=dropout, activation=act))
        elif name == "gcnii":
            layers.append(GCNIILayer(hidden, l, alpha=alpha, lambda_=lambda_, dropout=dropout))
        else:  # resgcn+
            layers.append(ResGCNPlusLayer(d_in, d_out, first=(l == 1), dropout=dropout))

    decode = Classifier(hidden, num_classes, enabled=classifier, dropout=dropout, pre_norm=resgcn)
    return DeepGNN(name, encode, layers, decode)
