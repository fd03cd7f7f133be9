"""The cost model prices each kernel at its own size: a rate measured on a second,
larger graph applies to kernels of that many rows, log-linearly between the two
measurements, and a profile without one scales nothing; a halo exchange is priced at
the rate of both sides sending at once; a stage's backward leaves out the transposed
entries of the halo rows it reads stale, where the layer aggregates its input rows; a
layer run among a model's others costs the measured ``stack`` ratio at its size."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

import gnnpipe
from gnnpipe.config import ModelConfig
from gnnpipe.plan import ModelShape, graph_stats
from gnnpipe.plan.cli import profile_from_figures
from gnnpipe.plan.costs import _layer_s, layer_costs, predict_time
from gnnpipe.plan.inputs import estimate_cut, stats_only

KEYS = ("matmul", "aggregate", "gather", "dropout", "mask_apply", "row", "single_speedup")


def _profile(**kw):
    return replace(profile_from_figures(flops=1e10, link_gbps=10.0, device_memory_gb=16.0), **kw)


def test_size_factor_is_one_up_to_the_measured_rows_the_ratio_past_the_large_ones_log_linear_between():
    p = _profile(rate_rows=1000, large_rows=100_000, large_rate_ratio={"aggregate": 3.0})
    assert p.size_factor("aggregate", 10) == 1.0
    assert p.size_factor("aggregate", 1000) == 1.0
    assert p.size_factor("aggregate", 10_000) == pytest.approx(2.0)  # half-way in log(rows)
    assert p.size_factor("aggregate", 100_000) == pytest.approx(3.0)
    assert p.size_factor("aggregate", 10**9) == pytest.approx(3.0)
    assert p.size_factor("dropout", 10**6) == 1.0  # not measured: unscaled
    assert _profile().size_factor("aggregate", 10**6) == 1.0  # no second measurement


@pytest.fixture(scope="module")
def stats():
    return graph_stats(gnnpipe.load_dataset("synthetic", num_nodes=400))


def _shape(stats):
    return ModelShape.of(ModelConfig(model="gcn", layers=4, hidden=16, dropout=0.5), stats.num_features,
                         stats.num_classes)


def test_kernels_on_more_rows_than_measured_cost_their_large_rate(stats):
    """Ratios of 2 measured at the graph's own size double every layer's kernels in
    single mode (encode and step are not scaled; the speedup keeps its ratio of 1);
    measured at 100 rows, a 2-chunk pipeline's chunks (about 200 rows) pay between 1 and
    2 times, less than single mode's whole graph."""
    shape = _shape(stats)
    n = stats.num_nodes
    flat = _profile()
    doubled = _profile(rate_rows=100, large_rows=n, large_rate_ratio={k: 2.0 for k in KEYS if k != "single_speedup"})
    args = dict(workers=1, ways=1, stages=1, chunks=1, split=(4,))
    base = predict_time(flat, shape, stats, mode="single", **args).epoch_s
    big = predict_time(doubled, shape, stats, mode="single", **args).epoch_s
    assert 1.5 * base < big < 2.0 * base
    pipe = dict(workers=2, ways=1, stages=2, chunks=2, split=(2, 2))
    p_base = predict_time(flat, shape, stats, mode="pipeline", **pipe).compute_s
    p_big = predict_time(doubled, shape, stats, mode="pipeline", **pipe).compute_s
    assert p_base < p_big < big / base * p_base


def test_a_layer_among_others_costs_the_stack_ratio_at_the_rows_it_computes(stats):
    """The ``stack`` ratio multiplies each layer's whole cost (not the encode, the
    classifier or the step) at the rows the layer computes: single mode's layers over
    all N pay it in full, a 2-chunk pipeline's chunks (about N / 2 rows) less, and a
    profile measured at N itself leaves layers of fewer rows than its first size alone."""
    shape = _shape(stats)
    n = stats.num_nodes
    flat = _profile(rate_rows=100, large_rows=n, large_rate_ratio={"stack": 1.0})
    stacked = _profile(rate_rows=100, large_rows=n, large_rate_ratio={"stack": 2.0})
    args = dict(workers=1, ways=1, stages=1, chunks=1, split=(4,))
    layers = sum(_layer_s(flat, shape, l, n, stats.num_edges, n, False) for l in range(1, 5))
    base = predict_time(flat, shape, stats, mode="single", **args).epoch_s
    big = predict_time(stacked, shape, stats, mode="single", **args).epoch_s
    assert big - base == pytest.approx(layers)  # each layer once more, nothing else
    pipe = dict(workers=2, ways=1, stages=2, chunks=2, split=(2, 2))
    p_base = predict_time(flat, shape, stats, mode="pipeline", **pipe).compute_s
    p_big = predict_time(stacked, shape, stats, mode="pipeline", **pipe).compute_s
    # A chunk of about N / 2 rows pays the factor interpolated at its rows, not the full ratio.
    half = stacked.size_factor("stack", n / 2)
    assert half == pytest.approx(1.0 + math.log(n / 2 / 100) / math.log(n / 100))
    for l in range(1, 5):
        assert _layer_s(stacked, shape, l, n / 2, stats.num_edges / 2, n, True) == pytest.approx(
            half * _layer_s(flat, shape, l, n / 2, stats.num_edges / 2, n, True))
    assert p_base < p_big < stacked.size_factor("stack", 0.6 * n) * p_base
    small = _profile(rate_rows=n, large_rows=10 * n, large_rate_ratio={"stack": 2.0})
    assert predict_time(small, shape, stats, mode="pipeline", **pipe).compute_s == pytest.approx(p_base)


def test_graph_mode_exchanges_at_the_two_sided_rate(stats):
    shape = _shape(stats)
    one_way = _profile()
    args = dict(workers=2, ways=2, stages=1, chunks=2, split=(4,))
    comm = predict_time(one_way, shape, stats, mode="graph", **args).comm_s
    assert one_way.exchange_rate() == one_way.link_bytes_per_s  # not measured: the one-way rate
    half = _profile(exchange_bytes_per_s=one_way.link_bytes_per_s / 2)
    assert half.exchange_rate() == one_way.link_bytes_per_s / 2
    halved = predict_time(half, shape, stats, mode="graph", **args).comm_s
    assert halved > comm


def test_exchanges_between_kernels_cost_their_measured_fixed_seconds(stats):
    """Graph mode pays the exchange's fixed cost twice per layer 2..L and peer, the
    hybrid once per exchange of each step and layer; the pipeline's transfers (one
    way, received ahead) keep the link's latency. Without a measured one an exchange
    costs the link's latency."""
    shape = _shape(stats)
    base = _profile()
    assert base.exchange_latency() == base.link_latency_s  # not measured: the link's
    slow = _profile(exchange_latency_s=base.link_latency_s + 1e-3)
    graph = dict(workers=2, ways=2, stages=1, chunks=2, split=(4,))
    extra = (predict_time(slow, shape, stats, mode="graph", **graph).comm_s
             - predict_time(base, shape, stats, mode="graph", **graph).comm_s)
    assert extra == pytest.approx(2 * (shape.layers - 1) * 1e-3)
    hybrid = dict(workers=2, ways=2, stages=1, chunks=4, split=(4,))
    extra = (predict_time(slow, shape, stats, mode="hybrid", way_halo_rows=100.0, **hybrid).comm_s
             - predict_time(base, shape, stats, mode="hybrid", way_halo_rows=100.0, **hybrid).comm_s)
    assert extra == pytest.approx(2 * 2 * (shape.layers - 1) * 1e-3)  # 2 steps, forward and backward
    pipe = dict(workers=2, ways=1, stages=2, chunks=4, split=(2, 2))
    assert (predict_time(slow, shape, stats, mode="pipeline", **pipe)
            == predict_time(base, shape, stats, mode="pipeline", **pipe))


def test_cut_stats_count_each_parts_halo_entries(stats):
    """Exact: every cut in-edge is one part's halo entry (the partition's own count of
    cut in-edges); estimated: a part's cut share of its in-edges."""
    for k in (2, 4):
        cut = stats.cut(k)
        assert len(cut.halo_in_edges) == k
        assert all(0 < h <= e for h, e in zip(cut.halo_in_edges, cut.part_in_edges))
        assert sum(cut.halo_in_edges) == stats.chunked_of(k).stats.cut_in_edges
    est = estimate_cut(stats_only(num_nodes=1000, num_edges=8000, num_features=4, num_classes=2,
                                  edge_cut_fraction=0.25), 4)
    assert est.halo_in_edges == (500,) * 4 and est.halo_entries(3) == 500


def test_held_reads_are_the_layers_that_aggregate_their_input_rows(stats):
    f, c = stats.num_features, stats.num_classes
    of = lambda **kw: ModelShape.of(ModelConfig(layers=4, hidden=16, **kw), f, c).held_reads  # noqa: E731
    assert f > 16 > c  # layer 1 (F -> 16) and a last layer to the classes narrow their rows
    assert of(model="gcnii") == (True,) * 4
    assert of(model="gcn", input_proj=True, classifier=True) == (True,) * 4  # hidden to hidden
    assert of(model="gcn") == (False, True, True, False)  # projected first where they narrow
    assert of(model="resgcn+", input_proj=True) == (True, False, False, False)  # blocks normalise first


def test_stale_halo_entries_leave_half_of_their_rate_in_the_layers_that_hold_their_reads(stats):
    """Per layer l >= 2 of a held-read model, the chunks' cost falls by a quarter of
    their halo entries' aggregation (half of them stale, half of the rate each); layer
    1 (reading the encode) and a model without held reads not at all; a hybrid with one
    chunk a way reads nothing stale."""
    p = _profile()
    shape = ModelShape.of(ModelConfig(model="gcnii", layers=4, hidden=16, dropout=0.5), stats.num_features,
                          stats.num_classes)
    bare = replace(shape, held_reads=())
    cut = stats.cut(4)
    held, _, _ = layer_costs(p, shape, stats, 4)
    full, _, _ = layer_costs(p, bare, stats, 4)
    assert held[0] == full[0]
    saved = 0.25 * sum(cut.halo_in_edges) * 16 * p.aggregate_s_per_edge_row
    for l in range(1, 4):
        assert full[l] - held[l] == pytest.approx(saved, rel=1e-9)
    pipe = dict(workers=2, ways=1, stages=2, chunks=4, split=(2, 2))
    assert (predict_time(p, shape, stats, mode="pipeline", **pipe).compute_s
            < predict_time(p, bare, stats, mode="pipeline", **pipe).compute_s)
    hybrid = dict(workers=2, ways=2, stages=1, chunks=2, split=(4,), way_halo_rows=100.0)
    assert (predict_time(p, shape, stats, mode="hybrid", **hybrid)
            == predict_time(p, bare, stats, mode="hybrid", **hybrid))
