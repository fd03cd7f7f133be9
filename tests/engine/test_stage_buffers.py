"""A stage's rows and buffers (:mod:`gnnpipe.engine.stage_buffers`), set up without
processes or compute: the per-chunk ids name the chunk's rows, the buffers have the
shapes the mode needs, and the snapshot is restored and refreshed as technique 2 says."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.engine.layout import Layout
from gnnpipe.engine.stage_buffers import StageBuffers
from gnnpipe.partition.chunked import chunk_graph
from tests.engine.test_pipeline import tiny_graph

CPU = torch.device("cpu")


def _layout(ways: int, stages: int, chunks: int) -> Layout:
    return Layout(mode="pipeline" if ways == 1 else "hybrid", world_size=ways * stages, ways=ways, stages=stages,
                  num_chunks=chunks, stage_split=(1,) * stages, device_type="cpu", backend="gloo",
                  launcher="local")


def _buffers(ways: int, chunks: int, rank: int, period: int = 1, widths=None, lend: bool = False):
    chunked = chunk_graph(tiny_graph(), chunks, method="metis")
    widths = {2: 4, 3: 6} if widths is None else widths
    bufs = StageBuffers(chunked.plans, _layout(ways, 1, chunks), rank, comm=None, num_nodes=chunked.graph.num_nodes,
                        widths=widths, snapshot_period=period, device=CPU, dtype=torch.float64, lend_grads=lend)
    return chunked, bufs


@pytest.mark.parametrize("ways,chunks,rank", [(1, 3, 0), (2, 4, 0), (2, 4, 1), (2, 2, 1)])
def test_local_ids_name_each_chunks_own_then_halo_rows(ways, chunks, rank):
    chunked, bufs = _buffers(ways, chunks, rank)
    global_of = torch.empty(bufs.rows.n_rows, dtype=torch.int64)
    global_of[bufs.rows.row_of[bufs.rows.row_of >= 0]] = (bufs.rows.row_of >= 0).nonzero().squeeze(1)
    mine = _layout(ways, 1, chunks).way_blocks()[rank]
    assert sorted(bufs.local_ids) == list(mine)
    for k in mine:
        p = chunked.plans[k]
        assert torch.equal(global_of[bufs.local_ids[k]], torch.as_tensor(p.local_global_nid))
        own = bufs.own[k]
        assert own.stop - own.start == p.num_own
        assert torch.equal(bufs.local_ids[k][:p.num_own], torch.arange(own.start, own.stop))
        assert torch.equal(bufs.halo_chunk[k], p.halo_chunk)


def test_pipeline_keeps_every_row_and_no_exchange():
    chunked, bufs = _buffers(1, 3, 0)
    n = chunked.graph.num_nodes
    assert bufs.exchange is None and not bufs.one_chunk_per_way
    assert {l: tuple(b.shape) for l, b in bufs.B.items()} == {2: (n, 4), 3: (n, 6)}
    assert bufs.foreign == {} and bufs.G is bufs.grads.G
    assert bufs.B[2].dtype == torch.float64


def test_hybrid_one_chunk_per_way_keeps_the_block_and_shares_foreign_rows():
    chunked, bufs = _buffers(2, 2, 1, widths={2: 4, 3: 4, 4: 6})
    rows = bufs.rows
    assert bufs.one_chunk_per_way and bufs.exchange is not None
    assert all(b.shape[0] == rows.n_block for b in bufs.B.values())
    # One foreign buffer per width, shared by the layers of that width.
    assert bufs.foreign[2] is bufs.foreign[3] and bufs.foreign[4] is not bufs.foreign[2]
    assert bufs.foreign[4].shape == (rows.n_rows - rows.n_block, 6)
    (k,) = bufs.local_ids
    p = chunked.plans[k]
    assert torch.equal(bufs.own_ids[k], bufs.local_ids[k][:p.num_own])
    assert torch.equal(bufs.foreign_ids[k] + rows.n_block, bufs.local_ids[k][p.num_own:])


def test_hybrid_with_more_chunks_than_ways_keeps_every_row_of_its_space():
    _, bufs = _buffers(2, 4, 0)
    assert not bufs.one_chunk_per_way and bufs.foreign == {}
    assert all(b.shape[0] == bufs.rows.n_rows > bufs.rows.n_block for b in bufs.B.values())


def test_snapshot_is_the_buffer_when_refreshed_every_epoch():
    _, bufs = _buffers(1, 3, 0, period=1)
    assert bufs.snap is bufs.B
    bufs.B[2].fill_(3.0)
    bufs.restore()
    bufs.refresh_snapshot()
    assert bool((bufs.B[2] == 3.0).all())


def test_restore_and_refresh_with_a_snapshot_period():
    _, bufs = _buffers(1, 3, 0, period=4)
    assert bufs.snap is not bufs.B and bufs.snap[2] is not bufs.B[2]
    for l, b in bufs.B.items():
        b.copy_(torch.randn(b.shape, dtype=b.dtype))
    bufs.refresh_snapshot()
    snap = {l: s.clone() for l, s in bufs.snap.items()}
    assert all(torch.equal(snap[l], bufs.B[l]) for l in bufs.B)
    written = {l: torch.randn(b.shape, dtype=b.dtype) for l, b in bufs.B.items()}
    for l, b in bufs.B.items():
        b.copy_(written[l])
    # Chunks 0 and 2 ran ahead at a cross-epoch turn: their own rows keep what they wrote.
    bufs.restore([0, 2])
    keep = torch.cat([torch.arange(bufs.own[k].start, bufs.own[k].stop) for k in (0, 2)])
    for l, b in bufs.B.items():
        expected = snap[l].clone()
        expected[keep] = written[l][keep]
        assert torch.equal(b, expected)
    bufs.restore()
    assert all(torch.equal(bufs.B[l], snap[l]) for l in bufs.B)


@pytest.mark.parametrize("ways,chunks,lends", [(1, 2, True), (1, 3, False), (2, 4, False)])
def test_gradient_buffers_are_lent_only_where_a_chunks_own_rows_hold_them(ways, chunks, lends, monkeypatch):
    """Pipeline mode lends G_l where every chunk's own rows (18 of 36 at C = 2) hold its
    rows (14: 13 boundary rows and the trash row) and the arena takes such a slot (here
    every saved tensor: the tiny graph's are below ``MIN_BYTES``), and makes its own
    buffers at once where they do not (12 own rows at C = 3, 21 buffer rows), in hybrid
    mode, or where the slots stay out of the arena."""
    from gnnpipe.engine import saved_arena

    monkeypatch.setattr(saved_arena, "MIN_BYTES", 0)
    chunked, bufs = _buffers(ways, chunks, 0, lend=True)
    assert bufs.grads.lend is lends
    assert (bufs.G == {}) is lends  # own buffers made here unless lent
    if ways == 1:
        fits = min(p.num_own for p in chunked.plans) >= bufs.grads.num_rows
        assert fits is lends
    _, off = _buffers(ways, chunks, 0)
    assert not off.grads.lend and off.G
    monkeypatch.undo()  # 18 rows x 4 float64 = 576 bytes: a slot the arena leaves in the heap
    _, small = _buffers(ways, chunks, 0, lend=True)
    assert not small.grads.lend and small.G
