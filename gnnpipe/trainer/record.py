"""The result record: the one JSON document every gnnpipe run produces.

This module is the ONLY builder of the record. The single trainer and the
distributed engine measure their figures, hand them over as :class:`EpochRecord`
objects and plain dicts, and :func:`build_record` assembles the document that
``gnnpipe.train`` returns and ``--json-out`` writes. Every figure in it is measured;
predictions (``bytes_predicted``) are labelled as such and may be null.

Typical use by a trainer::

    epochs = [EpochRecord(epoch=1, loss=..., epoch_time_s=..., compute_s=..., ...)]
    rec = build_record(config, mode="single", world_size=1, graph_info=graph_summary(g),
                       epochs=epochs, best=select_best(epochs),
                       peak_memory=[measure_peak_memory(device, rank=0)],
                       partition_stats=None, wall_time_s=..., machine=machine_info(...))
    write_json_atomic(rec, path)

:data:`RECORD_SCHEMA_DOC` is the schema as a Markdown snippet (copied into README.md)
and :func:`check_record` verifies a record against it (tests use it).
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import gnnpipe
from gnnpipe.atomic import atomic_open

__all__ = [
    "SCHEMA_VERSION",
    "BYTE_KINDS",
    "EpochRecord",
    "build_record",
    "select_best",
    "graph_summary",
    "machine_info",
    "measure_peak_memory",
    "write_json_atomic",
    "check_record",
    "summary_line",
    "RECORD_SCHEMA_DOC",
]

#: Bumped whenever the key sets that :func:`check_record` requires change (a key
#: added, renamed or removed). 2: ``epochs[].val_loss``, ``best.val_loss``, ``best.monitor``.
SCHEMA_VERSION = 2

#: The kinds under which :mod:`gnnpipe.engine.comm` counts the bytes it sends.
BYTE_KINDS = (
    "stage_activations",
    "stage_gradients",
    "halo_rows",
    "halo_gradients",
    "weight_allreduce",
    "evaluation",
)

#: Number of leading epochs left out of ``summary.mean_epoch_time_s`` (warm-up), as
#: in the reference system's measurements (DESIGN.md 8); fewer when the run is short.
WARMUP_EPOCHS = 5


def _zero_bytes() -> dict[str, int]:
    return {k: 0 for k in BYTE_KINDS}


@dataclass
class EpochRecord:
    """What one epoch measured.

    ``epoch`` counts from 1. ``train_acc/val_acc/test_acc`` and ``val_loss`` (mean
    validation cross-entropy) are None on epochs without evaluation.
    ``epoch_time_s`` is the wall time of the training step
    (forward, backward, optimizer step) and excludes evaluation, whose time is
    ``eval_time_s``. ``compute_s/comm_wait_s/bubble_s`` split the epoch time where
    the mode measures them (single: compute only). ``bytes`` are the payload bytes
    sent during the epoch by kind (summed over workers); ``bytes_predicted`` the
    model of DESIGN.md 7 when the mode offers one, else None.
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

    @property
    def evaluated(self) -> bool:
        return self.val_acc is not None

    def set_evaluation(self, metrics: dict[str, float | None]) -> None:
        """Take an evaluation's ``{train, val, test, val_loss}``."""
        self.train_acc, self.val_acc, self.test_acc = metrics["train"], metrics["val"], metrics["test"]
        self.val_loss = metrics.get("val_loss")

    def to_dict(self) -> dict[str, Any]:
        unknown = set(self.bytes) - set(BYTE_KINDS)
        if unknown:
            raise ValueError(f"EpochRecord.bytes: unknown kinds {sorted(unknown)}, expected {BYTE_KINDS}")
        return {
            "epoch": int(self.epoch),
            "loss": float(self.loss) if math.isfinite(self.loss) else None,  # diverged: null
            "train_acc": _opt_float(self.train_acc),
            "val_acc": _opt_float(self.val_acc),
            "test_acc": _opt_float(self.test_acc),
            "val_loss": _finite_or_none(self.val_loss),  # diverged: null
            "epoch_time_s": float(self.epoch_time_s),
            "eval_time_s": _opt_float(self.eval_time_s),
            "time": {
                "compute_s": float(self.compute_s),
                "comm_wait_s": float(self.comm_wait_s),
                "bubble_s": float(self.bubble_s),
            },
            "bytes": {k: int(self.bytes.get(k, 0)) for k in BYTE_KINDS},
            "bytes_predicted": (
                None if self.bytes_predicted is None
                else {k: int(v) for k, v in self.bytes_predicted.items()}
            ),
        }


def _opt_float(x: float | None) -> float | None:
    return None if x is None else float(x)


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# ------------------------------------------------------------------ pieces
def monitored_value(metrics: dict[str, float | None], monitor: str) -> float:
    """The figure ``monitor`` (``val_acc`` or ``val_loss``) of an evaluation, signed so
    that larger is better; a missing or non-finite loss is the worst value."""
    if monitor == "val_acc":
        return float(metrics["val"])  # type: ignore[arg-type]
    if monitor == "val_loss":
        loss = metrics.get("val_loss")
        return -float(loss) if loss is not None and math.isfinite(loss) else -math.inf
    raise ValueError(f"monitor: expected val_acc or val_loss, found {monitor!r}")


def select_best(epochs: Sequence[EpochRecord], monitor: str = "val_acc") -> dict[str, Any]:
    """The evaluated epoch with the best ``monitor`` (highest validation accuracy or
    lowest validation loss; the earliest on a tie): ``{epoch, val_acc, val_loss,
    test_acc, monitor}``; the figures None when nothing was evaluated."""
    best: EpochRecord | None = None
    best_value = -math.inf
    for e in epochs:
        if not e.evaluated:
            continue
        value = monitored_value({"val": e.val_acc, "val_loss": e.val_loss}, monitor)
        if best is None or value > best_value:
            best, best_value = e, value
    if best is None:
        return {"epoch": None, "val_acc": None, "val_loss": None, "test_acc": None, "monitor": monitor}
    return {"epoch": best.epoch, "val_acc": float(best.val_acc), "val_loss": _opt_float(best.val_loss),  # type: ignore[arg-type]
            "test_acc": _opt_float(best.test_acc), "monitor": monitor}


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


def _cpu_cores() -> dict[str, int | None]:
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return {"logical": os.cpu_count(), "usable": usable}


def machine_info(device: str | None = None, dist_backend: str | None = None) -> dict[str, Any]:
    """Where the run happened: host, cores, python/torch versions, device, backend.

    ``device`` is ``cpu``/``cuda`` (default: cuda if available); for CUDA the GPU
    name and count are added. Bench scripts reuse this for their JSON.
    """
    import torch

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_cores": _cpu_cores(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gnnpipe": gnnpipe.__version__,
        "device": dev,
        "dist_backend": dist_backend,
    }
    if str(dev).startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(dev))
        info["gpu_count"] = torch.cuda.device_count()
        info["cuda"] = torch.version.cuda
    return info


def measure_peak_memory(device: Any, rank: int = 0) -> dict[str, Any]:
    """This process's peak memory, measured: ``torch.cuda.max_memory_allocated`` on
    CUDA; on CPU the resident high-water mark of this process's own address space
    (``VmHWM`` from /proc/self/status on Linux, else ``ru_maxrss``). ``source`` says
    which, since they are not comparable (RSS includes the interpreter).

    Why not ``ru_maxrss`` on Linux: it is carried over fork and exec, so a spawned
    worker would report its launcher's peak (measured: an 800 MB parent gives a
    15 MB child 800 MB).
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return {"rank": int(rank), "bytes": int(torch.cuda.max_memory_allocated(dev)),
                "source": "torch.cuda.max_memory_allocated"}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return {"rank": int(rank), "bytes": int(line.split()[1]) * 1024, "source": "VmHWM"}
    except OSError:
        pass
    try:
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        scale = 1 if sys.platform == "darwin" else 1024  # macOS: bytes; Linux: KiB
        return {"rank": int(rank), "bytes": int(rss) * scale, "source": "ru_maxrss"}
    except ImportError:  # pragma: no cover - Windows
        return {"rank": int(rank), "bytes": None, "source": "unavailable"}


# ------------------------------------------------------------------ record
def build_record(
    config: Any,
    mode: str,
    world_size: int,
    graph_info: Mapping[str, Any],
    epochs: Sequence[EpochRecord],
    best: Mapping[str, Any] | None,
    peak_memory: Sequence[Mapping[str, Any]],
    partition_stats: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    *,
    wall_time_s: float,
    machine: Mapping[str, Any] | None = None,
    stopped_early: bool = False,
) -> dict[str, Any]:
    """Assemble the result record (schema: :data:`RECORD_SCHEMA_DOC`).

    ``config`` is a :class:`~gnnpipe.config.RunConfig` (or its ``to_dict()``);
    ``best`` defaults to :func:`select_best` over ``epochs``; ``peak_memory`` has
    one :func:`measure_peak_memory` entry per worker; ``extra`` holds mode-specific
    measured figures (stored under ``"extra"``).
    """
    cfg = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    epoch_dicts = [e.to_dict() for e in epochs]
    if best is None:
        best = select_best(epochs)
    times = [e.epoch_time_s for e in epochs]
    skip = min(WARMUP_EPOCHS, max(len(times) - 1, 0))
    steady = times[skip:]
    bytes_total = {k: sum(int(e.bytes.get(k, 0)) for e in epochs) for k in BYTE_KINDS}
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "gnnpipe_version": gnnpipe.__version__,
        "mode": mode,
        "world_size": int(world_size),
        "config": cfg,
        "dataset": dict(graph_info),
        "epochs": epoch_dicts,
        "best": {"epoch": best.get("epoch"), "val_acc": _opt_float(best.get("val_acc")),
                 "val_loss": _opt_float(best.get("val_loss")),
                 "test_acc": _opt_float(best.get("test_acc")),
                 "monitor": str(best.get("monitor", "val_acc"))},
        "summary": {
            "epochs_run": len(epochs),
            "stopped_early": bool(stopped_early),
            "final_loss": (float(epochs[-1].loss) if epochs and math.isfinite(epochs[-1].loss)
                           else None),
            "mean_epoch_time_s": (sum(steady) / len(steady)) if steady else None,
            "mean_epoch_time_skipped_epochs": skip,
            "bytes_total": bytes_total,
        },
        "peak_memory_bytes": [dict(m) for m in peak_memory],
        "partition": None if partition_stats is None else dict(partition_stats),
        "machine": dict(machine) if machine is not None else machine_info(),
        "wall_time_s": float(wall_time_s),
        "extra": {} if extra is None else dict(extra),
    }
    return record


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


# ------------------------------------------------------------------ schema
RECORD_SCHEMA_DOC = """\
| key | type | meaning |
| --- | --- | --- |
| `schema_version` | int | record layout version (currently 2; 2 added `val_loss` per epoch and `best.val_loss` / `best.monitor`) |
| `gnnpipe_version` | str | package version that wrote the record |
| `mode` | str | `single`, `graph`, `pipeline` or `hybrid` |
| `world_size` | int | number of worker processes |
| `config` | object | the full resolved `RunConfig` (`data`, `model`, `train`, `parallel`) |
| `dataset` | object | `name`, `num_nodes`, `num_edges`, `num_features`, `num_classes`, `train`, `val`, `test` (split sizes) |
| `epochs` | list | one object per epoch, see below |
| `best` | object | `epoch`, `val_acc`, `val_loss`, `test_acc` at the evaluated epoch with the best `monitor` (`train.monitor`: highest `val_acc` or lowest `val_loss`), and `monitor` |
| `summary` | object | `epochs_run`, `stopped_early`, `final_loss`, `mean_epoch_time_s` (leaving out `mean_epoch_time_skipped_epochs` warm-up epochs), `bytes_total` by kind |
| `peak_memory_bytes` | list | per worker: `rank`, `bytes`, `source` (`torch.cuda.max_memory_allocated` on CUDA; on CPU `VmHWM` on Linux, else `ru_maxrss`) |
| `partition` | object or null | partition quality (edge cut, balance, halo, M) when the mode partitions |
| `machine` | object | `hostname`, `platform`, `cpu_cores`, `python`, `torch`, `gnnpipe`, `device`, `dist_backend` (+ `gpu`, `gpu_count`, `cuda` on CUDA) |
| `wall_time_s` | float | total wall time of the run, loading and evaluation included |
| `extra` | object | mode-specific measured figures |

Each entry of `epochs`: `epoch` (from 1), `loss` (training loss of that epoch's
forward), `train_acc` / `val_acc` / `test_acc` and `val_loss` (mean validation cross-entropy)
(exact full-graph evaluation after the step; null on epochs without evaluation), `epoch_time_s` (training step, evaluation
excluded), `eval_time_s` (null when not evaluated), `time` {`compute_s`,
`comm_wait_s`, `bubble_s`}, `bytes` {`stage_activations`, `stage_gradients`,
`halo_rows`, `halo_gradients`, `weight_allreduce`, `evaluation`} (payload bytes sent,
summed over workers, measured), `bytes_predicted` (the DESIGN.md 7 model for the
same kinds, a prediction, or null).
"""

_TOP_KEYS = {
    "schema_version": int, "gnnpipe_version": str, "mode": str, "world_size": int,
    "config": dict, "dataset": dict, "epochs": list, "best": dict, "summary": dict,
    "peak_memory_bytes": list, "partition": (dict, type(None)), "machine": dict,
    "wall_time_s": (int, float), "extra": dict,
}
_EPOCH_KEYS = {
    "epoch", "loss", "train_acc", "val_acc", "test_acc", "val_loss", "epoch_time_s", "eval_time_s",
    "time", "bytes", "bytes_predicted",
}


def check_record(record: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first key where ``record`` departs from the
    schema (types, epoch keys, byte kinds, finite numbers)."""
    for key, tp in _TOP_KEYS.items():
        if key not in record:
            raise ValueError(f"record: missing key {key!r}")
        if not isinstance(record[key], tp):
            raise ValueError(f"record.{key}: expected {tp}, found {type(record[key]).__name__}")
    if record["schema_version"] != SCHEMA_VERSION:
        raise ValueError(f"record.schema_version: expected {SCHEMA_VERSION}, found {record['schema_version']}")
    for k in ("data", "model", "train", "parallel"):
        if k not in record["config"]:
            raise ValueError(f"record.config: missing section {k!r}")
    for k in ("name", "num_nodes", "num_edges", "num_features", "num_classes", "train", "val", "test"):
        if k not in record["dataset"]:
            raise ValueError(f"record.dataset: missing key {k!r}")
    for i, e in enumerate(record["epochs"]):
        if set(e) != _EPOCH_KEYS:
            raise ValueError(f"record.epochs[{i}]: expected keys {sorted(_EPOCH_KEYS)}, found {sorted(e)}")
        if e["epoch"] != i + 1:
            raise ValueError(f"record.epochs[{i}].epoch: expected {i + 1}, found {e['epoch']}")
        if (e["loss"] is not None and not math.isfinite(e["loss"])) or e["epoch_time_s"] < 0:
            raise ValueError(f"record.epochs[{i}]: loss must be finite or null and time >= 0")
        if set(e["time"]) != {"compute_s", "comm_wait_s", "bubble_s"}:
            raise ValueError(f"record.epochs[{i}].time: unexpected keys {sorted(e['time'])}")
        if set(e["bytes"]) != set(BYTE_KINDS):
            raise ValueError(f"record.epochs[{i}].bytes: expected kinds {BYTE_KINDS}, found {sorted(e['bytes'])}")
        evaluated = [e[k] is not None for k in ("train_acc", "val_acc", "test_acc")]
        if any(evaluated) and not all(evaluated):
            raise ValueError(f"record.epochs[{i}]: train/val/test accuracies must be all set or all null")
        for k in ("train_acc", "val_acc", "test_acc"):
            if e[k] is not None and not 0.0 <= e[k] <= 1.0:
                raise ValueError(f"record.epochs[{i}].{k}: expected a value in [0, 1], found {e[k]}")
    for k in ("epoch", "val_acc", "val_loss", "test_acc", "monitor"):
        if k not in record["best"]:
            raise ValueError(f"record.best: missing key {k!r}")
    for i, m in enumerate(record["peak_memory_bytes"]):
        if set(m) < {"rank", "bytes", "source"}:
            raise ValueError(f"record.peak_memory_bytes[{i}]: expected rank, bytes, source, found {sorted(m)}")
    if len(record["peak_memory_bytes"]) != record["world_size"]:
        raise ValueError(
            f"record.peak_memory_bytes: expected one entry per worker ({record['world_size']}), "
            f"found {len(record['peak_memory_bytes'])}"
        )
    for k in ("hostname", "cpu_cores", "torch", "python", "device", "dist_backend"):
        if k not in record["machine"]:
            raise ValueError(f"record.machine: missing key {k!r}")

