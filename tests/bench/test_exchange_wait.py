"""bench/exchange_wait.py: two real gloo processes exchange after a given compute; the
JSON has, per (compute, rows), the time from posting to completion and the posting
alone, which is part of it in every repetition, so at every percentile too."""

from __future__ import annotations

import json

from bench import exchange_wait


def test_two_processes_record_the_exchange_and_its_posting(tmp_path):
    out = tmp_path / "w.json"
    assert exchange_wait.main(["--out", str(out), "--compute-ms", "0", "0.5", "--rows", "10", "--reps", "20"]) == 0
    rec = json.loads(out.read_text())
    assert [(r["compute_ms"], r["rows"], r["bytes"]) for r in rec["results"]] == [(0.0, 10, 4000), (0.5, 10, 4000)]
    for r in rec["results"]:
        for k in ("p10", "p50", "p90", "mean"):
            assert 0 < r["post_ms"][k] <= r["wait_ms"][k]
        assert r["wait_ms"]["p10"] <= r["wait_ms"]["p50"] <= r["wait_ms"]["p90"]
    assert "load_average_before" in rec and rec["machine"]["cpu_cores"]
