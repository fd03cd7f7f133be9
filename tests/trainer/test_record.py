"""The result record: built by build_record to the schema tables, checked by
check_record against them, documented from them, written atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gnnpipe.config import RunConfig
from gnnpipe.engine.comm import KINDS
from gnnpipe.trainer.machine import machine_info, measure_peak_memory
from gnnpipe.trainer.monitor import Monitor
from gnnpipe.trainer.record import (
    EPOCH_FIELDS,
    RECORD_FIELDS,
    EpochRecord,
    Field,
    build_record,
    check_record,
    graph_summary,
    summary_line,
    write_json_atomic,
)

from tests.trainer.helpers import easy_graph

GRAPH_INFO = {"name": "g", "num_nodes": 10, "num_edges": 20, "num_features": 3, "num_classes": 2,
              "train": 4, "val": 3, "test": 3}


def _epochs(vals):
    out = []
    for i, v in enumerate(vals, start=1):
        e = EpochRecord(epoch=i, loss=1.0 / i, epoch_time_s=0.01 * i, compute_s=0.01 * i,
                        time_per_rank=[{"rank": 0, "epoch_s": 0.01 * i, "compute_s": 0.01 * i,
                                        "comm_wait_s": 0.0, "bubble_s": 0.0}])
        if v is not None:
            e.train_acc, e.val_acc, e.test_acc, e.eval_time_s = 0.9, v, v / 2, 0.001
        out.append(e)
    return out


def _best(epochs, monitor="val_acc"):
    m = Monitor(monitor)
    for e in epochs:
        if e.evaluated:
            m.update(e.epoch, e.val_acc, e.val_loss, e.test_acc)
    return m.best()


def _record(epochs, world_size=1, graph_info=GRAPH_INFO):
    return build_record(RunConfig(), mode="single", world_size=world_size, graph_info=graph_info,
                        epochs=epochs, best=_best(epochs),
                        peak_memory=[measure_peak_memory("cpu", rank=r) for r in range(world_size)],
                        wall_time_s=1.5, machine=machine_info("cpu", None))


def _field(fields, key):
    return next(f for f in fields if f.key == key)


def test_record_has_the_schema_and_json_roundtrips(tmp_path):
    epochs = _epochs([None, 0.5, None, 0.75])
    epochs[1].bytes["halo_rows"] = 123
    epochs[3].bytes["halo_rows"] = 7
    rec = _record(epochs)
    check_record(rec)
    assert [e["val_acc"] for e in rec["epochs"]] == [None, 0.5, None, 0.75]
    assert rec["epochs"][0]["test_acc"] is None and rec["epochs"][0]["eval_time_s"] is None
    assert list(rec["epochs"][0]["bytes"]) == list(KINDS)  # the communicator's kinds, in its order
    assert rec["summary"]["bytes_total"]["halo_rows"] == 130
    assert rec["best"]["epoch"] == 4
    assert rec["config"] == RunConfig().to_dict()
    # warm-up epochs are left out of the mean epoch time, but at least one epoch is kept
    assert rec["summary"]["mean_epoch_time_s"] == pytest.approx(0.04)
    path = write_json_atomic(rec, tmp_path / "sub" / "r.json")
    assert json.loads(path.read_text()) == rec
    assert os.listdir(tmp_path / "sub") == ["r.json"]  # no temp file left behind
    assert "best val 75.00%" in summary_line(rec)


def test_builders_write_exactly_the_keys_of_the_schema_tables():
    """build_record and EpochRecord.to_dict write the keys of RECORD_FIELDS and
    EPOCH_FIELDS, in table order, and the sub-keys each field lists: a key added to
    a builder but not to its table (or the reverse) fails here."""
    epochs = _epochs([None, 0.5])
    epochs[1].bytes_predicted = dict.fromkeys(KINDS, 1)
    rec = _record(epochs, graph_info=graph_summary(easy_graph(num_nodes=30)))
    assert list(rec) == [f.key for f in RECORD_FIELDS]
    for e in rec["epochs"]:
        assert list(e) == [f.key for f in EPOCH_FIELDS]
        for f in EPOCH_FIELDS:
            if f.keys:  # an object's keys, or each entry's of a list
                items = e[f.key] if isinstance(e[f.key], list) else [e[f.key]]
                assert items and all(list(item) == list(f.keys) for item in items), f.key
    # what the builders write in full: exactly the listed sub-keys
    for key in ("dataset", "best", "summary"):
        assert list(rec[key]) == list(_field(RECORD_FIELDS, key).keys), key
    assert list(rec["summary"]["bytes_total"]) == list(KINDS)
    for m in rec["peak_memory_bytes"]:
        assert list(m) == list(_field(RECORD_FIELDS, "peak_memory_bytes").keys)
    # what other modules write: at least the listed sub-keys
    assert set(_field(RECORD_FIELDS, "config").keys) <= set(rec["config"])
    assert set(_field(RECORD_FIELDS, "machine").keys) <= set(rec["machine"])


def test_check_record_rejects_departures():
    rec = _record(_epochs([0.5]))
    check_record(rec)
    for breaking in (lambda r: r.pop("machine"),
                     lambda r: r["machine"].pop("platform"),
                     lambda r: r.__setitem__("wall_time_s", "1.5"),
                     lambda r: r["summary"].pop("bytes_total"),
                     lambda r: r["best"].pop("monitor"),
                     lambda r: r["epochs"][0].pop("bytes"),
                     lambda r: r["epochs"][0].__setitem__("note", 1),
                     lambda r: r["epochs"][0].__setitem__("loss", "0.1"),
                     lambda r: r["epochs"][0]["time"].__setitem__("io_s", 0.0),
                     lambda r: r["epochs"][0].__setitem__("bytes_predicted", {"gossip": 1}),
                     lambda r: r["epochs"][0].__setitem__("test_acc", None),
                     lambda r: r["peak_memory_bytes"][0].__setitem__("device", r["peak_memory_bytes"][0].pop("source")),
                     lambda r: r.__setitem__("world_size", 2)):
        broken = json.loads(json.dumps(rec))
        breaking(broken)
        with pytest.raises(ValueError):
            check_record(broken)


def test_a_field_states_its_sub_keys_in_its_meaning_and_a_known_type():
    assert _field(RECORD_FIELDS, "partition").types == (dict, type(None))
    with pytest.raises(ValueError, match="keys"):
        Field("x", "object", "no placeholder", keys=("a",))
    with pytest.raises(ValueError, match="keys"):
        Field("x", "object", "{keys} but none")
    with pytest.raises(ValueError, match="tuple"):
        Field("x", "tuple", "an unknown JSON type")


def test_unknown_byte_kind_is_refused():
    e = EpochRecord(epoch=1, loss=0.1, epoch_time_s=0.1, bytes={"gossip": 3})
    with pytest.raises(ValueError, match="gossip"):
        e.to_dict()
    e = EpochRecord(epoch=1, loss=0.1, epoch_time_s=0.1, bytes_predicted={"rumour": 3})
    with pytest.raises(ValueError, match="rumour"):
        e.to_dict()


def test_diverged_loss_is_null_not_nan(tmp_path):
    rec = _record([EpochRecord(epoch=1, loss=float("nan"), epoch_time_s=0.1)])
    check_record(rec)
    assert rec["epochs"][0]["loss"] is None and rec["summary"]["final_loss"] is None
    write_json_atomic(rec, tmp_path / "r.json")  # strict JSON: would fail on NaN


def test_diverged_validation_loss_of_the_best_epoch_is_null(tmp_path):
    """Monitoring val_acc can pick an epoch whose val_loss diverged: the record stores
    null there too, in the epoch and in ``best``, so it stays writable."""
    epochs = _epochs([0.5, 0.8])
    epochs[1].val_loss = float("nan")
    rec = _record(epochs)
    assert rec["best"]["epoch"] == 2
    assert rec["best"]["val_loss"] is None and rec["epochs"][1]["val_loss"] is None
    write_json_atomic(rec, tmp_path / "r.json")


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(TypeError):
        write_json_atomic({"x": object()}, tmp_path / "r.json")
    assert os.listdir(tmp_path) == []


def test_the_communicator_imports_nothing_from_the_trainer():
    """The byte kinds live with the communicator and the record imports them from
    there; the engine must not import the trainer back (a fresh interpreter shows
    what importing the communicator loads)."""
    code = ("import sys, gnnpipe.engine.comm; "
            "print(sorted(m for m in sys.modules if m.startswith('gnnpipe.trainer')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_readme_documents_the_record_schema_as_the_code_states_it():
    """README.md carries RECORD_SCHEMA_DOC verbatim, so the documented schema cannot
    drift from the one check_record enforces."""
    from pathlib import Path

    from gnnpipe.trainer.record import RECORD_SCHEMA_DOC

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert RECORD_SCHEMA_DOC.strip() in readme
