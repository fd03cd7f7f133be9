"""SavedArena: copies in per-key slots, first fit, reused at the same offsets after
``begin``; which saved tensors move."""

from __future__ import annotations

import torch

from gnnpipe.engine import saved_arena
from gnnpipe.engine.saved_arena import ALIGN, SavedArena, movable


def test_place_copies_values_dtype_and_shape_and_detaches_from_the_original():
    arena = SavedArena(torch.device("cpu"))
    arena.begin(0)
    x = torch.randn(5, 3, dtype=torch.float64)
    m = torch.rand(7, 4) > 0.5
    strided = torch.randn(6, 8)[:, ::2]
    got = [arena.place(0, t) for t in (x, m, strided)]
    for t, g in zip((x, m, strided), got):
        assert g.dtype == t.dtype and g.shape == t.shape and g.is_contiguous()
        assert torch.equal(g, t)
        assert g.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    x.zero_()
    assert not torch.equal(got[0], x)  # a copy, not a view of the original
    # Every slot starts on an ALIGN boundary of its segment, whatever came before it.
    base = arena._slots[0].segments[0].data_ptr()
    assert all((g.data_ptr() - base) % ALIGN == 0 for g in got)


def test_a_key_grows_geometrically_then_holds_one_exact_segment_reused_at_the_same_offsets(monkeypatch):
    monkeypatch.setattr(saved_arena, "MIN_SEGMENT_BYTES", 1024)
    arena = SavedArena(torch.device("cpu"))
    sizes = [(40, 4), (100, 2), (10, 1), (300, 1)]  # 640, 800, 40, 1200 bytes of float32

    def epoch(key):
        arena.begin(key)
        placed = [arena.place(key, torch.randn(*s)) for s in sizes]
        return [t.data_ptr() for t in placed]

    epoch("a")
    # 640 in the first segment (1024); 800 does not fit there: a second as large as all
    # before (1024); 40 fits after the 640 (first fit); 1200 (1216 aligned) fits in
    # neither: a third of max(1216, 2048).
    assert [seg.numel() for seg in arena._slots["a"].segments] == [1024, 1024, 2048]
    second = epoch("a")
    # The next round: one segment of exactly what the first used, filled in order.
    assert [seg.numel() for seg in arena._slots["a"].segments] == [640 + 832 + 64 + 1216]
    assert epoch("a") == second and arena.reserved_bytes == 2752  # from then on: the same slots
    other = epoch("b")
    assert not set(other) & set(second)  # another key (chunk, parity) has its own segments
    epoch("b")
    assert arena.reserved_bytes == 2 * 2752
    # A key whose one segment is mostly unused shrinks to what it used.
    arena.begin("c")
    arena.place("c", torch.randn(10))
    assert [seg.numel() for seg in arena._slots["c"].segments] == [1024]
    arena.begin("c")
    assert [seg.numel() for seg in arena._slots["c"].segments] == [64]


def test_only_large_non_parameter_tensors_move():
    big = torch.empty(saved_arena.MIN_BYTES // 4, dtype=torch.float32)
    assert movable(big)
    assert not movable(big[1:])  # 4 bytes below the threshold
    assert not movable(torch.nn.Parameter(big.clone()))  # weights stay where they are
    assert movable(torch.nn.Parameter(big.clone()) * 2.0)  # a computed tensor moves


def test_a_chunk_layer_leaves_nothing_it_saves_in_the_heap_but_its_weights():
    """What a GCN layer saves for backward on 400 rows at width 100 (dropout 0.5: its
    mask saved as random words, 400 x 100 bits = 5,000 bytes) all moves into the arena,
    parameters aside: a saved block left in the heap sits among the next layers'
    temporaries (the 1.03 MB mask words left there held the 200k C = 8 peak about 1.7
    GiB up: bench/results/memory_200k/arena_all)."""
    from gnnpipe.engine.stage_autograd import saved_holder, unhold
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.models.layers import GCNLayer
    from gnnpipe.plan.calibrate import _plan

    torch.manual_seed(0)
    ops = ChunkOps.build(_plan(400, 8.0))
    layer = GCNLayer(100, 100, dropout=0.5).train()
    x = torch.randn(400, 100, requires_grad=True)
    saved: list[list[torch.Tensor]] = []
    with torch.autograd.graph.saved_tensors_hooks(saved_holder(saved), unhold):
        out = layer(x, ops)
    kept = [h[0] for h in saved if not (h[0].is_leaf and h[0].requires_grad)]
    sizes = sorted(t.numel() * t.element_size() for t in kept)
    assert 5000 in sizes  # the mask words
    assert kept and all(movable(t) for t in kept), sizes
    arena = SavedArena(torch.device("cpu"))
    arena.begin(0)
    assert len(arena.adopt(0, saved, out)) == len({t.data_ptr() for t in kept
                                                   if t.untyped_storage().data_ptr()
                                                   != out.untyped_storage().data_ptr()})
