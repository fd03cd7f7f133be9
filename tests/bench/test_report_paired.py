"""bench/report_paired.py: each pipelined row against exact training, seed by seed."""

from __future__ import annotations

import math
import statistics

import pytest

from bench.report_common import Row
from bench.report_paired import T975, paired, paired_section


def _row(mode: str, accs: dict[int, float | None]) -> Row:
    row = Row({"mode": mode, "dataset": "d", "model": "gcnii"}, "", {})
    for seed, acc in accs.items():
        row.runs.append({"test_acc": acc, "dataset": "d", "model": "gcnii", "layout": "S=2 C=8"})
        row.seeds.append(seed)
    return row


def test_differences_are_paired_by_seed_and_the_interval_is_students():
    exact = _row("single", {0: 0.80, 1: 0.70, 2: 0.90, 3: 0.60})
    pipe = _row("pipeline", {2: 0.88, 0: 0.79, 1: 0.71})  # another order, one seed missing
    pipe.ref = exact
    got = paired(pipe)
    diffs = [-1.0, 1.0, -2.0]  # seeds 0, 1, 2, in points
    assert got["seeds"] == [0, 1, 2]
    assert got["diffs"] == pytest.approx(diffs)
    assert got["mean"] == pytest.approx(-2 / 3)
    assert got["half_width"] == pytest.approx(T975[1] * statistics.stdev(diffs) / math.sqrt(3))
    assert got["seeds_for_1_point"] == math.ceil((1.96 * statistics.stdev(diffs)) ** 2)
    text = "\n".join(paired_section([exact, pipe], lambda r: ""))
    assert "| d | gcnii | pipeline | S=2 C=8 | - | 0,1,2 | -0.67 | -1.0 +1.0 -2.0 |" in text


def test_rows_without_an_exact_reference_or_two_shared_seeds_are_left_out():
    exact = _row("single", {0: 0.8, 1: 0.7})
    lone = _row("pipeline", {0: 0.8, 5: 0.7})
    lone.ref = exact
    graph = _row("pipeline", {0: 0.8, 1: 0.7})
    graph.ref = _row("graph", {0: 0.8, 1: 0.7})
    assert paired(lone) is None and paired(graph) is None and paired(exact) is None
    assert paired_section([exact, lone, graph], lambda r: "") == []


def test_grid_names_tell_rows_apart():
    exact = _row("single", {0: 0.8, 1: 0.7})
    a, b = _row("pipeline", {0: 0.8, 1: 0.7}), _row("pipeline", {0: 0.7, 1: 0.7})
    a.ref = b.ref = exact
    a.grid, b.grid = "synchronous", "overlap"
    text = "\n".join(paired_section([exact, a, b], lambda r: ""))
    assert "| synchronous | d | gcnii |" in text and "| overlap | d | gcnii |" in text
