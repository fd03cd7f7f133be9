"""Checkpoints: every rank writes its shard, rank 0 a manifest last; exact resume.

Layout on disk (``train.checkpoint_dir``)::

    DIR/epoch-000012/rank-00000.pt     # one shard per rank (torch.save)
    DIR/epoch-000012/rank-00001.pt
    DIR/epoch-000012/manifest.json     # written LAST, by rank 0

A shard holds the rank's runner state (parameters, optimizer state, historical
buffers and snapshots, the epoch count), its random state (torch's CPU generator, the
CUDA generator of its device, numpy's), and the loop's state (the epochs measured so
far, the monitor: best epoch and patience counter). The chunk order needs no state:
it is a pure function of the seed and the epoch (:func:`gnnpipe.engine.schedule.order_seed`).
The manifest names every shard with its sha256 and size, the resolved config, the
layout, the dataset summary with a digest of its content (:func:`dataset_digest`) and
the partition's digest. Every file is written through
:func:`gnnpipe.atomic.atomic_open` (temporary file, fsync, rename) and the manifest
only after every shard is complete, so a crash in the middle of a write leaves the
previous checkpoint loadable: a folder without a manifest, or whose shards do not
match it, is not a checkpoint. After a new checkpoint is complete, older ones beyond
the newest :data:`KEEP` are removed, and so is every incomplete one (a killed write's
temporaries with it).

Resume (``train.resume``) takes the newest complete checkpoint and refuses, with one
ConfigError line saying what differs, one written by another model, dataset,
partition, layout or world size. Keys that may change across a resume (the number of
epochs, how often to evaluate, the patience, logging, outputs, the checkpoint settings
themselves, the host heap's thresholds) are :data:`FREE_KEYS`: none of them changes what the saved state means.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gnnpipe.atomic import atomic_open
from gnnpipe.errors import ConfigError

__all__ = ["Checkpointer", "Resumed", "find_latest", "open_checkpoint", "check_compatible", "check_partition",
           "dataset_digest", "KEEP", "FREE_KEYS"]

logger = logging.getLogger("gnnpipe.train")

#: Complete checkpoints kept after a new one is written.
KEEP = 2
#: ``section.key`` of the config that may differ between a checkpoint and its resume.
FREE_KEYS = frozenset({
    "train.epochs", "train.eval_every", "train.patience", "train.json_out", "train.log_level", "train.log_every",
    "train.checkpoint_dir", "train.checkpoint_every", "train.resume", "train.metrics_jsonl", "train.tensorboard",
    "train.trace_dir",
    "train.host_heap_mib", "train.host_heap_trim_mib", "train.host_huge_pages",
})
_FORMAT = 1
_DIR_RE = re.compile(r"^epoch-(\d{6,})$")


def _rng_state(device: torch.device) -> dict[str, Any]:
    import numpy as np

    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
            "numpy": np.random.get_state()}


def _set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    import numpy as np

    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and state["cuda"] is not None:
        torch.cuda.set_rng_state(state["cuda"], device)
    np.random.set_state(state["numpy"])


class _HashingWriter:
    """A write-only file that passes bytes on to ``fh`` and hashes them (sha256)."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        self.digest.update(view)
        self.size += view.nbytes
        return self.fh.write(view)

    def flush(self) -> None:
        self.fh.flush()

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


def dataset_digest(graph: Any) -> str:
    """The first 16 hex digits of a sha256 over the graph's content (structure,
    features, labels, masks): the manifest's ``dataset.content_sha256``, so that a
    dataset file changed under the same name and sizes is another dataset. One pass
    over the features (0.09 s for 100 MB here), made only when checkpoints are on."""
    h = hashlib.sha256()
    f = graph.features
    for t in (graph.indptr, graph.indices, graph.labels, graph.train_mask, graph.val_mask, graph.test_mask,
              *((f,) if isinstance(f, torch.Tensor) else (f.crow, f.col, f.values))):
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())  # the buffer, no copy
    return h.hexdigest()[:16]


def _flat(config_dict: dict[str, Any]) -> dict[str, Any]:
    return {f"{section}.{k}": v for section, body in config_dict.items() for k, v in body.items()}


@dataclass(frozen=True)
class Resumed:
    """A checkpoint found on disk: its folder, its epoch and its manifest."""

    folder: Path
    epoch: int
    manifest: dict[str, Any]

    def shard(self, rank: int, device: torch.device) -> dict[str, Any]:
        """Rank ``rank``'s shard, verified against the manifest's digest."""
        entry = self.manifest["shards"][rank]
        path = self.folder / entry["file"]
        digest = hashlib.sha256()
        with path.open("rb") as fh:  # streamed: a shard may be GBs
            for block in iter(lambda: fh.read(1 << 24), b""):
                digest.update(block)
        if digest.hexdigest() != entry["sha256"]:
            raise ConfigError(f"checkpoint {str(self.folder)!r}: expected shard {entry['file']} with sha256 "
                              f"{entry['sha256'][:12]}..., found other content")
        # Read from the file, not memory-mapped: the optimizer keeps the loaded moment
        # tensors and updates them in place, which on a mapping is a page fault per page.
        return torch.load(path, map_location=device, weights_only=False)

    def restore_rng(self, shard: dict[str, Any], device: torch.device) -> None:
        _set_rng_state(shard["rng"], device)


def _complete(folder: Path) -> dict[str, Any] | None:
    """The manifest of ``folder`` when it and every shard it names are there with the
    sizes it states (digests are checked when a shard is read); else None."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("format") != _FORMAT:
        return None
    for entry in manifest.get("shards", []):
        f = folder / entry["file"]
        if not f.is_file() or f.stat().st_size != entry["bytes"]:
            return None
    return manifest


def open_checkpoint(folder: str | Path) -> Resumed:
    """The checkpoint in ``folder`` (one chosen by :func:`find_latest` at the entry)."""
    folder = Path(folder)
    manifest = _complete(folder)
    m = _DIR_RE.match(folder.name)
    if manifest is None or m is None:
        raise ConfigError(f"checkpoint {str(folder)!r}: expected a complete checkpoint, found none")
    return Resumed(folder=folder, epoch=int(m.group(1)), manifest=manifest)


def find_latest(directory: str | Path) -> Resumed | None:
    """The newest complete checkpoint under ``directory``, or None."""
    root = Path(directory)
    if not root.is_dir():
        return None
    found = sorted(((int(m.group(1)), p) for p in root.iterdir()
                    if p.is_dir() and (m := _DIR_RE.match(p.name))), reverse=True)
    for epoch, folder in found:
        manifest = _complete(folder)
        if manifest is not None:
            return Resumed(folder=folder, epoch=epoch, manifest=manifest)
        logger.warning("checkpoint %s is incomplete (no manifest or a missing shard); skipped", folder)
    return None


def check_compatible(resumed: Resumed, config: dict[str, Any], layout: dict[str, Any],
                     dataset: dict[str, Any]) -> None:
    """ConfigError naming what differs between the checkpoint and this run: every
    differing key of the first of config (outside :data:`FREE_KEYS`), layout (world
    size included) and dataset that differs, so a changed setting is named beside the
    values derived from it (``--workers 3`` also changes ``parallel.chunks``)."""
    m = resumed.manifest
    theirs, mine = _flat(m["config"]), _flat(config)
    for prefix, keys, ours, saved in (
            ("", sorted((set(theirs) | set(mine)) - FREE_KEYS), mine, theirs),
            ("layout ", ("mode", "world_size", "ways", "stages", "chunks", "stage_split", "device"), layout,
             m["layout"]),
            ("dataset ", sorted(set(m["dataset"]) | set(dataset)), dataset, m["dataset"])):
        differ = [k for k in keys if ours.get(k) != saved.get(k)]
        if differ:
            if len(differ) == 1:
                expected, found = f"{differ[0]}={ours.get(differ[0])!r}", repr(saved.get(differ[0]))
            else:
                expected = ", ".join(f"{k}={ours.get(k)!r}" for k in differ)
                found = ", ".join(f"{k}={saved.get(k)!r}" for k in differ)
            raise ConfigError(f"checkpoint {str(resumed.folder)!r}: expected {prefix}{expected} (this run), "
                              f"found {found}")


def check_partition(resumed: Resumed, digest: str | None) -> None:
    """ConfigError when the checkpoint was written over another partition."""
    theirs = resumed.manifest.get("partition_digest")
    if theirs != digest:
        raise ConfigError(f"checkpoint {str(resumed.folder)!r}: expected partition "
                          f"{(digest or 'none')[:12]} (this run), found {(theirs or 'none')[:12]}")


class Checkpointer:
    """Writes this rank's shard, and on rank 0 the manifest, every ``every`` epochs
    (and at the end of the run); see the module docstring."""

    def __init__(self, directory: str | Path, every: int, *, rank: int, comm: Any, device: torch.device,
                 header: dict[str, Any]) -> None:
        self.root = Path(directory)
        self.every = int(every)
        self.rank = rank
        self.comm = comm
        self.device = device
        self.header = header  # config, layout, dataset, partition_digest
        self.last_write: dict[str, float] | None = None

    def due(self, epoch: int, final: bool) -> bool:
        return final or epoch % self.every == 0

    def save(self, epoch: int, runner_state: dict[str, Any], loop_state: dict[str, Any]) -> None:
        """Collective: every rank calls it at the same epoch."""
        t0 = time.perf_counter()
        folder = self.root / f"epoch-{epoch:06d}"
        name = f"rank-{self.rank:05d}.pt"
        with atomic_open(folder / name, "wb") as fh:
            # Streamed to the file and hashed on the way: no second copy in memory.
            out = _HashingWriter(fh)
            torch.save({"epoch": epoch, "runner": runner_state, "loop": loop_state,
                        "rng": _rng_state(self.device)}, out)
        entry = {"rank": self.rank, "file": name, "sha256": out.hexdigest(), "bytes": out.size}
        entries = self.comm.all_gather_object(entry)  # every shard is complete past this point
        if self.rank == 0:
            manifest = {"format": _FORMAT, "epoch": epoch, "world_size": len(entries), "shards": entries,
                        "written_unix_s": time.time(), **self.header}
            with atomic_open(folder / "manifest.json", "w", encoding="utf-8") as fh:
                json.dump(manifest, fh, indent=1, default=str)
            self._prune(epoch)
        self.comm.barrier()
        self.last_write = {"epoch": epoch, "bytes": float(out.size), "time_s": time.perf_counter() - t0}
        logger.info("checkpoint of epoch %d written to %s (%.1f MB on this rank, %.2f s)", epoch, folder,
                    out.size / 1e6, self.last_write["time_s"])

    def _prune(self, newest: int) -> None:
        """Remove the complete checkpoints older than the newest :data:`KEEP`, and every
        incomplete one: every rank has passed ``newest``, so an incomplete folder (a
        later epoch included) is a dead run's torn write, temporaries and all."""
        complete = {int(m.group(1)) for p in self.root.iterdir()
                    if p.is_dir() and (m := _DIR_RE.match(p.name)) and _complete(p) is not None}
        keep = set(sorted(e for e in complete if e <= newest)[-KEEP:]) | {newest}
        for p in self.root.iterdir():
            m = _DIR_RE.match(p.name)
            epoch = int(m.group(1)) if m and p.is_dir() else None
            if epoch is not None and epoch not in keep and (epoch < newest or epoch not in complete):
                shutil.rmtree(p, ignore_errors=True)
