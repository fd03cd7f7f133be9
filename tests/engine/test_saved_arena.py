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


def test_slots_are_reused_at_the_same_offsets_after_begin_and_keys_are_apart(monkeypatch):
    monkeypatch.setattr(saved_arena, "SEGMENT_BYTES", 1024)
    arena = SavedArena(torch.device("cpu"))
    sizes = [(40, 4), (100, 2), (10, 1), (300, 1)]  # 640, 800, 40, 1200 bytes of float32

    def epoch(key):
        arena.begin(key)
        return [arena.place(key, torch.randn(*s)).data_ptr() for s in sizes]

    first = epoch("a")
    held = arena.reserved_bytes
    # 640 + 800 do not share a 1024-byte segment; 40 fits after the 640 (first fit);
    # 1200 gets a segment of its own size.
    assert [seg.numel() for seg in arena._slots["a"].segments] == [1024, 1024, 1216]
    assert epoch("a") == first and arena.reserved_bytes == held  # the next epoch: same slots
    other = epoch("b")
    assert not set(other) & set(first)  # another key (chunk, parity) has its own segments
    assert arena.reserved_bytes == 2 * held


def test_only_large_non_parameter_tensors_move():
    big = torch.empty(saved_arena.MIN_BYTES // 4, dtype=torch.float32)
    assert movable(big)
    assert not movable(big[1:])  # 4 bytes below the threshold
    assert not movable(torch.nn.Parameter(big.clone()))  # weights stay where they are
    assert movable(torch.nn.Parameter(big.clone()) * 2.0)  # a computed tensor moves
