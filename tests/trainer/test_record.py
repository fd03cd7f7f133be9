"""The result record: built by build_record, checked by check_record, written atomically."""

from __future__ import annotations

import json
import os

import pytest
import torch

from gnnpipe.config import RunConfig
from gnnpipe.trainer.record import (
    BYTE_KINDS,
    EpochRecord,
    build_record,
    check_record,
    machine_info,
    measure_peak_memory,
    select_best,
    summary_line,
    write_json_atomic,
)

GRAPH_INFO = {"name": "g", "num_nodes": 10, "num_edges": 20, "num_features": 3, "num_classes": 2,
              "train": 4, "val": 3, "test": 3}


def _epochs(vals):
    out = []
    for i, v in enumerate(vals, start=1):
        e = EpochRecord(epoch=i, loss=1.0 / i, epoch_time_s=0.01 * i, compute_s=0.01 * i)
        if v is not None:
            e.train_acc, e.val_acc, e.test_acc, e.eval_time_s = 0.9, v, v / 2, 0.001
        out.append(e)
    return out


def _record(epochs, world_size=1):
    return build_record(RunConfig(), mode="single", world_size=world_size, graph_info=GRAPH_INFO,
                        epochs=epochs, best=None,
                        peak_memory=[measure_peak_memory("cpu", rank=r) for r in range(world_size)],
                        wall_time_s=1.5, machine=machine_info("cpu", None))


def test_best_is_the_earliest_highest_validation_epoch():
    best = select_best(_epochs([None, 0.5, 0.8, None, 0.8, 0.7]))
    assert best == {"epoch": 3, "val_acc": 0.8, "val_loss": None, "test_acc": 0.4, "monitor": "val_acc"}
    assert select_best(_epochs([None, None])) == {"epoch": None, "val_acc": None, "val_loss": None,
                                                  "test_acc": None, "monitor": "val_acc"}


def test_best_on_val_loss_is_the_earliest_lowest_loss_epoch():
    epochs = _epochs([0.5, 0.8, 0.6, 0.7])
    for e, loss in zip(epochs, (1.0, 0.9, 0.4, 0.4)):
        e.val_loss = loss
    best = select_best(epochs, "val_loss")
    # epoch 3: the lowest loss first reached there, though epoch 2 has the best accuracy
    assert best == {"epoch": 3, "val_acc": 0.6, "val_loss": 0.4, "test_acc": 0.3, "monitor": "val_loss"}
    assert select_best(epochs)["epoch"] == 2
    epochs[2].val_loss = float("nan")  # a diverged evaluation is never the best
    assert select_best(epochs, "val_loss")["epoch"] == 4


def test_record_has_the_schema_and_json_roundtrips(tmp_path):
    epochs = _epochs([None, 0.5, None, 0.75])
    epochs[1].bytes["halo_rows"] = 123
    epochs[3].bytes["halo_rows"] = 7
    rec = _record(epochs)
    check_record(rec)
    assert [e["val_acc"] for e in rec["epochs"]] == [None, 0.5, None, 0.75]
    assert rec["epochs"][0]["test_acc"] is None and rec["epochs"][0]["eval_time_s"] is None
    assert set(rec["epochs"][0]["bytes"]) == set(BYTE_KINDS)
    assert rec["summary"]["bytes_total"]["halo_rows"] == 130
    assert rec["best"]["epoch"] == 4
    assert rec["config"] == RunConfig().to_dict()
    # warm-up epochs are left out of the mean epoch time, but at least one epoch is kept
    assert rec["summary"]["mean_epoch_time_s"] == pytest.approx(0.04)
    path = write_json_atomic(rec, tmp_path / "sub" / "r.json")
    assert json.loads(path.read_text()) == rec
    assert os.listdir(tmp_path / "sub") == ["r.json"]  # no temp file left behind
    assert "best val 75.00%" in summary_line(rec)


def test_check_record_rejects_departures():
    rec = _record(_epochs([0.5]))
    for breaking in (lambda r: r.pop("machine"),
                     lambda r: r["epochs"][0].pop("bytes"),
                     lambda r: r["epochs"][0].__setitem__("test_acc", None),
                     lambda r: r.__setitem__("world_size", 2)):
        broken = json.loads(json.dumps(rec))
        breaking(broken)
        with pytest.raises(ValueError):
            check_record(broken)


def test_unknown_byte_kind_is_refused():
    e = EpochRecord(epoch=1, loss=0.1, epoch_time_s=0.1, bytes={"gossip": 3})
    with pytest.raises(ValueError, match="gossip"):
        e.to_dict()


def test_diverged_loss_is_null_not_nan(tmp_path):
    rec = _record([EpochRecord(epoch=1, loss=float("nan"), epoch_time_s=0.1)])
    check_record(rec)
    assert rec["epochs"][0]["loss"] is None and rec["summary"]["final_loss"] is None
    write_json_atomic(rec, tmp_path / "r.json")  # strict JSON: would fail on NaN


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(TypeError):
        write_json_atomic({"x": object()}, tmp_path / "r.json")
    assert os.listdir(tmp_path) == []


def test_peak_memory_and_machine_are_measured():
    m = measure_peak_memory("cpu")
    assert m["source"] in ("VmHWM", "ru_maxrss") and m["bytes"] > 10 * 2**20  # an interpreter with torch
    info = machine_info("cpu", "gloo")
    assert info["torch"] == torch.__version__ and info["dist_backend"] == "gloo"
    assert info["cpu_cores"]["logical"] >= 1


def test_readme_documents_the_record_schema_as_the_code_states_it():
    """README.md carries RECORD_SCHEMA_DOC verbatim, so the documented schema cannot
    drift from the one check_record enforces."""
    from pathlib import Path

    from gnnpipe.trainer.record import RECORD_SCHEMA_DOC

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert RECORD_SCHEMA_DOC.strip() in readme
