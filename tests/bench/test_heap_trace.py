"""bench/heap_trace.py samples glibc's heap in every process of a trainer run and
writes nothing when the run or its arguments are wrong."""

from __future__ import annotations

import json

import pytest

from bench.heap_trace import has_mallinfo2, main

pytestmark = pytest.mark.skipif(not has_mallinfo2(), reason="needs glibc's mallinfo2 (glibc 2.33+)")

TINY = ["--dataset", "synthetic", "--data-option", "num_nodes=400", "--model", "gcn", "--layers", "2",
        "--hidden", "8", "--epochs", "2", "--log-level", "WARNING"]


def test_the_launcher_and_each_worker_are_sampled_and_their_heap_adds_up(tmp_path):
    out = tmp_path / "trace.json"
    assert main(["--out", str(out), "--period", "0.05", "--", *TINY, "--mode", "graph", "--workers", "2"]) == 0
    d = json.loads(out.read_text())
    workers = [p for p in d["processes"] if "spawn_main" in p["command"]]
    launcher = [p for p in d["processes"] if "gnnpipe.train" in p["command"]]
    assert len(workers) == 2 and len(launcher) == 1
    for p in workers + launcher:
        h = p["at_max_rss"]
        assert p["samples"] >= 1 and p["max_rss_bytes"] > 0
        # glibc's in-use and free bytes are the two parts of the heap it reports.
        assert h["heap_in_use_bytes"] + h["heap_free_bytes"] == h["heap_bytes"] > 0
        assert p["max_heap_free_bytes"] >= h["heap_free_bytes"]
    assert [m["rank"] for m in d["record"]["peak_memory_bytes"]] == [0, 1]
    assert len(d["record"]["epoch_times_s"]) == 2 and d["load_average_before"] is not None


def test_no_trainer_arguments_or_a_failed_run_write_nothing(tmp_path, capsys):
    out = tmp_path / "trace.json"
    assert main(["--out", str(out)]) == 2 and not out.exists()
    assert "expected them after --" in capsys.readouterr().err
    assert main(["--out", str(out), "--", *TINY, "--mode", "single", "--layers", "0"]) == 1 and not out.exists()
    assert "the trainer exited" in capsys.readouterr().err
