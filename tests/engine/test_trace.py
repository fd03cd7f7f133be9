"""The stage timeline (gnnpipe/engine/trace.py): one event per schedule action, appended
per epoch, in Chrome's trace format; a real two-worker run traces exactly its schedule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

from gnnpipe.engine import schedule as sch
from gnnpipe.engine.trace import ActionTrace, action_trace, merge_traces


def _events(path):
    """A trace file as a list (the format's closing bracket is optional)."""
    return json.loads(path.read_text().rstrip().rstrip(",") + "]")


def test_a_span_is_one_complete_event_with_its_chunk_step_and_faults(tmp_path):
    ticks = iter([0.0, 10.0, 10.25, 11.0, 11.5])  # the first: the wall-clock anchor
    faults = iter([100, 130, 130, 130])
    synced = []
    tr = ActionTrace(tmp_path / "t" / "trace-rank3.json", 3, "rank 3: stage 1", sync=lambda: synced.append(1),
                     clock=lambda: next(ticks), faults=lambda: next(faults))
    with tr.span(sch.Forward(1, 5, 2), epoch=0):
        pass
    with tr.span(sch.Step(1), epoch=0):
        pass
    assert synced == [1, 1]  # the device waited for after each action
    assert _events(tr.path) == []  # nothing written before the epoch's flush
    tr.flush()
    meta, fwd, step = _events(tr.path)
    assert meta == {"name": "process_name", "ph": "M", "pid": 3, "tid": 0, "args": {"name": "rank 3: stage 1"}}
    assert (fwd["name"], fwd["ph"], fwd["pid"], fwd["dur"]) == ("Forward", "X", 3, 250000.0)
    assert fwd["args"] == {"epoch": 1, "chunk": 5, "step": 2, "minor_faults": 30}
    assert step["name"] == "Step" and step["args"] == {"epoch": 1, "minor_faults": 0}
    assert step["ts"] - fwd["ts"] == 1e6  # microseconds, one clock
    tr.flush()  # nothing new: the file is unchanged
    assert len(_events(tr.path)) == 3


def test_action_trace_is_none_where_there_is_no_schedule(tmp_path):
    for mode in ("single", "graph"):
        trace, state = action_trace(str(tmp_path), mode=mode, rank=0, label="x")
        assert trace is None and not state["written"] and f"{mode} mode runs no schedule" in state["why"]
    trace, state = action_trace(None, mode="pipeline", rank=0, label="x")
    assert trace is None and state["why"] == "off (train.trace_dir unset)"
    trace, state = action_trace(str(tmp_path / "d"), mode="hybrid", rank=2, label="x")
    assert trace is not None and state["written"] and trace.path == tmp_path / "d" / "trace-rank2.json"


def test_merge_keeps_every_complete_line_of_every_rank(tmp_path):
    for rank in (0, 1):
        tr = ActionTrace(tmp_path / f"trace-rank{rank}.json", rank, f"rank {rank}")
        for k in range(3):
            with tr.span(SimpleNamespace(chunk=k), epoch=0):
                pass
        tr.flush()
    with open(tmp_path / "trace-rank1.json", "a") as fh:
        fh.write('{"name":"Forw')  # a worker killed while writing
    n = merge_traces(tmp_path, tmp_path / "all.json")
    merged = json.loads((tmp_path / "all.json").read_text())
    assert n == len(merged) == 8
    assert sorted((e["pid"], e.get("args", {}).get("chunk")) for e in merged if e["ph"] == "X") == \
        [(r, k) for r in (0, 1) for k in range(3)]


def test_a_pipeline_run_traces_exactly_its_schedule(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GNNPIPE_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-m", "gnnpipe.train", "--mode", "pipeline", "--workers", "2",
                          "--chunks", "3", "--data-option", "num_nodes=300", "--model", "gcn", "--layers", "4",
                          "--hidden", "8", "--epochs", "3", "--eval-every", "3", "--seed", "5", "--log-level",
                          "WARNING", "--trace-dir", "tr", "--json-out", "r.json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "r.json").read_text())["extra"]["trace"]["written"] is True
    total = 0
    for rank in (0, 1):
        events = _events(tmp_path / "tr" / f"trace-rank{rank}.json")
        total += len(events)
        assert events[0]["args"]["name"] == f"rank {rank}: stage {rank}"
        spans = events[1:]
        for e in (1, 2, 3):
            order = sch.way_orders(((0, 1, 2),), e - 1, 5, True)[0]
            want = [(type(a).__name__, getattr(a, "chunk", None))
                    for a in sch.build_schedule(2, 3, order).for_stage(rank)] + [("LossAllReduce", None)]
            got = [(x["name"], x["args"].get("chunk")) for x in spans if x["args"]["epoch"] == e]
            assert got == want
        # One worker runs one action at a time: the spans follow each other.
        assert all(a["ts"] + a["dur"] <= b["ts"] + 1.0 for a, b in zip(spans, spans[1:]))
    assert merge_traces(tmp_path / "tr", tmp_path / "all.json") == total


def test_a_hybrid_run_traces_each_ways_schedule_with_its_idle_steps(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GNNPIPE_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-m", "gnnpipe.train", "--mode", "hybrid", "--workers", "2", "--ways", "2",
                          "--chunks", "3", "--data-option", "num_nodes=300", "--model", "gcn", "--layers", "3",
                          "--hidden", "8", "--epochs", "2", "--eval-every", "2", "--seed", "2", "--log-level",
                          "WARNING", "--trace-dir", "tr"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    blocks = sch.way_blocks(3, 2)  # ((0, 1), (2,)): way 1 idles at its second step
    for way in (0, 1):  # rank = way * S + stage, S = 1
        spans = _events(tmp_path / "tr" / f"trace-rank{way}.json")[1:]
        for e in (1, 2):
            order = sch.way_orders(blocks, e - 1, 2, True)[way]
            want = [(type(a).__name__, getattr(a, "chunk", None), getattr(a, "step", None))
                    for a in sch.build_schedule(1, 3, order, num_steps=2).for_stage(0)]
            got = [(x["name"], x["args"].get("chunk"), x["args"].get("step"))
                   for x in spans if x["args"]["epoch"] == e]
            assert got == want + [("LossAllReduce", None, None)]
    assert any(x["name"] == "IdleForward" for x in _events(tmp_path / "tr" / "trace-rank1.json")[1:])
