"""Run configuration: four small dataclasses and the run that joins them.

Every knob of a gnnpipe run lives here, once, with its default, its help text (in the
field metadata, from which the CLI is generated) and its check (in ``__post_init__``).
A bad value raises :class:`~gnnpipe.errors.ConfigError` with one line that names the
field, what was expected and what was found.

* :class:`DataConfig`     which graph (dataset name, data root, loader options);
* :class:`ModelConfig`    which network (kind, depth, width, dropout, GCNII knobs);
* :class:`TrainConfig`    how to optimise and report (epochs, Adam, evaluation, seed);
* :class:`ParallelConfig` how to spread the work (mode, workers, chunks, techniques);
* :class:`RunConfig`      the four together, with the checks that span them, TOML
  loading (``RunConfig.from_toml``) and ``to_dict`` for the result record.

The configs are frozen. Fields whose default depends on other fields (``workers``,
``chunks``, ``ways``) are ``None`` by default and resolved in ``__post_init__``, so
the object always holds the value that the run actually uses.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from gnnpipe.errors import ConfigError

__all__ = [
    "DataConfig",
    "ModelConfig",
    "TrainConfig",
    "ParallelConfig",
    "RunConfig",
    "MODELS",
    "MODES",
    "MODE_CHOICES",
    "equal_layer_split",
    "DEFAULT_LAYOUT",
    "DATA_ROOT_ENV",
    "SECTIONS",
    "read_toml",
    "DEEP_PLAIN_LAYERS",
    "stale_sensitive",
    "default_chunks",
    "default_snapshot_period",
]

#: Model kinds that :func:`gnnpipe.models.build_model` knows.
MODELS = ("gcn", "sage", "gcnii", "resgcn+", "mlp")
#: Parallel modes (DESIGN.md 1).
MODES = ("single", "graph", "pipeline", "hybrid")
#: What ``parallel.mode`` accepts: a mode, or ``auto`` (the planner picks one at the
#: entry, :func:`gnnpipe.plan.auto.resolve_auto`).
MODE_CHOICES = MODES + ("auto",)
#: The default (mode, workers) of a run with no arguments. The ONE place to change it.
DEFAULT_LAYOUT: tuple[str, int] = ("pipeline", 2)
#: Depth from which a residual-free model (GCN, GraphSAGE) is stale-sensitive.
DEEP_PLAIN_LAYERS = 16


def stale_sensitive(model: str, layers: int) -> bool:
    """Whether a ``model`` of ``layers`` layers loses its accuracy to stale halo reads:
    a GCN or GraphSAGE of 16+ layers (no residual or initial connection). Measured
    (``bench/results/gcn-long``: GCN-32 on Amazon Photo, S = 2, 100 epochs): 20.3
    points below exact training at C = 8 chunks (3 seeds) and 2.8 below at C = S
    (6 seeds), as the reference system's pipeline collapses on a 32-layer GCN. Such a
    model's pipelined runs default to one chunk per stage and way, the fewest stale
    reads, and to R = 1 (a snapshot of last epoch's values): at C = S, R = 1 gave +1.44
    points against exact training over 6 seeds, R = 23 -2.77 (better on every seed)."""
    return model in ("gcn", "sage") and int(layers) >= DEEP_PLAIN_LAYERS


def default_chunks(stages: int, ways: int, sensitive: bool = False) -> int:
    """The chunk count C of a pipelined run that gives none: 4 S per way (the reference
    ratio), one per stage and way for a stale-sensitive model (:func:`stale_sensitive`)."""
    return int(stages) * int(ways) * (1 if sensitive else 4)


def default_snapshot_period(sensitive: bool = False) -> int:
    """The snapshot period R of a pipelined run that gives none: 23 (the reference
    system's), 1 for a stale-sensitive model (:func:`stale_sensitive`)."""
    return 1 if sensitive else 23


#: Environment variable naming the data root when ``DataConfig.root`` is unset.
DATA_ROOT_ENV = "GNNPIPE_DATA_ROOT"

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: The largest ``train.seed``: every stream derived from it (weights, each worker's
#: dropout, the chunk order) must fit torch's 64-bit generator seed.
MAX_SEED = 2**32 - 1
#: The largest ``train.host_heap_trim_mib`` (1 TiB).
MAX_HEAP_TRIM_MIB = 2**20
#: The largest ``train.host_heap_mib``: glibc's mallopt takes an int of bytes.
MAX_HOST_HEAP_MIB = (2**31 - 1) >> 20


def _meta(help: str, *, choices: tuple[Any, ...] | None = None, flag: str | None = None,
          metavar: str | None = None) -> dict[str, Any]:
    """Field metadata read by the CLI generator (:mod:`gnnpipe.cli`)."""
    out: dict[str, Any] = {"help": help}
    if choices is not None:
        out["choices"] = choices
    if flag is not None:
        out["flag"] = flag
    if metavar is not None:
        out["metavar"] = metavar
    return out


# --------------------------------------------------------------------- type checks
def _type_name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return "list of " + _type_name(typing.get_args(tp)[0])
    if origin is dict:
        return "table"
    if tp is Any:
        return "any"
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Return ``value`` as type ``tp`` (int -> float and list -> tuple allowed), or
    raise ConfigError naming ``where``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, where)
            except ConfigError:
                pass
        raise ConfigError(f"{where}: expected {_type_name(tp)}, found {value!r}")
    if tp is Any:
        return value
    if origin is tuple:
        (item_tp, *_rest) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected {_type_name(tp)}, found {value!r}")
        return tuple(_coerce(v, item_tp, where) for v in value)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a table of options, found {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{where}: expected {_type_name(tp)}, found {value!r}")


class _Checked:
    """Mixin: coerce every field to its annotated type, then run ``_check``."""

    _section: typing.ClassVar[str] = ""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            object.__setattr__(self, f.name, _coerce(value, hints[f.name], self._where(f.name)))
            choices = f.metadata.get("choices")
            value = getattr(self, f.name)
            if choices is not None and value is not None and value not in choices:
                raise ConfigError(
                    f"{self._where(f.name)}: expected one of {', '.join(map(str, choices))}, "
                    f"found {value!r}"
                )
        self._check()

    def _check(self) -> None:  # pragma: no cover - overridden
        pass

    @classmethod
    def _where(cls, name: str) -> str:
        return f"{cls._section}.{name}"

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _need(self, ok: bool, name: str, expected: str) -> None:
        if not ok:
            raise ConfigError(f"{self._where(name)}: expected {expected}, found {getattr(self, name)!r}")


# --------------------------------------------------------------------------- data
@dataclass(frozen=True)
class DataConfig(_Checked):
    """Which graph to train on.

    ``root`` falls back to ``$GNNPIPE_DATA_ROOT`` (see :meth:`resolved_root`);
    ``options`` are passed to the loader as keyword arguments (for ``synthetic``:
    ``num_nodes``, ``seed`` ...).
    """

    _section: typing.ClassVar[str] = "data"

    dataset: str = field(default="synthetic", metadata=_meta(
        "dataset name (see gnnpipe.list_datasets()); 'synthetic' needs no files"))
    root: str | None = field(default=None, metadata=_meta(
        f"folder holding the datasets (default: ${DATA_ROOT_ENV})", flag="data-root", metavar="DIR"))
    options: dict[str, Any] = field(default_factory=dict, metadata=_meta(
        "loader option KEY=VALUE (repeatable), e.g. num_nodes=5000", flag="data-option",
        metavar="KEY=VALUE"))

    def _check(self) -> None:
        self._need(bool(self.dataset.strip()), "dataset", "a non-empty dataset name")
        for key in self.options:
            if not isinstance(key, str) or not key.isidentifier():
                raise ConfigError(f"data.options: expected option names that are identifiers, found {key!r}")

    def resolved_root(self) -> str | None:
        """``root``, else ``$GNNPIPE_DATA_ROOT``, else None (the loader's default)."""
        return self.root or os.environ.get(DATA_ROOT_ENV) or None


# -------------------------------------------------------------------------- model
@dataclass(frozen=True)
class ModelConfig(_Checked):
    """The network: ``layers`` GNN layers of width ``hidden`` between an input
    projection and a classifier (DESIGN.md 3)."""

    _section: typing.ClassVar[str] = "model"

    model: str = field(default="gcnii", metadata=_meta("GNN layer kind", choices=MODELS))
    layers: int = field(default=8, metadata=_meta("number of GNN layers (>= 1)"))
    hidden: int = field(default=64, metadata=_meta("hidden width H (>= 1)"))
    dropout: float = field(default=0.5, metadata=_meta("dropout probability in [0, 1)"))
    alpha: float = field(default=0.1, metadata=_meta("GCNII initial-residual weight alpha in [0, 1]"))
    lambda_: float = field(default=0.5, metadata=_meta(
        "GCNII identity-mapping strength lambda (> 0; beta_l = log(lambda/l + 1))", flag="lambda"))
    input_proj: bool | None = field(default=None, metadata=_meta(
        "use a linear input projection F -> H (default: on for gcnii and resgcn+, which need it; "
        "off for gcn, sage and mlp, as PyG's models.GCN)"))
    classifier: bool | None = field(default=None, metadata=_meta(
        "use a linear classifier H -> classes (default: as input_proj)"))

    def _check(self) -> None:
        self._need(self.layers >= 1, "layers", "an integer >= 1")
        self._need(self.hidden >= 1, "hidden", "an integer >= 1")
        self._need(0.0 <= self.dropout < 1.0, "dropout", "a value in [0, 1)")
        self._need(0.0 <= self.alpha <= 1.0, "alpha", "a value in [0, 1]")
        self._need(math.isfinite(self.lambda_) and self.lambda_ > 0, "lambda_", "a finite value > 0")


# -------------------------------------------------------------------------- train
@dataclass(frozen=True)
class TrainConfig(_Checked):
    """Optimisation and reporting.

    One Adam step per epoch. Evaluation (exact, full graph) runs every
    ``eval_every`` epochs and at the last epoch. ``monitor`` is the validation figure
    that picks the best epoch (whose test accuracy the record reports) and that
    ``patience`` watches: ``val_acc`` (higher is better) or ``val_loss`` (mean
    validation cross-entropy, lower is better; GCNII's and Kipf & Welling's own
    code stop on it). ``patience`` counts *evaluations* without a new best before
    training stops early.
    """

    _section: typing.ClassVar[str] = "train"

    epochs: int = field(default=100, metadata=_meta("number of epochs (>= 1)"))
    lr: float = field(default=0.01, metadata=_meta("Adam learning rate (> 0)"))
    weight_decay: float = field(default=5e-4, metadata=_meta("Adam weight decay (>= 0)"))
    layer_weight_decay: float | None = field(default=None, metadata=_meta(
        "weight decay of the GNN-layer parameters (>= 0; default: weight_decay)"))
    eval_every: int = field(default=5, metadata=_meta("evaluate every k epochs (>= 1)"))
    seed: int = field(default=0, metadata=_meta("random seed (weights, dropout, chunk order)"))
    patience: int | None = field(default=None, metadata=_meta(
        "stop after this many evaluations without a better monitored figure (>= 1; default: never)"))
    monitor: str = field(default="val_acc", metadata=_meta(
        "validation figure that picks the best epoch and drives patience",
        choices=("val_acc", "val_loss")))
    dtype: str = field(default="float32", metadata=_meta(
        "floating-point type of weights and activations", choices=("float32", "float64")))
    log_level: str = field(default="INFO", metadata=_meta("logging level", choices=LOG_LEVELS))
    log_every: int = field(default=10, metadata=_meta(
        "log one progress line every N epochs (>= 1)"))
    json_out: str | None = field(default=None, metadata=_meta(
        "write the result record as JSON to this path (atomically, at the end)", metavar="PATH"))
    metrics_jsonl: str | None = field(default=None, metadata=_meta(
        "write each epoch's record entry to this JSON-lines file as it happens (flushed)", metavar="PATH"))
    tensorboard: str | None = field(default=None, metadata=_meta(
        "write TensorBoard scalars into this folder (needs the tensorboard extra)", metavar="DIR"))
    checkpoint_dir: str | None = field(default=None, metadata=_meta(
        "write checkpoints (one shard per worker and a manifest) into this folder", metavar="DIR"))
    checkpoint_every: int = field(default=10, metadata=_meta(
        "checkpoint every N epochs (>= 1), and at the end of the run"))
    resume: bool = field(default=False, metadata=_meta(
        "continue from the newest complete checkpoint in checkpoint_dir (start afresh if it has none)"))
    trace_dir: str | None = field(default=None, metadata=_meta(
        "pipeline and hybrid mode: write each worker's timeline (every schedule action of every "
        "training epoch: start, duration, chunk, page faults) into this folder as Chrome trace JSON, "
        "trace-rank{R}.json, appended after each epoch; open in Perfetto or chrome://tracing",
        metavar="DIR"))
    host_heap_mib: int = field(default=0, metadata=_meta(
        "glibc hosts: serve host allocations up to this many MiB from the heap and keep its freed "
        "pages (mallopt), instead of mapping each large temporary afresh; 0 leaves glibc's thresholds. "
        "Faster where layer temporaries are tens of MB, at a higher peak (200k graph, graph mode: "
        "24.0 -> 13.5 s an epoch, 4.0 -> 6.8 GiB; bench/results/memory_200k/heap)"))
    host_heap_trim_mib: int = field(default=0, metadata=_meta(
        "glibc hosts, pipeline and hybrid stages on the CPU: after a chunk's forward or backward, "
        "give the heap's free pages back to the system (malloc_trim) where the worker's resident set "
        "is then above this many MiB (a cap, passed within one chunk compute); 0: never. Not with "
        "host_heap_mib > 0. Lower peak for page faults (200k graph, pipeline C = 8: 6144 -> 6.4-6.6 "
        "instead of 7.5-7.8 GiB per worker, 1.09-1.17x the epoch; bench/results/memory_200k/trim)"))
    host_huge_pages: bool = field(default=True, metadata=_meta(
        "Linux hosts: back torch's host allocations of 2 MiB or more with transparent huge pages "
        "(sets THP_MEM_ALLOC_ENABLE=1 before the graph is loaded, unless the environment sets it), so "
        "that a large fresh temporary faults in 2 MiB at a time instead of 4 KiB (bench/results/huge_pages.json)"))

    def __post_init__(self) -> None:
        if isinstance(self.log_level, str):
            object.__setattr__(self, "log_level", self.log_level.upper())
        super().__post_init__()

    def _check(self) -> None:
        self._need(self.epochs >= 1, "epochs", "an integer >= 1")
        self._need(math.isfinite(self.lr) and self.lr > 0, "lr", "a finite value > 0")
        self._need(math.isfinite(self.weight_decay) and self.weight_decay >= 0, "weight_decay", "a value >= 0")
        self._need(self.layer_weight_decay is None
                   or (math.isfinite(self.layer_weight_decay) and self.layer_weight_decay >= 0),
                   "layer_weight_decay", "a value >= 0 or null")
        self._need(self.eval_every >= 1, "eval_every", "an integer >= 1")
        self._need(0 <= self.seed <= MAX_SEED, "seed", f"an integer in [0, {MAX_SEED}]")
        self._need(self.patience is None or self.patience >= 1, "patience", "an integer >= 1 or null")
        self._need(self.log_every >= 1, "log_every", "an integer >= 1")
        self._need(self.json_out is None or bool(self.json_out.strip()), "json_out", "a file path")
        self._need(self.checkpoint_dir is None or bool(self.checkpoint_dir.strip()), "checkpoint_dir",
                   "a folder path")
        self._need(self.checkpoint_every >= 1, "checkpoint_every", "an integer >= 1")
        self._need(0 <= self.host_heap_mib <= MAX_HOST_HEAP_MIB, "host_heap_mib",
                   f"an integer in [0, {MAX_HOST_HEAP_MIB}]")
        self._need(0 <= self.host_heap_trim_mib <= MAX_HEAP_TRIM_MIB, "host_heap_trim_mib",
                   f"an integer in [0, {MAX_HEAP_TRIM_MIB}]")
        for name in ("metrics_jsonl", "tensorboard", "trace_dir"):
            self._need(getattr(self, name) is None or bool(getattr(self, name).strip()), name, "a path")
        self._need(not self.resume or self.checkpoint_dir is not None, "resume",
                   "a checkpoint_dir to resume from (resume needs --checkpoint-dir)")

    @property
    def torch_dtype(self) -> Any:
        import torch

        return {"float32": torch.float32, "float64": torch.float64}[self.dtype]


#: The instance attributes (not fields) that mark a ParallelConfig value as its
#: default rather than given, so that RunConfig can make it follow the model.
_DERIVED_FLAGS = {"chunks": "_chunks_derived", "snapshot_period": "_snapshot_derived"}


# ----------------------------------------------------------------------- parallel
@dataclass(frozen=True)
class ParallelConfig(_Checked):
    """How the work is spread over workers (DESIGN.md 1, 4-6).

    ``stages`` (S) is 1 for single/graph, ``workers`` for pipeline and
    ``workers // ways`` for hybrid. Defaults resolved here: ``workers`` 1 for single,
    else the default layout's count; ``ways`` 2 for hybrid, else 1; ``chunks`` 1 for
    single, ``workers`` for graph, ``4 * S`` for pipeline and ``4 * S * ways`` for
    hybrid (each way pipelines 4 S chunks, the reference ratio). A pipelined
    ``chunks`` derived here follows the model in :class:`RunConfig`: ``S * ways`` for
    a stale-sensitive one (:func:`stale_sensitive`). ``dataclasses.replace`` keeps
    resolved values; pass ``chunks=None`` (etc.) to derive them again.
    """

    _section: typing.ClassVar[str] = "parallel"

    mode: str = field(default=DEFAULT_LAYOUT[0], metadata=_meta(
        "parallel mode (auto: the planner picks the fastest predicted layout that fits, "
        "python -m gnnpipe.plan)", choices=MODE_CHOICES))
    workers: int | None = field(default=None, metadata=_meta(
        f"number of worker processes P (>= 1; default: 1 for single, else {max(DEFAULT_LAYOUT[1], 2)})"))
    chunks: int | str | None = field(default=None, metadata=_meta(
        "number of chunks C, or auto (the planner's choice; default: 4*S*W for pipeline and "
        "hybrid, S*W for a GCN/GraphSAGE of 16+ layers, which stale halo reads make collapse; "
        "workers for graph; auto with mode auto)"))
    ways: int | None = field(default=None, metadata=_meta(
        "hybrid: number of ways W (workers % ways == 0; default 2)"))
    stage_split: tuple[int, ...] | None = field(default=None, metadata=_meta(
        "layers per stage, e.g. 3,3,2 (must sum to layers; default: equal split)", metavar="L1,L2,..."))
    partition: str = field(default="metis", metadata=_meta(
        "vertex partition method for the chunks", choices=("metis", "random")))
    backend: str | None = field(default=None, metadata=_meta(
        "torch.distributed backend (default: nccl on CUDA, else gloo)", choices=("gloo", "nccl")))
    device: str = field(default="auto", metadata=_meta(
        "compute device (auto: cuda if available)", choices=("auto", "cpu", "cuda")))
    kernel_backend: str = field(default="torch", metadata=_meta(
        "aggregation kernel backend", choices=("torch", "scatter", "reference"), flag="kernel"))
    shuffle: bool = field(default=True, metadata=_meta(
        "pipeline technique 1: shuffle the chunk order every epoch"))
    snapshot_period: int | None = field(default=None, metadata=_meta(
        "pipeline technique 2: refresh the historical snapshot every R epochs (R=1: last epoch's "
        "values; default 23, the reference system's, which closed the accuracy gap R=1 left for "
        "GCNII in bench/results/ablation; 1 for a GCN/GraphSAGE of 16+ layers, which it brought "
        "to exact accuracy at C=S in bench/results/gcn-long; R>1 keeps one more full-row copy "
        "per buffered layer)"))
    unbiased_scale: bool = field(default=False, metadata=_meta(
        "pipeline technique 3: scale aggregation gradients by 2 (unbiased estimate)"))
    history_init: str = field(default="exact", metadata=_meta(
        "initial historical embeddings: zeros, or an exact full-graph forward",
        choices=("zeros", "exact")))
    stage_dtype: str = field(default="same", metadata=_meta(
        "pipeline/hybrid: the type stage activations and gradients travel in between stages "
        "(same: the training dtype; bfloat16 halves the stage bytes; evaluation stays exact)",
        choices=("same", "bfloat16")))
    dropout_masks: str = field(default="chunk", metadata=_meta(
        "pipeline/hybrid: the layers' dropout masks. chunk: each chunk draws a mask for every row "
        "it reads, own and halo (a halo row gets one sample per reader); row: one mask per row and "
        "layer per epoch over a way's rows, which every reader applies, as a whole-graph run does "
        "(on BlogCatalog at C=8 a stage's compute 0.76x of chunk's; its convergence against "
        "chunk's is measured in bench/results/dropout_masks.json)",
        choices=("chunk", "row")))
    cross_epoch_chunks: int = field(default=0, metadata=_meta(
        "pipeline: overlap epochs. At the turn of an epoch (forward done, waiting for the first "
        "gradient) every stage but the last runs the forward of the next epoch's first K chunks "
        "with its weights not yet stepped (one step stale, stashed for their backward); 0 (the "
        "default) keeps the synchronous schedule of DESIGN.md 5. Not across a checkpoint", metavar="K"))

    def _check(self) -> None:
        mode = self.mode
        if self.workers is None:
            self._set("workers", 1 if mode == "single" else max(DEFAULT_LAYOUT[1], 2))
        self._need(self.workers >= 1, "workers", "an integer >= 1")
        if isinstance(self.chunks, str):  # the command line gives text: a count or auto
            text = self.chunks.strip().lower()
            self._need(text == "auto" or text.isdigit(), "chunks", "an integer >= 1 or auto")
            self._set("chunks", "auto" if text == "auto" else int(text))
        if self.snapshot_period is None:
            self._set("snapshot_period", default_snapshot_period())
            object.__setattr__(self, _DERIVED_FLAGS["snapshot_period"], True)  # follows the model
        # Checks that hold whatever the mode (mode auto included).
        self._need(self.snapshot_period >= 1, "snapshot_period", "an integer >= 1")
        if self.backend == "nccl" and self.device == "cpu":
            raise ConfigError("parallel.backend: expected gloo with device cpu, found 'nccl'")
        if mode == "auto":
            # The planner resolves workers' layout at the entry; what it is given
            # restricts it (ways for hybrid, chunks), a stage split cannot be given.
            self._need(self.ways is None or self.ways >= 1, "ways", "an integer >= 1 or unset")
            self._need(self.stage_split is None, "stage_split", "unset with mode auto")
            self._need(self.chunks is None or self.chunks == "auto" or self.chunks >= 1, "chunks",
                       "an integer >= 1 or auto")
            if self.chunks is None:
                self._set("chunks", "auto")
            return
        if self.chunks == "auto" and mode in ("single", "graph"):
            self._set("chunks", 1 if mode == "single" else self.workers)  # the only valid count
        if mode == "single":
            self._need(self.workers == 1, "workers", "1 in single mode")
        if self.ways is None:
            self._set("ways", 2 if mode == "hybrid" else 1)
        self._need(self.ways >= 1, "ways", "an integer >= 1")
        if mode != "hybrid":
            self._need(self.ways == 1, "ways", f"1 in {mode} mode (ways is a hybrid setting)")
        elif self.workers % self.ways != 0:
            raise ConfigError(
                f"parallel.ways: expected a divisor of workers={self.workers}, found {self.ways}"
            )
        s = self.stages
        if self.chunks == "auto":
            pass  # the planner picks C at the entry (pipeline, hybrid)
        elif self.chunks is None:
            self._set("chunks", 1 if mode == "single" else self.workers if mode == "graph"
                      else default_chunks(s, self.ways))
            # Not a field: RunConfig narrows a derived pipelined count for the model.
            object.__setattr__(self, _DERIVED_FLAGS["chunks"], mode in ("pipeline", "hybrid"))
        self._need(self.chunks == "auto" or self.chunks >= 1, "chunks", "an integer >= 1 or auto")
        if mode == "single":
            self._need(self.chunks == 1, "chunks", "1 in single mode")
        if mode == "graph":
            self._need(self.chunks == self.workers, "chunks", f"workers={self.workers} in graph mode")
        if mode == "hybrid" and self.chunks != "auto":
            self._need(self.chunks >= self.ways, "chunks", f"an integer >= ways={self.ways}")
        if self.stage_split is not None:
            if len(self.stage_split) != s:
                raise ConfigError(
                    f"parallel.stage_split: expected {s} entries (one per stage), "
                    f"found {len(self.stage_split)}: {list(self.stage_split)}"
                )
            self._need(all(x >= 1 for x in self.stage_split), "stage_split", "entries >= 1")
        if mode not in ("pipeline", "hybrid"):
            self._need(self.stage_dtype == "same", "stage_dtype",
                       f"'same' in {mode} mode (stage_dtype is a pipeline/hybrid setting)")
            self._need(self.dropout_masks == "chunk", "dropout_masks",
                       f"'chunk' in {mode} mode (dropout_masks is a pipeline/hybrid setting)")
        self._need(self.cross_epoch_chunks >= 0, "cross_epoch_chunks", "an integer >= 0")
        if mode != "pipeline":
            self._need(self.cross_epoch_chunks == 0, "cross_epoch_chunks",
                       f"0 in {mode} mode (cross_epoch_chunks is a pipeline setting)")
        elif self.chunks != "auto":
            self._need(self.cross_epoch_chunks <= self.chunks, "cross_epoch_chunks",
                       f"an integer <= chunks={self.chunks}")
        # Whether CUDA is there is a question about the machine, not the config: it is
        # asked where the run starts (gnnpipe.engine.layout.resolve_layout).

    @property
    def chunks_derived(self) -> bool:
        """Whether ``chunks`` is the pipelined default rather than a given count."""
        return bool(getattr(self, _DERIVED_FLAGS["chunks"], False))

    @property
    def snapshot_derived(self) -> bool:
        """Whether ``snapshot_period`` is the default rather than a given period."""
        return bool(getattr(self, _DERIVED_FLAGS["snapshot_period"], False))

    @property
    def stage_torch_dtype(self) -> Any:
        """The torch dtype of stage messages, or None for the training dtype."""
        import torch

        return {"same": None, "bfloat16": torch.bfloat16}[self.stage_dtype]

    @property
    def stages(self) -> int:
        """Number of pipeline stages S (1 while mode is auto: unresolved)."""
        if self.mode == "pipeline":
            return int(self.workers)  # type: ignore[arg-type]
        if self.mode == "hybrid":
            return int(self.workers) // int(self.ways)  # type: ignore[arg-type]
        return 1

    def layer_split(self, layers: int) -> tuple[int, ...]:
        """Layers per stage: ``stage_split``, or the equal split (earlier stages take
        the remainder)."""
        if self.stage_split is not None:
            return tuple(self.stage_split)
        return equal_layer_split(layers, self.stages)


def equal_layer_split(layers: int, stages: int) -> tuple[int, ...]:
    """Layers per stage of the equal split: ``layers // stages`` each, the first
    ``layers % stages`` stages one more."""
    base, extra = divmod(int(layers), int(stages))
    return tuple(base + (1 if i < extra else 0) for i in range(int(stages)))


# ---------------------------------------------------------------------------- run
SECTIONS: dict[str, type] = {
    "data": DataConfig,
    "model": ModelConfig,
    "train": TrainConfig,
    "parallel": ParallelConfig,
}


@dataclass(frozen=True)
class RunConfig:
    """One complete run: data, model, training and parallel layout, with the checks
    that need more than one of them. What needs the graph or the machine is checked
    where the run starts (:func:`gnnpipe.engine.layout.resolve_layout`)."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)

    def __post_init__(self) -> None:
        for name, cls in SECTIONS.items():
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(f"RunConfig.{name}: expected a {cls.__name__}, found "
                                  f"{type(getattr(self, name)).__name__}")
        p, m = self.parallel, self.model
        if m.layers < p.stages:
            raise ConfigError(
                f"model.layers: expected at least one layer per stage (>= {p.stages} stages of "
                f"{p.mode} mode with {p.workers} workers), found {m.layers}"
            )
        if p.stage_split is not None and sum(p.stage_split) != m.layers:
            raise ConfigError(
                f"parallel.stage_split: expected entries summing to model.layers={m.layers}, "
                f"found {list(p.stage_split)} (sum {sum(p.stage_split)})"
            )
        # Derived defaults follow the model (default_chunks, default_snapshot_period).
        sensitive = stale_sensitive(m.model, m.layers)
        derived = {}
        if p.chunks_derived:
            derived["chunks"] = default_chunks(p.stages, p.ways, sensitive)
        if p.snapshot_derived and p.mode in ("pipeline", "hybrid", "auto"):  # the modes with history
            derived["snapshot_period"] = default_snapshot_period(sensitive)
        if any(getattr(p, k) != v for k, v in derived.items()):
            resolved = dataclasses.replace(p, **derived)
            for k in derived:  # still derived: a later replace of the model moves them again
                object.__setattr__(resolved, _DERIVED_FLAGS[k], True)
            object.__setattr__(self, "parallel", resolved)

    # ---------------------------------------------------------- dict and TOML
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able nested dict (tuples as lists), as stored in the record."""

        def plain(x: Any) -> Any:
            if isinstance(x, (list, tuple)):
                return [plain(v) for v in x]
            if isinstance(x, dict):
                return {k: plain(v) for k, v in x.items()}
            return x

        return {name: plain(dataclasses.asdict(getattr(self, name))) for name in SECTIONS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
                  *, source: str = "config") -> "RunConfig":
        """Build from ``{section: {key: value}}``; unknown sections or keys are errors.

        ``overrides`` take precedence; they may be nested (``{"model": {"layers": 4}}``)
        or dotted (``{"model.layers": 4}``).
        """
        if not isinstance(d, Mapping):
            raise ConfigError(f"{source}: expected a table of sections, found {type(d).__name__}")
        merged: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        _merge_into(merged, d, source)
        if overrides:
            _merge_into(merged, _undot(overrides), "overrides")
        parts = {name: SECTIONS[name](**merged[name]) for name in SECTIONS}
        return cls(**parts)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str],
                  overrides: Mapping[str, Any] | None = None) -> "RunConfig":
        """Load ``[data] [model] [train] [parallel]`` sections from a TOML file (the
        loader options go in ``[data.options]``), then apply ``overrides``."""
        return cls.from_dict(read_toml(path), overrides, source=f"config file {str(path)!r}")


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The raw tables of a TOML file; ConfigError (one line) when missing or invalid."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - python 3.10
        import tomli as tomllib
    p = Path(path)
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(p)!r}: expected an existing TOML file, found nothing") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {str(p)!r}: expected a TOML file, found a directory") from None
    except OSError as exc:
        raise ConfigError(f"config file {str(p)!r}: expected a readable file, found {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r}: expected a UTF-8 TOML file, found a byte that is not "
                          f"UTF-8 at offset {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc).splitlines()[0] if str(exc) else "a syntax error"
        raise ConfigError(f"config file {str(p)!r}: expected valid TOML, found {msg}") from None


def _undot(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(key, str) and "." in key:
            section, sub = key.split(".", 1)
            out.setdefault(section, {})[sub] = value
        elif isinstance(value, Mapping):
            out.setdefault(key, {}).update(value)
        else:
            out[key] = value
    return out


#: Spellings accepted in files and overrides for fields whose Python name differs
#: (``lambda`` is a Python keyword, hence the field ``lambda_``).
_ALIASES = {("model", "lambda"): "lambda_"}


def _merge_into(merged: dict[str, dict[str, Any]], d: Mapping[str, Any], source: str) -> None:
    for section, body in d.items():
        if section not in SECTIONS:
            raise ConfigError(
                f"{source}: unknown section [{section}], expected one of "
                f"{', '.join('[' + s + ']' for s in SECTIONS)}"
            )
        if not isinstance(body, Mapping):
            raise ConfigError(f"{source}: section [{section}] must be a table, found {body!r}")
        known = {f.name for f in dataclasses.fields(SECTIONS[section])}
        for key, value in body.items():
            key = _ALIASES.get((section, key), key)
            if key not in known:
                raise ConfigError(
                    f"{source}: unknown key {key!r} in section [{section}], expected one of "
                    f"{', '.join(sorted(known))}"
                )
            if section == "data" and key == "options" and isinstance(value, Mapping):
                merged[section].setdefault("options", {})
                merged[section]["options"] = {**merged[section]["options"], **value}
            else:
                merged[section][key] = value
