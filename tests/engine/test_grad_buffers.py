"""A stage's gradient buffers (:mod:`gnnpipe.engine.grad_buffers`), without processes:
pipeline mode takes each epoch's slots from its order in a buffer sized for any
order; hybrid with one chunk per way shares one buffer per width, zeroed after use."""

from __future__ import annotations

import torch

from gnnpipe.engine.grad_buffers import GradBuffers
from gnnpipe.engine.row_space import (build_epoch_grad_plan, build_exchange_plan, build_grad_rows,
                                      build_row_space)
from gnnpipe.engine.schedule import way_blocks
from gnnpipe.partition.chunked import chunk_graph
from tests.engine.test_pipeline import tiny_graph

CPU = torch.device("cpu")


def test_pipeline_buffers_take_each_epochs_slots_and_start_it_at_zero():
    chunked = chunk_graph(tiny_graph(), 3, method="metis", seed=0, cache=False)
    n = chunked.graph.num_nodes
    plan = build_epoch_grad_plan(chunked.plans, build_row_space(chunked.plans, [(0, 1, 2)], 0, n), CPU)
    bufs = GradBuffers({2: 5, 3: 5, 4: 7}, None, plan, shared=False, device=CPU, dtype=torch.float64)
    assert len({G.data_ptr() for G in bufs.G.values()}) == 3  # one per layer
    assert all(G.shape[0] == plan.capacity + 1 for G in bufs.G.values())  # + the trash slot
    for order in ([0, 1, 2], [2, 0, 1]):
        for G in bufs.G.values():
            G.fill_(1.0)
        step_of = torch.empty(3, dtype=torch.int64)
        step_of[torch.tensor(order)] = torch.arange(3)
        bufs.begin_epoch(step_of)
        assert all(bool((G == 0).all()) for G in bufs.G.values())
        assert torch.equal(bufs.rows.rows, plan.for_order(step_of).rows)
        bufs.done_with(bufs.G[2].fill_(3.0))  # not shared: left as it is
        assert bool((bufs.G[2] == 3.0).all())


def _one_chunk_per_way_rows():
    """Way 0's fixed gradient slots, hybrid W = 2 with one chunk per way."""
    chunked = chunk_graph(tiny_graph(), 2, method="metis", seed=0, cache=False)
    n = chunked.graph.num_nodes
    blocks = way_blocks(2, 2)
    rows = build_row_space(chunked.plans, blocks, 0, n)
    static = build_grad_rows(chunked.plans, blocks, rows, build_exchange_plan(chunked.plans, blocks, rows, n, CPU), CPU)
    return static


def test_one_chunk_per_way_shares_one_buffer_per_width_zeroed_after_use():
    static = _one_chunk_per_way_rows()
    bufs = GradBuffers({2: 5, 3: 5, 4: 7}, static, None, shared=True, device=CPU, dtype=torch.float64)
    assert bufs.G[2] is bufs.G[3] and bufs.G[4] is not bufs.G[2]
    assert bufs.G[2].shape == (static.n_slots, 5) and bufs.G[4].shape == (static.n_slots, 7)
    bufs.G[3].fill_(2.0)
    bufs.done_with(bufs.G[3])
    assert bool((bufs.G[2] == 0).all())
    bufs.G[4].fill_(1.0)
    bufs.begin_epoch(torch.zeros(2, dtype=torch.int64))
    assert bool((bufs.G[4] == 0).all()) and bufs.rows is static


def _pipeline_plan():
    chunked = chunk_graph(tiny_graph(), 3, method="metis", seed=0, cache=False)
    n = chunked.graph.num_nodes
    return build_epoch_grad_plan(chunked.plans, build_row_space(chunked.plans, [(0, 1, 2)], 0, n), CPU)


def test_lent_buffers_take_an_offer_large_enough_and_give_it_back_each_epoch():
    plan = _pipeline_plan()
    rows = plan.capacity + 1
    bufs = GradBuffers({2: 5, 3: 5}, None, plan, shared=False, device=CPU, dtype=torch.float32, lend=True)
    assert bufs.G == {} and bufs.own_bytes == 0  # nothing made before a backward asks
    step_of = torch.arange(3)
    for epoch in range(2):
        bufs.begin_epoch(step_of)
        assert bufs.borrowed == {}
        slot = torch.full((rows * 5 + 3,), 7.0)  # a dead slot, larger than G_2
        G2 = bufs.buffer(2, slot)
        assert G2.shape == (rows, 5) and G2.data_ptr() == slot.data_ptr() and bool((G2 == 0).all())
        assert bool((slot[rows * 5:] == 7.0).all())  # only the buffer's bytes zeroed
        G2.add_(1.0)
        assert bufs.buffer(2, torch.zeros(10 * rows * 5)) is G2  # the epoch's choice stands
        # Too small an offer (or none): the layer's own buffer, made once, zeroed each epoch.
        G3 = bufs.buffer(3, torch.zeros(rows * 5 - 1))
        assert G3.shape == (rows, 5) and bool((G3 == 0).all()) and bufs.own_bytes == rows * 5 * 4
        if epoch == 0:
            first_own = G3.data_ptr()
            G3.fill_(2.0)
        else:
            assert G3.data_ptr() == first_own
        assert sorted(bufs.borrowed) == [2]
    # An offer of another dtype (a mask's random words) lends its bytes as well.
    bufs.begin_epoch(step_of)
    words = torch.zeros(rows * 5 // 2 + 1, dtype=torch.int64)
    assert bufs.buffer(2, words).data_ptr() == words.data_ptr()


def test_lending_is_off_in_hybrid_mode():
    static = _one_chunk_per_way_rows()
    bufs = GradBuffers({2: 5}, static, None, shared=True, device=CPU, dtype=torch.float64, lend=True)
    assert not bufs.lend and bufs.buffer(2, torch.zeros(1000, dtype=torch.float64)) is bufs.G[2]
