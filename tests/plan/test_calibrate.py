"""The calibration: halo rows' saved values are counted; a graph well above the first
measurement's size is measured a second time at its own size (the timer:
``test_timing.py``; the twin processes: ``test_twins.py``)."""

from __future__ import annotations

import pytest


def test_saved_values_of_halo_rows_are_counted_on_a_chunk_with_halo():
    """A GCN layer keeps of its halo rows only their dropout mask (at p = 0.5 its random
    words, one bit a value: 1/32 of a float); GraphSAGE keeps the dropped input too (its
    own rows are a view of it): 1 + 1/32. Per own row both keep the same as on a whole
    graph (parameters are not counted: they are not per row)."""
    import torch

    from gnnpipe.kernels import ChunkOps
    from gnnpipe.plan.calibrate import _halo_ops, _layer_figures, _plan, _saved_halo_values

    plan = _plan(2000, 8.0)
    ops = ChunkOps.build(plan)
    cpu = torch.device("cpu")
    halo_ops = _halo_ops(cpu)
    got = {}
    for kind in ("gcn", "sage"):
        own = _layer_figures(kind, 16, ops, plan.num_own, cpu)[1]
        got[kind] = (own, _saved_halo_values(kind, 16, own, halo_ops, cpu))
    # GCN: the mask (1 bit), the aggregate and the ReLU output (4 bytes each) per own
    # value; the mask's words are whole 64-bit words, so the shares are within a word.
    assert got["gcn"][0] == pytest.approx(2 + 1 / 32, abs=1e-3)
    assert got["gcn"][1] == pytest.approx(1 / 32, abs=1e-3)
    assert got["sage"][1] == pytest.approx(1 + 1 / 32, abs=1e-3)


def test_a_large_graph_is_measured_again_at_its_size_and_a_small_one_is_not(monkeypatch):
    """With the first measurement capped at 2,000 rows, a 5,000-vertex graph gets a
    second one at 5,000 rows: every size-dependent rate's ratio, positive; a
    3,000-vertex graph (less than twice the rows) none, and its predictions are
    unscaled."""
    import importlib

    cal = importlib.import_module("gnnpipe.plan.calibrate")  # the package exports the function by this name
    monkeypatch.setattr(cal, "SMALL_ROWS", 2000)
    link = (1e9, 1e-5)
    big = cal.calibrate(hidden=16, num_features=8, mean_degree=4.0, num_nodes=5000, link=link, kinds=("gcn",))
    assert (big.rate_rows, big.large_rows) == (2000, 5000)
    assert set(big.large_rate_ratio) == {"matmul", "aggregate", "gather", "dropout", "mask_apply", "row",
                                         "single_speedup", "stack"}
    assert all(v > 0 for v in big.large_rate_ratio.values())
    assert "rates at 2,000 and 5,000 rows" in big.source  # what the plan's header prints
    assert big.exchange_bytes_per_s == 0.0 and big.exchange_rate() == 1e9  # a given link: its rate both ways
    assert big.exchange_latency_s == 0.0 and big.exchange_latency() == 1e-5  # and its latency
    small = cal.calibrate(hidden=16, num_features=8, mean_degree=4.0, num_nodes=3000, link=link, kinds=("gcn",))
    assert (small.large_rows, small.large_rate_ratio) == (0, {})
    assert small.size_factor("aggregate", 10**6) == 1.0


def test_given_the_runs_graph_the_second_measurement_times_its_kernels_on_it(monkeypatch):
    """The planner passes the run's own graph: the second measurement is made on it, in
    its own order (no synthetic graph of its size is built), and the source says so."""
    import importlib

    import gnnpipe

    cal = importlib.import_module("gnnpipe.plan.calibrate")
    monkeypatch.setattr(cal, "SMALL_ROWS", 2000)
    built = []
    synthetic = cal._plan
    monkeypatch.setattr(cal, "_plan", lambda n, *a, **k: built.append(n) or synthetic(n, *a, **k))
    graph = gnnpipe.load_dataset("synthetic", num_nodes=5000)
    prof = cal.calibrate(hidden=16, num_features=8, mean_degree=4.0, num_nodes=5000, link=(1e9, 1e-5),
                         kinds=("gcn",), graph=graph)
    assert 5000 not in built and (prof.rate_rows, prof.large_rows) == (2000, 5000)
    assert "rates at 2,000 and 5,000 rows, the second on the graph itself;" in prof.source
    from gnnpipe.huge_pages import huge_pages_state  # and whether its large allocations had huge pages

    assert prof.source.endswith(f"host huge pages {'on' if huge_pages_state()['effective'] else 'off'})")


def test_the_second_sizes_stack_and_speedup_are_ratios_of_its_own_alternated_layer_timings(monkeypatch):
    """At the second size one layer alone at one worker's threads, a stack of
    LARGE_STACK layers at those threads and the stack at all cores are timed in one
    alternation: ``stack`` is the stack per layer over the layer alone, and the speedup
    the stack at one thread over all cores, over the first size's speedup (not mixed
    with the kernels' one-thread timing of that layer, taken minutes apart)."""
    import importlib

    import torch

    cal = importlib.import_module("gnnpipe.plan.calibrate")
    rates = {name: 1.0 for name in cal._RATE_KEYS.values()} | {"rows": {"gcn": 1.0}}
    monkeypatch.setattr(cal, "_kernel_rates", lambda *a, **k: (rates, {"gcn": 0.5}, {}))
    depths = []
    monkeypatch.setattr(cal, "_layer_step", lambda *a, stack_depth, **k: (depths.append(stack_depth) or (lambda: None),
                                                                          None))
    threads_seen = []

    def alternation(calls, repeats):
        assert repeats == cal.LARGE_REPEATS
        for prepare, _fn in calls:
            prepare()
            threads_seen.append(torch.get_num_threads())
        return [1.0, 4.0 * cal.LARGE_STACK * 1.5, 4.0 * cal.LARGE_STACK]  # alone, stack, stack at all cores

    monkeypatch.setattr(cal, "alternating_min_s", alternation)
    before = torch.get_num_threads()
    try:
        out = cal._large_point(5000, 4.0, 16, ("gcn",), torch.device("cpu"), 1, 2, rates, 1.25)
    finally:
        torch.set_num_threads(before)
    assert sorted(depths) == [1, cal.LARGE_STACK]
    assert threads_seen == [1, 1, 2]
    assert out["large_rate_ratio"]["stack"] == pytest.approx(6.0 / 1.0)
    assert out["large_rate_ratio"]["single_speedup"] == pytest.approx(1.5 / 1.25)
