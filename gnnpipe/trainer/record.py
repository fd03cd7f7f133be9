"""The result record: the one JSON document every gnnpipe run produces.

This module is the ONLY builder of the record. The single trainer and the
distributed engine measure their figures, hand them over as :class:`EpochRecord`
objects and plain dicts, and :func:`build_record` assembles the document that
``gnnpipe.train`` returns and ``--json-out`` writes. Every figure in it is measured;
predictions (``bytes_predicted``) are labelled as such and may be null.

Typical use by a trainer::

    epochs = [EpochRecord(epoch=1, loss=..., epoch_time_s=..., compute_s=..., ...)]
    rec = build_record(config, mode="single", world_size=1, graph_info=graph_summary(g),
                       epochs=epochs, best=monitor.best(),
                       peak_memory=[measure_peak_memory(device, rank=0)],
                       partition_stats=None, wall_time_s=..., machine=machine_info(...))
    write_json_atomic(rec, path)

The schema is stated once, as the field tables :data:`RECORD_FIELDS` (the top level)
and :data:`EPOCH_FIELDS` (each entry of ``epochs``). :func:`check_record` enforces
them and :data:`RECORD_SCHEMA_DOC`, the Markdown that README.md carries, is rendered
from them; tests hold :func:`build_record` and :meth:`EpochRecord.to_dict` to exactly
their keys. The probes that fill ``machine`` and ``peak_memory_bytes`` are in
:mod:`gnnpipe.trainer.machine`; the byte kinds are the communicator's
(:data:`gnnpipe.engine.comm.KINDS`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import gnnpipe
from gnnpipe.atomic import atomic_open
from gnnpipe.engine.comm import KINDS
from gnnpipe.trainer.machine import machine_info

__all__ = [
    "SCHEMA_VERSION",
    "WARMUP_EPOCHS",
    "Field",
    "RECORD_FIELDS",
    "EPOCH_FIELDS",
    "EpochRecord",
    "build_record",
    "graph_summary",
    "write_json_atomic",
    "check_record",
    "summary_line",
    "schema_doc",
    "RECORD_SCHEMA_DOC",
]

#: Bumped whenever the key sets that :func:`check_record` requires change (a key
#: added, renamed or removed). 2: ``epochs[].val_loss``, ``best.val_loss``, ``best.monitor``;
#: 3: ``summary.diverged``; 4: ``epochs[].history_drift``; 5: ``plan``;
#: 6: ``epochs[].time_per_rank``.
SCHEMA_VERSION = 6

#: Number of leading epochs left out of ``summary.mean_epoch_time_s`` (warm-up), as
#: in the reference system's measurements (DESIGN.md 8); fewer when the run is short.
WARMUP_EPOCHS = 5


# ------------------------------------------------------------------ schema
#: The Python types that :func:`check_record` accepts for each documented JSON type.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
    "object": (dict,), "list": (list,), "null": (type(None),),
}


@dataclass(frozen=True)
class Field:
    """One key of the record, or of an entry of a list of records: the single
    statement of it from which :func:`check_record` and :func:`schema_doc` work.

    ``json_type``: the documented type, alternatives joined by `` or `` (``null``
    where the figure may be missing). ``meaning``: Markdown; a field with ``keys``
    marks with ``{keys}`` where their list goes. ``keys``: the sub-keys that the
    object (for a list: each entry) must carry; with ``exact`` no others. ``entries``:
    for a list of records, the fields of each entry (exactly those keys).
    """

    key: str
    json_type: str
    meaning: str
    keys: tuple[str, ...] = ()
    exact: bool = False
    entries: tuple["Field", ...] = ()

    def __post_init__(self) -> None:
        unknown = [t for t in self.json_type.split(" or ") if t not in _JSON_TYPES]
        if unknown:
            raise ValueError(f"Field {self.key}: unknown JSON types {unknown}, expected {sorted(_JSON_TYPES)}")
        if bool(self.keys) != ("{keys}" in self.meaning):
            raise ValueError(f"Field {self.key}: the meaning must place its sub-keys with {{keys}} "
                             "exactly when it has some")

    @property
    def types(self) -> tuple[type, ...]:
        """The Python types a value of this field may have."""
        return tuple(t for name in self.json_type.split(" or ") for t in _JSON_TYPES[name])

    def doc_row(self) -> str:
        """This field as a row of the Markdown table of :func:`schema_doc`."""
        meaning = self.meaning.replace("{keys}", ", ".join(f"`{k}`" for k in self.keys))
        return f"| `{self.key}` | {self.json_type} | {meaning} |"


#: Each entry of ``epochs``, in the order :meth:`EpochRecord.to_dict` writes the keys.
EPOCH_FIELDS: tuple[Field, ...] = (
    Field("epoch", "int", "epoch number, from 1"),
    Field("loss", "float or null", "training loss of that epoch's forward; null when it diverged"),
    Field("train_acc", "float or null", "accuracy on the training vertices of the exact full-graph "
          "evaluation after the step; null on epochs without evaluation"),
    Field("val_acc", "float or null", "the same on the validation vertices"),
    Field("test_acc", "float or null", "the same on the test vertices"),
    Field("val_loss", "float or null", "mean validation cross-entropy of that evaluation; null "
          "without evaluation or when not finite"),
    Field("epoch_time_s", "float", "wall time of the training step (forward, backward, optimizer "
          "step), evaluation excluded"),
    Field("eval_time_s", "float or null", "wall time of the evaluation; null when not evaluated"),
    Field("time", "object", "{keys}: the split of `epoch_time_s` where the mode measures it "
          "(single: compute only): the split of the worker whose epoch took longest",
          keys=("compute_s", "comm_wait_s", "bubble_s"), exact=True),
    Field("time_per_rank", "list", "every worker's own epoch and its split, by rank: {keys} "
          "(`compute_s + comm_wait_s + bubble_s = epoch_s`; stages and ways wait for each other "
          "in different places, so that their splits differ), measured",
          keys=("rank", "epoch_s", "compute_s", "comm_wait_s", "bubble_s")),
    Field("bytes", "object", "{keys}: payload bytes sent, summed over workers, measured",
          keys=KINDS, exact=True),
    Field("bytes_predicted", "object or null", "the DESIGN.md 7 model for the kinds of `bytes`, "
          "a prediction; null when the mode offers none"),
    Field("history_drift", "list or null", "pipeline and hybrid: per layer (index 0 = layer 1), "
          "how far the historical value of the layer's input, which stale reads saw, is from "
          "this epoch's fresh value: sqrt(sum of squared differences / sum of squared fresh "
          "values) over the first 256 rows of every chunk, measured; null entries for layers "
          "without history (layer 1); null in the exact modes"),
)

#: The top level of the record, in the order :func:`build_record` writes the keys.
RECORD_FIELDS: tuple[Field, ...] = (
    Field("schema_version", "int", f"record layout version (currently {SCHEMA_VERSION}; 2 added "
          "`val_loss` per epoch and `best.val_loss` / `best.monitor`, 3 added `summary.diverged`, "
          "4 added `history_drift` per epoch, 5 added `plan`, 6 added `time_per_rank` per epoch)"),
    Field("gnnpipe_version", "str", "package version that wrote the record"),
    Field("mode", "str", "`single`, `graph`, `pipeline` or `hybrid`"),
    Field("world_size", "int", "number of worker processes"),
    Field("config", "object", "the full resolved `RunConfig` ({keys})",
          keys=("data", "model", "train", "parallel")),
    Field("dataset", "object", "{keys} (split sizes)",
          keys=("name", "num_nodes", "num_edges", "num_features", "num_classes", "train", "val", "test")),
    Field("epochs", "list", "one object per epoch, see below", entries=EPOCH_FIELDS),
    Field("best", "object", "{keys} of the evaluated epoch with the best `monitor` "
          "(`train.monitor`: highest `val_acc` or lowest `val_loss`; the earliest on a tie)",
          keys=("epoch", "val_acc", "val_loss", "test_acc", "monitor")),
    Field("summary", "object", "{keys}; `mean_epoch_time_s` leaves out the first "
          f"`mean_epoch_time_skipped_epochs` epochs (warm-up: {WARMUP_EPOCHS}, fewer when the run "
          "is short), `bytes_total` sums `bytes` by kind; `diverged` is null, or {`epoch`, `where`, "
          "`what`} when a loss or gradient turned NaN or infinite (the run stopped there)",
          keys=("epochs_run", "stopped_early", "diverged", "final_loss", "mean_epoch_time_s",
                "mean_epoch_time_skipped_epochs", "bytes_total")),
    Field("peak_memory_bytes", "list", "per worker: {keys} (`torch.cuda.max_memory_allocated` on "
          "CUDA; on CPU `VmHWM` on Linux, else `ru_maxrss`)", keys=("rank", "bytes", "source")),
    Field("partition", "object or null", "partition quality (edge cut, balance, halo, M) when the "
          "mode partitions"),
    Field("machine", "object", "{keys} (+ `gpu`, `gpu_count`, `cuda` on CUDA)",
          keys=("hostname", "platform", "cpu_cores", "python", "torch", "gnnpipe", "device", "dist_backend")),
    Field("wall_time_s", "float", "total wall time of the run, loading and evaluation included"),
    Field("extra", "object", "mode-specific measured figures; `startup` (where the time to the first epoch "
          "went), `host_heap` (what `train.host_heap_mib` did in the workers), `host_huge_pages` "
          "(whether rank 0's large host allocations get huge pages, `train.host_huge_pages`), `host_heap_trim` "
          "(whether the stages trim their heap, with `train.host_heap_trim_mib`, and each rank's trims) "
          "and `trace` (whether the workers wrote their timelines into `train.trace_dir`, and why) "
          "in every mode"),
    Field("plan", "object or null", "what the planner chose when `parallel.mode` or `parallel.chunks` "
          "was `auto` (`python -m gnnpipe.plan`): {keys}; `chosen` and each candidate carry the layout "
          "and its PREDICTED bytes per epoch, peak memory per worker and epoch time (compute, comm, "
          "bubble); null when the layout was given",
          keys=("requested", "chosen", "reason", "profile", "candidates")),
)


def schema_doc() -> str:
    """The schema as Markdown, for README.md: a table of :data:`RECORD_FIELDS`, then
    one of the entry fields of each list of records (``epochs``)."""
    def table(fields: Sequence[Field]) -> str:
        return "\n".join(["| key | type | meaning |", "| --- | --- | --- |", *(f.doc_row() for f in fields)])

    parts = [table(RECORD_FIELDS)]
    parts += [f"Each entry of `{f.key}`:\n\n{table(f.entries)}" for f in RECORD_FIELDS if f.entries]
    return "\n\n".join(parts) + "\n"


#: :func:`schema_doc`, which README.md carries verbatim (a test keeps them equal).
RECORD_SCHEMA_DOC = schema_doc()


# ------------------------------------------------------------------ figures
def _json_float(x: float | None) -> float | None:
    """A figure as the record stores it: a float, or null when it is missing or not
    finite (a diverged loss), since the record is strict JSON (no NaN, no Infinity)."""
    return None if x is None or not math.isfinite(x) else float(x)


def _refuse_unknown_kinds(where: str, by_kind: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` if ``by_kind`` has a key that is not a byte kind."""
    unknown = set(by_kind) - set(KINDS)
    if unknown:
        raise ValueError(f"{where}: unknown kinds {sorted(unknown)}, expected {KINDS}")


def _zero_bytes() -> dict[str, int]:
    return {k: 0 for k in KINDS}


#: The figures of each entry of ``time_per_rank`` besides its rank.
_RANK_TIME = ("epoch_s", "compute_s", "comm_wait_s", "bubble_s")


@dataclass
class EpochRecord:
    """What one epoch measured; each figure means what its entry of
    :data:`EPOCH_FIELDS` says (``compute_s/comm_wait_s/bubble_s`` go to ``time``;
    ``time_per_rank``: one dict per worker with ``rank`` and :data:`_RANK_TIME`).

    The accuracies, ``val_loss`` and ``eval_time_s`` stay None on epochs without
    evaluation. ``bytes`` holds the payload bytes sent during the epoch by kind
    (summed over workers; a missing kind is 0).
    """

    epoch: int
    loss: float
    epoch_time_s: float
    train_acc: float | None = None
    val_acc: float | None = None
    test_acc: float | None = None
    val_loss: float | None = None
    eval_time_s: float | None = None
    compute_s: float = 0.0
    comm_wait_s: float = 0.0
    bubble_s: float = 0.0
    bytes: dict[str, int] = field(default_factory=_zero_bytes)
    bytes_predicted: dict[str, int] | None = None
    history_drift: list[float | None] | None = None
    time_per_rank: list[dict[str, float]] = field(default_factory=list)

    @property
    def evaluated(self) -> bool:
        return self.val_acc is not None

    def set_evaluation(self, metrics: dict[str, float | None]) -> None:
        """Take an evaluation's ``{train, val, test, val_loss}``."""
        self.train_acc, self.val_acc, self.test_acc = metrics["train"], metrics["val"], metrics["test"]
        self.val_loss = metrics.get("val_loss")

    def to_dict(self) -> dict[str, Any]:
        """This epoch as an entry of the record's ``epochs`` (keys: :data:`EPOCH_FIELDS`);
        refuses byte kinds the communicator does not count."""
        _refuse_unknown_kinds("EpochRecord.bytes", self.bytes)
        if self.bytes_predicted is not None:
            _refuse_unknown_kinds("EpochRecord.bytes_predicted", self.bytes_predicted)
        return {
            "epoch": int(self.epoch),
            "loss": _json_float(self.loss),
            "train_acc": _json_float(self.train_acc),
            "val_acc": _json_float(self.val_acc),
            "test_acc": _json_float(self.test_acc),
            "val_loss": _json_float(self.val_loss),
            "epoch_time_s": float(self.epoch_time_s),
            "eval_time_s": _json_float(self.eval_time_s),
            "time": {
                "compute_s": float(self.compute_s),
                "comm_wait_s": float(self.comm_wait_s),
                "bubble_s": float(self.bubble_s),
            },
            "time_per_rank": [{"rank": int(r["rank"]), **{k: float(r[k]) for k in _RANK_TIME}}
                              for r in self.time_per_rank],
            "bytes": {k: int(self.bytes.get(k, 0)) for k in KINDS},
            "bytes_predicted": (
                None if self.bytes_predicted is None
                else {k: int(v) for k, v in self.bytes_predicted.items()}
            ),
            "history_drift": (
                None if self.history_drift is None else [_json_float(v) for v in self.history_drift]
            ),
        }


def graph_summary(graph: Any) -> dict[str, Any]:
    """Dataset summary of a :class:`gnnpipe.data.Graph` for the record."""
    return {
        "name": graph.name,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "num_features": graph.num_features,
        "num_classes": int(graph.num_classes),
        "train": int(graph.train_mask.sum()),
        "val": int(graph.val_mask.sum()),
        "test": int(graph.test_mask.sum()),
    }


# ------------------------------------------------------------------ record
def build_record(
    config: Any,
    mode: str,
    world_size: int,
    graph_info: Mapping[str, Any],
    epochs: Sequence[EpochRecord],
    best: Mapping[str, Any],
    peak_memory: Sequence[Mapping[str, Any]],
    partition_stats: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    *,
    wall_time_s: float,
    machine: Mapping[str, Any] | None = None,
    stopped_early: bool = False,
    diverged: Mapping[str, Any] | None = None,
    plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the result record (keys: :data:`RECORD_FIELDS`).

    ``config`` is a :class:`~gnnpipe.config.RunConfig` (or its ``to_dict()``);
    ``best`` is the monitor's (:meth:`gnnpipe.trainer.monitor.Monitor.best`); ``peak_memory`` has
    one :func:`~gnnpipe.trainer.machine.measure_peak_memory` entry per worker;
    ``machine`` defaults to :func:`~gnnpipe.trainer.machine.machine_info` of this
    process; ``extra`` holds mode-specific measured figures (stored under ``"extra"``);
    ``plan`` the planner's entry (``--mode auto`` / ``--chunks auto``), else None.
    """
    cfg = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    epoch_dicts = [e.to_dict() for e in epochs]
    times = [e.epoch_time_s for e in epochs]
    skip = min(WARMUP_EPOCHS, max(len(times) - 1, 0))
    steady = times[skip:]
    return {
        "schema_version": SCHEMA_VERSION,
        "gnnpipe_version": gnnpipe.__version__,
        "mode": mode,
        "world_size": int(world_size),
        "config": cfg,
        "dataset": dict(graph_info),
        "epochs": epoch_dicts,
        "best": {"epoch": best.get("epoch"), "val_acc": _json_float(best.get("val_acc")),
                 "val_loss": _json_float(best.get("val_loss")),
                 "test_acc": _json_float(best.get("test_acc")),
                 "monitor": str(best.get("monitor", "val_acc"))},
        "summary": {
            "epochs_run": len(epochs),
            "stopped_early": bool(stopped_early),
            "diverged": None if diverged is None else dict(diverged),
            "final_loss": _json_float(epochs[-1].loss) if epochs else None,
            "mean_epoch_time_s": (sum(steady) / len(steady)) if steady else None,
            "mean_epoch_time_skipped_epochs": skip,
            "bytes_total": {k: sum(d["bytes"][k] for d in epoch_dicts) for k in KINDS},
        },
        "peak_memory_bytes": [dict(m) for m in peak_memory],
        "partition": None if partition_stats is None else dict(partition_stats),
        "machine": dict(machine) if machine is not None else machine_info(),
        "wall_time_s": float(wall_time_s),
        "extra": {} if extra is None else dict(extra),
        "plan": None if plan is None else dict(plan),
    }


def write_json_atomic(record: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``record`` as JSON: to a temporary file beside ``path``, then
    ``os.replace``, so that a reader never sees a half-written file."""
    target = Path(path)
    with atomic_open(target, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=2, allow_nan=False, default=_json_default)
        fh.write("\n")
    return target


def _json_default(x: Any) -> Any:
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, frozenset, tuple)):
        return list(x)
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"not JSON-serialisable: {type(x).__name__}")


def summary_line(record: Mapping[str, Any]) -> str:
    """One line for the end of a run: mode, epochs, loss, best val/test, epoch time."""
    s, b = record["summary"], record["best"]

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.2f}%"

    t = s["mean_epoch_time_s"]
    mb = sum(s["bytes_total"].values()) / max(s["epochs_run"], 1) / 1e6
    return (
        f"{record['dataset']['name']} {record['config']['model']['model']}-"
        f"{record['config']['model']['layers']} {record['mode']} x{record['world_size']}: "
        f"{s['epochs_run']} epochs{' (stopped early)' if s['stopped_early'] else ''}, "
        f"final loss {('n/a' if s['final_loss'] is None else format(s['final_loss'], '.4f'))}, best val {pct(b['val_acc'])} "
        f"(epoch {b['epoch']}), test {pct(b['test_acc'])}, "
        f"epoch {('n/a' if t is None else f'{t * 1e3:.1f} ms')}, comm {mb:.2f} MB/epoch, "
        f"wall {record['wall_time_s']:.1f} s"
    )


# ------------------------------------------------------------------ check
def check_record(record: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first key where ``record`` departs from the
    schema: the keys, types and sub-keys of :data:`RECORD_FIELDS` (each ``epochs``
    entry exactly :data:`EPOCH_FIELDS`), then the rules no table states: the schema
    version, epochs numbered from 1, finite losses, non-negative times, accuracies in
    [0, 1] and all set or all null, predicted bytes by known kinds, one peak-memory
    entry per worker."""
    _check_fields("record", record, RECORD_FIELDS, exact=False)
    if record["schema_version"] != SCHEMA_VERSION:
        raise ValueError(f"record.schema_version: expected {SCHEMA_VERSION}, found {record['schema_version']}")
    for i, e in enumerate(record["epochs"]):
        where = f"record.epochs[{i}]"
        if e["epoch"] != i + 1:
            raise ValueError(f"{where}.epoch: expected {i + 1}, found {e['epoch']}")
        if (e["loss"] is not None and not math.isfinite(e["loss"])) or e["epoch_time_s"] < 0:
            raise ValueError(f"{where}: loss must be finite or null and time >= 0")
        evaluated = [e[k] is not None for k in ("train_acc", "val_acc", "test_acc")]
        if any(evaluated) and not all(evaluated):
            raise ValueError(f"{where}: train/val/test accuracies must be all set or all null")
        for k in ("train_acc", "val_acc", "test_acc"):
            if e[k] is not None and not 0.0 <= e[k] <= 1.0:
                raise ValueError(f"{where}.{k}: expected a value in [0, 1], found {e[k]}")
        if e["bytes_predicted"] is not None:
            _refuse_unknown_kinds(f"{where}.bytes_predicted", e["bytes_predicted"])
    if len(record["peak_memory_bytes"]) != record["world_size"]:
        raise ValueError(
            f"record.peak_memory_bytes: expected one entry per worker ({record['world_size']}), "
            f"found {len(record['peak_memory_bytes'])}"
        )


def _check_fields(where: str, obj: Mapping[str, Any], fields: Sequence[Field], *, exact: bool) -> None:
    """Check ``obj`` against ``fields``: each key present with a value of its type and
    the sub-keys it requires; with ``exact``, no other key."""
    if exact and set(obj) != {f.key for f in fields}:
        raise ValueError(f"{where}: expected keys {sorted(f.key for f in fields)}, found {sorted(obj)}")
    for f in fields:
        if f.key not in obj:
            raise ValueError(f"{where}: missing key {f.key!r}")
        value = obj[f.key]
        if not isinstance(value, f.types):
            raise ValueError(f"{where}.{f.key}: expected {f.json_type}, found {type(value).__name__}")
        if value is None or not (f.keys or f.entries):
            continue
        items = ([(f"{where}.{f.key}[{i}]", v) for i, v in enumerate(value)] if isinstance(value, list)
                 else [(f"{where}.{f.key}", value)])
        for item_where, item in items:
            if not isinstance(item, dict):
                raise ValueError(f"{item_where}: expected an object, found {type(item).__name__}")
            if f.entries:
                _check_fields(item_where, item, f.entries, exact=True)
                continue
            missing = [k for k in f.keys if k not in item]
            if missing or (f.exact and len(item) != len(f.keys)):
                raise ValueError(f"{item_where}: expected keys {list(f.keys)}"
                                 f"{'' if f.exact else ' at least'}, found {sorted(item)}")
