"""Plans are data, built without processes: bytes equal the engine's DESIGN.md 7
predictions for the same layout, the statistics-only path needs no graph, a candidate
that does not fit is never chosen, the balanced split unloads the end stages."""

from __future__ import annotations

import pytest

import gnnpipe
from gnnpipe.config import ModelConfig
from gnnpipe.engine.graph_mode import predicted_graph_bytes
from gnnpipe.engine.hybrid import predicted_hybrid_bytes
from gnnpipe.engine.pipeline import predicted_pipeline_bytes
from gnnpipe.errors import ConfigError
from gnnpipe.partition import chunk_graph
from gnnpipe.plan import ModelShape, balanced_split, equal_split, graph_stats, make_plan, stats_only
from gnnpipe.plan.cli import profile_from_figures
from gnnpipe.plan.inputs import estimate_cut


def _profile(memory_gb: float = 16.0):
    return profile_from_figures(flops=1e10, link_gbps=10.0, device_memory_gb=memory_gb)


@pytest.fixture(scope="module")
def graph():
    return gnnpipe.load_dataset("synthetic", num_nodes=500)


def _shape(stats, layers=8, model="gcnii"):
    return ModelShape.of(ModelConfig(model=model, layers=layers, hidden=16), stats.num_features, stats.num_classes)


def test_bytes_equal_the_engine_predictions_for_the_same_layout(graph):
    stats = graph_stats(graph)
    shape = _shape(stats)
    plan = make_plan(stats, shape, _profile(), workers=2)
    g = graph.remove_self_loops()
    modes = {c.mode for c in plan.candidates}
    assert modes == {"single", "graph", "pipeline", "hybrid"}
    for c in plan.candidates:
        assert c.bytes_exact
        if c.mode == "graph":
            want = predicted_graph_bytes(shape.model, chunk_graph(g, c.workers).stats.M, c.workers)
        elif c.mode == "pipeline":
            want = predicted_pipeline_bytes(shape.model, g.num_nodes, c.stage_split)
        elif c.mode == "hybrid":
            want = predicted_hybrid_bytes(shape.model, chunk_graph(g, c.chunks), c.stage_split, c.ways)
        else:
            want = dict.fromkeys(c.bytes_per_epoch, 0)
        assert c.bytes_per_epoch == want, c.label()
    times = [c.epoch_s for c in plan.candidates]
    assert times == sorted(times)
    assert plan.chosen is not None and plan.chosen.fits
    for c in plan.candidates:
        assert c.epoch_s == pytest.approx(c.compute_s + c.comm_s + c.bubble_s)


def test_the_statistics_only_path_needs_no_graph():
    stats = stats_only(num_nodes=1_000_000, num_edges=20_000_000, num_features=128, num_classes=40,
                       edge_cut_fraction=0.1)
    assert stats.graph is None and not stats.exact
    plan = make_plan(stats, _shape(stats, layers=16), _profile(), workers=8)
    assert {c.mode for c in plan.candidates} == {"single", "graph", "pipeline", "hybrid"}
    graph_c = next(c for c in plan.candidates if c.mode == "graph")
    assert not graph_c.bytes_exact and graph_c.bytes_per_epoch["halo_rows"] > 0
    cut = estimate_cut(stats, 8)
    assert 0 < cut.M <= 8 * stats.num_nodes * (1 - 1 / 8)
    with pytest.raises(ConfigError):
        stats_only(num_nodes=0, num_edges=1, num_features=1, num_classes=2)


def test_a_candidate_that_does_not_fit_is_never_chosen(graph):
    stats = graph_stats(graph)
    shape = _shape(stats)
    roomy = make_plan(stats, shape, _profile(), workers=2)
    # A limit between the smallest and the largest predicted peak: some fit, some not.
    peaks = sorted(c.peak_memory_bytes for c in roomy.candidates)
    limit_gb = (peaks[0] + peaks[-1]) / 2 / 2**30
    plan = make_plan(stats, shape, _profile(limit_gb), workers=2)
    assert any(not c.fits for c in plan.candidates) and any(c.fits for c in plan.candidates)
    assert plan.chosen.fits
    assert all(c.fits == (c.peak_memory_bytes <= c.memory_limit_bytes) for c in plan.candidates)
    assert all(c.epoch_s >= plan.chosen.epoch_s for c in plan.candidates if c.fits)
    none = make_plan(stats, shape, _profile(peaks[0] / 2 / 2**30), workers=2)
    assert none.chosen is None and "no candidate fits" in none.reason


def test_the_balanced_split_gives_the_end_stages_no_more_layers_than_the_equal_split(graph):
    first, second = balanced_split([1.0] * 8, 2, 3.0, 0.0)  # the least largest stage cost is 6
    assert first <= 3 and max(first + 3.0, second) == 6.0
    assert balanced_split([1.0] * 8, 2, 0.0, 0.0) == (4, 4)
    split = balanced_split([1.0] * 12, 4, 2.0, 2.0)
    equal = equal_split(12, 4)
    assert sum(split) == 12 and min(split) >= 1
    assert split[0] <= equal[0] and split[-1] <= equal[-1]
    stats = graph_stats(graph)
    plan = make_plan(stats, _shape(stats, layers=16), _profile(), workers=2)
    for c in plan.candidates:
        if c.split == "balanced":
            eq = equal_split(16, c.stages)
            assert c.stage_split[0] <= eq[0] and c.stage_split[-1] <= eq[-1] and sum(c.stage_split) == 16


def test_a_papers100m_sized_projection_fits_hybrid_ways_not_full_n_stages():
    stats = stats_only(num_nodes=111_059_956, num_edges=1_615_685_872, num_features=128, num_classes=172,
                       edge_cut_fraction=0.05)
    prof = profile_from_figures(flops=19.5e12, link_gbps=100.0, device_memory_gb=80.0)
    shape = ModelShape.of(ModelConfig(model="gcnii", layers=16, hidden=64), 128, 172)
    p16 = make_plan(stats, shape, prof, workers=16, snapshot_period=1)
    assert any(c.mode == "pipeline" for c in p16.candidates)
    assert not any(c.fits for c in p16.candidates if c.mode == "pipeline")
    p64 = make_plan(stats, shape, prof, workers=64, snapshot_period=1)
    assert any(c.fits for c in p64.candidates if c.mode == "hybrid")
    assert p64.chosen is not None and p64.chosen.mode == "hybrid"


def test_cross_epoch_chunks_hide_the_fill_and_add_half_an_encode_in_pipeline_mode_only(graph):
    # With K >= S - 1 chunks run ahead at the turn, the fill of the next epoch is done
    # before it starts: the predicted epoch loses the fill and stage 0 gains the second
    # encode (forward only, half of an encode's forward + backward).
    from gnnpipe.plan.costs import _encode_s, predict_time

    stats = graph_stats(graph)
    shape = _shape(stats, layers=8)
    prof = _profile()
    kw = dict(workers=2, ways=1, stages=2, chunks=8, split=equal_split(8, 2))
    sync = predict_time(prof, shape, stats, mode="pipeline", **kw)
    ahead = predict_time(prof, shape, stats, mode="pipeline", cross_epoch_chunks=1, **kw)
    assert predict_time(prof, shape, stats, mode="pipeline", cross_epoch_chunks=3, **kw) == ahead  # K >= S-1
    enc = _encode_s(prof, shape, stats, stats.num_nodes) * prof.contention
    assert enc > 0 and ahead.bubble_s < sync.bubble_s
    cut = stats.cut(8)
    first = sum(cut.part_rows[k] + cut.halo_rows[k] for k in range(8)) / 8 / stats.num_nodes
    # On this graph the last stage is the slowest when synchronous (it also classifies):
    # it waits through the encode of the first chunk's rows and the fill (one chunk of
    # stage 0, whose 8 chunks' work is 8 x fill, the encode besides).
    fill = sync.bubble_s - first * enc
    assert 0 < first < 1 and fill > 0
    # Run ahead: no fill; stage 0 also encodes with the stash (half an encode more).
    assert ahead.compute_s == pytest.approx(max(8 * fill + 1.5 * enc, sync.compute_s), rel=1e-9)
    assert ahead.epoch_s == pytest.approx(max(ahead.compute_s, sync.compute_s + 1.5 * first * enc)
                                          + ahead.comm_s, rel=1e-9)
    hybrid = dict(kw, ways=2, stages=1, split=equal_split(8, 1))
    assert (predict_time(prof, shape, stats, mode="hybrid", cross_epoch_chunks=1, **hybrid)
            == predict_time(prof, shape, stats, mode="hybrid", **hybrid))


def test_a_stale_sensitive_model_is_planned_at_one_chunk_per_stage_and_way(graph):
    stats = graph_stats(graph)
    plain = make_plan(stats, _shape(stats, layers=32, model="gcn"), _profile(), workers=2)
    assert {(c.mode, c.chunks) for c in plain.candidates if c.mode in ("pipeline", "hybrid")} == {
        ("pipeline", 2), ("hybrid", 2)}
    # The reason says why, whenever a pipelined layout is the one chosen.
    piped = make_plan(stats, _shape(stats, layers=32, model="gcn"), _profile(), workers=2, modes=("pipeline",))
    assert piped.chosen.mode == "pipeline" and "stale halo reads" in piped.reason
    residual = make_plan(stats, _shape(stats, layers=32, model="gcnii"), _profile(), workers=2)
    assert {c.chunks for c in residual.candidates if c.mode == "pipeline"} == {2, 4, 8, 16}
    # A count given to the planner is kept for any model.
    given = make_plan(stats, _shape(stats, layers=32, model="gcn"), _profile(), workers=2, chunks=8,
                      modes=("pipeline",))
    assert {c.chunks for c in given.candidates} == {8}


@pytest.mark.parametrize("mode,workers,chunks", [("graph", 2, 2), ("pipeline", 2, 8), ("hybrid", 2, 8)])
def test_predicted_memory_counts_what_layers_keep_of_their_halo_rows(graph, mode, workers, chunks):
    """A part (graph mode) or every chunk of a stage reads halo rows and its layers keep
    their dropout mask (or the rows): the prediction grows by exactly saved_halo x the
    halo rows x the input width of each layer of the largest worker, here an exact
    partition's M (chunks) or the largest part's halo."""
    from dataclasses import replace

    from gnnpipe.plan.costs import predict_memory

    stats = graph_stats(graph)
    shape = _shape(stats, layers=4, model="gcn")
    ways = 2 if mode == "hybrid" else 1
    stages = workers // ways
    split = (shape.layers,) if stages == 1 else (shape.layers // 2, shape.layers - shape.layers // 2)
    kw = dict(mode=mode, workers=workers, ways=ways, stages=stages, chunks=chunks, split=split,
              way_halo_rows=stats.cut(ways).M if ways > 1 else 0.0)
    base = _profile()
    none = predict_memory(replace(base, saved_halo_values_per_row={"gcn": 0.0}), shape, stats, **kw)
    one = predict_memory(replace(base, saved_halo_values_per_row={"gcn": 1.0}), shape, stats, **kw)
    if mode == "graph":
        cut = stats.cut(workers)
        q = max(range(workers), key=lambda i: cut.part_rows[i] + cut.halo_rows[i])
        halo, layers = cut.halo_rows[q], range(1, shape.layers + 1)
    else:
        # The first stage holds the widest layer input (the features, 64 here).
        halo, layers = stats.cut(chunks).M / ways, range(1, split[0] + 1)
    assert halo > 0 and shape.dims[0] != shape.dims[1]
    assert one - none == pytest.approx(sum(halo * shape.dims[l - 1] * 4 for l in layers), abs=2)


@pytest.mark.parametrize("chunks", [2, 8])
def test_boundary_rows_are_the_union_of_the_halos(graph, chunks):
    """The exact boundary of a chunking is the set of rows some other chunk reads, and
    the estimate from statistics alone lies between the largest halo and ``M``."""
    import torch

    stats = graph_stats(graph)
    cut = stats.cut(chunks)
    read = torch.zeros(graph.num_nodes, dtype=torch.bool)
    plans = stats.chunked_of(chunks).plans
    for p in plans:
        read[p.halo_global_nid] = True
    assert cut.boundary_rows == tuple(int(read[p.row_start:p.row_end].sum()) for p in plans)
    assert max(cut.halo_rows) <= cut.boundary <= cut.M
    est = estimate_cut(stats_only(num_nodes=100_000, num_edges=1_000_000, num_features=8, num_classes=2,
                                  edge_cut_fraction=0.2), chunks)
    assert max(est.halo_rows) <= est.boundary <= est.M


@pytest.mark.parametrize("mode,ways,chunks", [("pipeline", 1, 8), ("hybrid", 2, 8), ("hybrid", 2, 2)])
def test_predicted_stage_gradient_buffers_hold_the_boundary_rows(graph, mode, ways, chunks):
    """A stage's G_l covers the chunking's boundary rows (pipeline: but the smallest
    chunk's; hybrid: its way's share, plus the rows it reads from other ways), not all
    its rows: the prediction moves by exactly the change in those rows x the buffered
    layers' input widths (with one chunk per way, C = W, one buffer serves every layer:
    x the widest once)."""
    from dataclasses import replace

    from gnnpipe.plan.costs import predict_memory

    stats = graph_stats(graph)
    shape = _shape(stats, layers=4, model="gcn")
    cut = stats.cut(chunks)
    kw = dict(mode=mode, workers=2, ways=ways, stages=2 // ways, chunks=chunks,
              split=(4,) if ways == 2 else (2, 2), way_halo_rows=stats.cut(ways).M if ways > 1 else 0.0)
    got = predict_memory(_profile(), shape, stats, **kw)
    stats.cuts[chunks] = replace(cut, boundary_rows=tuple(b + 10 for b in cut.boundary_rows))
    try:
        more = predict_memory(_profile(), shape, stats, **kw)
    finally:
        stats.cuts[chunks] = cut
    # 10 more boundary rows per chunk: in pipeline mode but the smallest chunk's (the
    # per-epoch slots' capacity), in hybrid shared by the ways; buffered layers: those
    # >= 2 of the largest stage (the first: its layers 1..2 buffer layer 2 only, in
    # pipeline).
    buffered = range(2, 3) if ways == 1 else range(2, 5)
    rows = 10 * (chunks - 1) if ways == 1 else 10 * chunks / ways
    widths = [shape.dims[l - 1] for l in buffered]
    per_row = max(widths) if chunks == ways else sum(widths)
    assert more - got == pytest.approx(rows * per_row * 4, abs=2)


def test_pipeline_gradient_buffers_are_not_counted_where_they_borrow_a_slot(graph, monkeypatch):
    """Where every chunk's own rows hold G_l's rows, a pipeline stage's G_l borrow a
    slot its layers saved (engine.grad_buffers, with the arena taking every slot: this
    graph's are below MIN_BYTES): the prediction drops exactly G_l's bytes of the
    largest stage; with the cross-epoch overlap (no lending), and where a chunk is
    smaller than the buffer, they are counted."""
    from dataclasses import replace

    from gnnpipe.engine import saved_arena
    from gnnpipe.plan.costs import predict_memory

    monkeypatch.setattr(saved_arena, "MIN_BYTES", 0)

    stats = graph_stats(graph)
    shape = _shape(stats, layers=4, model="gcn")
    cut = stats.cut(2)
    grad_rows = cut.boundary - min(cut.boundary_rows) + 1
    assert min(cut.part_rows) >= grad_rows  # two chunks of 250 rows
    kw = dict(mode="pipeline", workers=2, ways=1, stages=2, chunks=2, split=(1, 3))
    lent = predict_memory(_profile(), shape, stats, **kw)
    own = predict_memory(_profile(), shape, stats, cross_epoch_chunks=1, **kw)
    # The last stage (layers 2-4, all buffered, and the classifier) is the largest.
    assert own - lent == pytest.approx(grad_rows * sum(shape.dims[l - 1] for l in (2, 3, 4)) * 4, abs=2)
    # A chunk's rows read by the other beyond the smaller chunk's own rows: no slot
    # holds G_l, which is counted with the overlap or without.
    stats.cuts[2] = replace(cut, boundary_rows=(min(cut.part_rows), min(cut.boundary_rows)))
    try:
        small_lent = predict_memory(_profile(), shape, stats, **kw)
        small_own = predict_memory(_profile(), shape, stats, cross_epoch_chunks=1, **kw)
    finally:
        stats.cuts[2] = cut
    assert small_lent == small_own > own
