"""The row-space plans of a way (:mod:`gnnpipe.engine.row_space`), built without
processes: the gradient slots hold exactly the rows a read can give a gradient (in
pipeline mode, per epoch: the rows a later chunk of the order reads), and the
per-chunk slot lists address the same rows as the row-space ids they replace."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.engine.row_space import (build_epoch_grad_plan, build_exchange_plan, build_grad_rows, build_row_space,
                                      exchange_in_slots)
from gnnpipe.engine.schedule import way_blocks
from gnnpipe.partition.chunked import chunk_graph
from tests.engine.test_pipeline import tiny_graph

CPU = torch.device("cpu")


def _chain_graph():
    """A path 0 -> 1 -> ... -> 11 cut into 3 chunks of 4: only each chunk's last row
    is read by another chunk, so most own rows have no gradient slot."""
    from gnnpipe.data import Graph

    n = 12
    src = torch.arange(n - 1)
    x = torch.randn(n, 3, generator=torch.Generator().manual_seed(0))
    y = torch.zeros(n, dtype=torch.int64)
    train = torch.ones(n, dtype=torch.bool)
    return Graph.from_edge_index(torch.stack([src, src + 1]), x, y, train_mask=train, num_classes=2,
                                 name="chain").validate()


def _check_slots(chunked, blocks, way):
    plans = chunked.plans
    n = chunked.graph.num_nodes
    rows = build_row_space(plans, blocks, way, n)
    plan = build_exchange_plan(plans, blocks, rows, n, CPU) if len(blocks) > 1 else None
    gr = build_grad_rows(plans, blocks, rows, plan, CPU)
    mine = blocks[way]
    # Expected: row-space ids of the halo rows of the way's chunks, plus (hybrid) the
    # rows of its block that chunks of other ways read.
    needed = [rows.row_of[plans[k].halo_global_nid] for k in mine]
    if plan is not None:
        needed += [r for per_way in plan.send_rows.values() for r in per_way.values()]
    expected = torch.unique(torch.cat(needed)) if needed else torch.empty(0, dtype=torch.int64)
    assert torch.equal(gr.rows, expected)
    assert gr.n_slots == expected.numel() <= rows.n_rows
    assert torch.equal(gr.slot_of[gr.rows], torch.arange(gr.n_slots))
    assert int((gr.slot_of >= 0).sum()) == gr.n_slots
    for k in mine:
        p = plans[k]
        # A halo slot is the slot of that halo row.
        assert torch.equal(gr.rows[gr.halo_slot[k]], rows.row_of[p.halo_global_nid])
        # The own slots are the slotted own rows, at the positions own_pos names.
        own0 = p.row_start - rows.r0
        pos = torch.arange(p.num_own) if gr.own_pos[k] is None else gr.own_pos[k]
        assert torch.equal(gr.rows[gr.own_slots[k]], own0 + pos)
        assert torch.equal(pos, (gr.slot_of[own0:own0 + p.num_own] >= 0).nonzero().squeeze(1))
    if plan is not None:
        slots = exchange_in_slots(plan, gr)
        for k, per_way in plan.send_rows.items():
            for w, r in per_way.items():
                assert torch.equal(gr.rows[slots.send_rows[k][w]], r)
        for k, r in plan.recv_rows.items():
            assert torch.equal(gr.rows[slots.recv_rows[k]], r)
    return gr


@pytest.mark.parametrize("chunks", [1, 2, 3, 5])
def test_pipeline_grad_rows_are_the_halo_union(chunks):
    chunked = chunk_graph(tiny_graph(), chunks, method="metis", seed=0, cache=False)
    gr = _check_slots(chunked, [tuple(range(chunks))], 0)
    if chunks == 1:
        assert gr.n_slots == 0  # one chunk reads no halo: no gradient buffer rows


@pytest.mark.parametrize("chunks,ways", [(4, 2), (5, 2), (6, 3)])
def test_hybrid_grad_rows_cover_halo_and_rows_sent(chunks, ways):
    chunked = chunk_graph(tiny_graph(), chunks, method="metis", seed=0, cache=False)
    blocks = way_blocks(chunks, ways)
    for way in range(ways):
        _check_slots(chunked, blocks, way)


def test_grad_rows_skip_rows_no_other_chunk_reads():
    chunked = chunk_graph(_chain_graph(), 3, method="metis", seed=0, cache=False)
    gr = _check_slots(chunked, [(0, 1, 2)], 0)
    # A path cut into 3 runs has 2 cut edges: their 2 source rows are all the slots,
    # so own_pos names a part of a chunk's rows (or none of them), never all.
    assert [chunked.plans[k].num_own for k in range(3)] == [4, 4, 4]
    assert gr.n_slots == 2
    assert all(gr.own_pos[k] is not None and gr.own_pos[k].numel() < 4 for k in range(3))


@pytest.mark.parametrize("chunks", [1, 2, 3, 5])
def test_epoch_grad_rows_are_the_rows_later_chunks_read(chunks):
    chunked = chunk_graph(tiny_graph(), chunks, method="metis", seed=0, cache=False)
    plans = chunked.plans
    n = chunked.graph.num_nodes
    rows = build_row_space(plans, [tuple(range(chunks))], 0, n)
    plan = build_epoch_grad_plan(plans, rows, CPU)
    read_by_other = torch.zeros(n, dtype=torch.bool)
    for p in plans:
        read_by_other[p.halo_global_nid] = True
    boundary = [int(read_by_other[p.row_start:p.row_end].sum()) for p in plans]
    assert plan.capacity == sum(boundary) - min(boundary)
    chunk_of = torch.cat([torch.full((p.num_own,), k) for k, p in enumerate(plans)])
    g = torch.Generator().manual_seed(chunks)
    for _ in range(6):
        order = torch.randperm(chunks, generator=g)
        step_of = torch.empty(chunks, dtype=torch.int64)
        step_of[order] = torch.arange(chunks)
        gr = plan.for_order(step_of)
        # A row has a slot iff a chunk at a later step reads it.
        expected = torch.zeros(n, dtype=torch.bool)
        for k, p in enumerate(plans):
            src = p.halo_global_nid
            expected[src[step_of[chunk_of[src]] < step_of[k]]] = True
        assert torch.equal(gr.rows, expected.nonzero().squeeze(1))
        assert gr.n_slots <= plan.capacity and gr.trash and gr.buffer_rows == plan.capacity + 1
        for k, p in enumerate(plans):
            src = p.halo_global_nid
            fresh = step_of[chunk_of[src]] < step_of[k]
            assert torch.equal(gr.halo_slot[k][fresh], gr.slot_of[src[fresh]])
            assert bool((gr.halo_slot[k][~fresh] == plan.capacity).all())  # stale: the trash slot
            pos = torch.arange(p.num_own) if gr.own_pos[k] is None else gr.own_pos[k]
            assert torch.equal(gr.rows[gr.own_slots[k]], p.row_start + pos)
            assert torch.equal(pos, expected[p.row_start:p.row_end].nonzero().squeeze(1))
    if chunks == 2:
        # The capacity is one chunk's boundary: exactly what the order that puts the
        # chunk with the larger boundary first uses.
        both = [plan.for_order(torch.tensor(s)).n_slots for s in ([0, 1], [1, 0])]
        assert sorted(both) == sorted(boundary) and max(both) == plan.capacity
