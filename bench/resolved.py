"""What a run's settings resolve to today, so that a record is known by what ran.

A run is named by the hash of its *point*, the settings the suite passes
(:func:`bench.suite.run_name`); everything the point leaves out takes the trainer's
default. When a default changes (``snapshot_period`` 1 -> 23, say), the point and
its name stay the same while the run it stands for does not: a committed record
would silently stand for the old default. So the runner and the report compare each
record's resolved config (the record's ``config``, written by the trainer) with what
the point resolves to now (:func:`gnnpipe.cli.parse_config`, which reads no data):

* :func:`changes` lists the fields that differ (a *stale* record: the runner runs
  it again, the report leaves it out and says so);
* :func:`key` is the canonical text of the fields that decide the result, so that a
  record whose point was rewritten (a default made explicit in the suite file) is
  found again under its new name instead of being run twice
  (:func:`bench.runner.adopt_records`).

Fields that do not change what a run computes are left out of both: where files
go and how much is logged (:data:`MACHINE_LOCAL`), and the parallel settings a
run's mode ignores (the pipeline techniques in single and graph mode, as
:func:`bench.suite.normalize` leaves them out of the point). A field that the
trainer gained after a record was written is read as the value every run had before
it existed (:data:`IMPLIED`); any other field one side lacks is not compared.
"""

from __future__ import annotations

import json
from typing import Any

from .suite import SETTINGS, argv

#: ``section.field`` of the resolved config that say where output goes or how much
#: is logged, not what is computed.
MACHINE_LOCAL = frozenset({
    "data.root", "train.json_out", "train.metrics_jsonl", "train.tensorboard",
    "train.checkpoint_dir", "train.checkpoint_every", "train.resume",
    "train.log_level", "train.log_every",
})

#: Fields the trainer gained after records were committed, with the value every run
#: had before the field existed (``stage_dtype``: stage messages in the training dtype;
#: ``dropout_masks``: a mask per reading chunk, except the runs of commits d117269 to
#: 37c5cd8, which drew one per row and layer and whose records say so, added after).
IMPLIED = {"parallel.stage_dtype": "same", "parallel.dropout_masks": "chunk", "parallel.cross_epoch_chunks": 0}


def resolved_config(point: dict[str, Any]) -> dict[str, Any]:
    """The nested config dict (as the record stores it) that ``point`` runs with today."""
    from gnnpipe.cli import parse_config  # the trainer's own parser; it loads no data

    cfg, _ = parse_config(argv(point))
    return cfg.to_dict()


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    return {f"{section}.{name}": value
            for section, body in config.items() if isinstance(body, dict)
            for name, value in body.items()}


def _ignored(mode: str) -> set[str]:
    """The parallel fields ``mode`` does not read (their setting does not apply to it)."""
    return {f"parallel.{k}" for k, s in SETTINGS.items() if mode not in s.modes}


def effective(config: dict[str, Any]) -> dict[str, Any]:
    """The flat ``section.field`` -> value of ``config`` that decide what a run computes."""
    flat = {**IMPLIED, **_flat(config)}
    skip = MACHINE_LOCAL | _ignored(str(flat.get("parallel.mode")))
    return {k: v for k, v in flat.items() if k not in skip}


def key(config: dict[str, Any]) -> str:
    """Canonical text of :func:`effective` (equal keys: the same run)."""
    return json.dumps(effective(config), sort_keys=True, separators=(",", ":"))


def changes(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``"field: recorded -> now"`` for every effective field that differs (see the
    module docstring for the fields one side lacks)."""
    old, new = effective(recorded), effective(now)
    return [f"{k}: {old[k]!r} -> {new[k]!r}" for k in sorted(old.keys() & new.keys()) if old[k] != new[k]]
