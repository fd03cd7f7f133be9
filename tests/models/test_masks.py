"""EpochMasks: one dropout mask per (seed, epoch, slot), the same in every process."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.models.masks import (LANE_WIDTHS, EpochMasks, MaskRows, draw_keep, draw_packed, keep_threshold, lane_bits,
                                  mask_seed)


def test_the_same_key_draws_the_same_mask_whatever_the_default_generator():
    torch.manual_seed(1)
    a = EpochMasks(seed=7, epoch=3, device="cpu").keep(2, 50, 6, 0.5)
    torch.manual_seed(2)
    torch.rand(100)
    b = EpochMasks(seed=7, epoch=3, device="cpu").keep(2, 50, 6, 0.5)
    assert a.dtype == torch.bool and a.shape == (50, 6)
    assert torch.equal(a, b)


def test_another_seed_epoch_or_slot_draws_another_mask():
    ref = EpochMasks(7, 3, "cpu").keep(2, 50, 6, 0.5)
    for seed, epoch, slot in ((8, 3, 2), (7, 4, 2), (7, 3, 3), (7, 3, 1)):
        assert not torch.equal(EpochMasks(seed, epoch, "cpu").keep(slot, 50, 6, 0.5), ref), (seed, epoch, slot)


def test_a_mask_keeps_a_fraction_one_minus_p():
    keep = EpochMasks(0, 1, "cpu").keep(1, 400, 250, 0.3)
    assert abs(float(keep.double().mean()) - 0.7) < 0.01  # 100k draws: sd ~0.0015


def test_a_slot_is_drawn_once_per_epoch():
    m = EpochMasks(0, 1, "cpu")
    first = m.keep(1, 10, 4, 0.5)
    state = torch.get_rng_state()
    assert m.keep(1, 10, 4, 0.5) is first
    assert torch.equal(torch.get_rng_state(), state)


def test_mask_rows_gather_ids_or_a_slice_and_their_head():
    mask = EpochMasks(0, 1, "cpu").keep(1, 10, 4, 0.5)
    ids = torch.tensor([7, 2, 2, 9])
    assert torch.equal(MaskRows(mask, ids).gather(), mask[ids])
    assert torch.equal(MaskRows(mask, ids).head(2).gather(), mask[ids[:2]])
    assert torch.equal(MaskRows(mask, slice(3, 8)).gather(), mask[3:8])
    assert torch.equal(MaskRows(mask, slice(3, 8)).head(2).gather(), mask[3:5])


def test_the_input_generator_is_keyed_like_the_masks():
    a = torch.rand(5, generator=EpochMasks(1, 2, "cpu").generator(0))
    b = torch.rand(5, generator=EpochMasks(1, 2, "cpu").generator(0))
    c = torch.rand(5, generator=EpochMasks(1, 3, "cpu").generator(0))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_mask_seeds_fit_a_generator_and_spread():
    seeds = {mask_seed(s, e, k) for s in range(3) for e in range(5) for k in range(40)}
    assert len(seeds) == 3 * 5 * 40
    assert all(0 <= s < 2 ** 63 for s in seeds)


def test_draw_keep_keeps_one_minus_p_in_every_lane():
    # Several lanes come from each 64-bit draw (64 one-bit ones at p = 0.5, 32 two-bit
    # ones at 0.25, four 16-bit ones at p = 0.1): a draw over only 63 bits (torch's
    # default random_ range) would keep the top lane's entries with probability 1, not
    # 1/2, at p = 0.5. Each lane position must keep about 1 - p on its own.
    for p, per_word, seed in ((0.5, 64, 0), (0.25, 32, 2), (0.1, 4, 1), (3 / 256, 8, 3)):
        keep = draw_keep((1000, 448), p, generator=torch.Generator().manual_seed(seed))
        lanes = keep.reshape(-1, per_word).double().mean(0)  # 7,000+ entries per lane: sd <= 0.006
        assert torch.all((lanes - (1 - p)).abs() < 0.03), (p, lanes)
        assert abs(keep.double().mean().item() - (1 - p)) < 0.005, p


def test_lane_width_is_the_narrowest_on_which_p_is_exact():
    assert LANE_WIDTHS == (1, 2, 4, 8, 16)
    assert [lane_bits(p) for p in (0.5, 0.25, 0.75, 0.125, 0.0625, 3 / 256, 0.0)] == [1, 2, 2, 4, 4, 8, 1]
    assert [lane_bits(p) for p in (0.1, 0.3, 0.6, 1 / 512)] == [16] * 4


def _lanes(words: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """The generator's words cut into ``bits``-bit two's-complement lanes, low bits first."""
    if bits >= 8:
        return words.view(torch.int8 if bits == 8 else torch.int16)[:n].long()
    u = words.view(torch.uint8).long()
    u = ((u.unsqueeze(1) >> (torch.arange(8 // bits) * bits)) & ((1 << bits) - 1)).reshape(-1)[:n]
    return torch.where(u >= 1 << (bits - 1), u - (1 << bits), u)


def test_draw_keep_compares_each_lane_with_the_threshold_of_p():
    # The mask is the generator's 64-bit words read as lanes of lane_bits(p) bits (two's
    # complement, low bits first), kept where lane >= round(p * 2^b) - 2^(b-1): the
    # probability is p rounded to 2^-b. Lanes narrower than a byte go through the byte
    # table; this reads them bit by bit instead.
    for p, bits in ((0.5, 1), (0.25, 2), (0.75, 2), (0.375, 4), (3 / 256, 8), (0.3, 16), (0.999, 16)):
        assert lane_bits(p) == bits
        gen = torch.Generator().manual_seed(5)
        words = torch.empty(8, dtype=torch.int64).random_(-(1 << 63), None, generator=gen)
        lanes = _lanes(words, bits, 30).view(5, 6)
        assert keep_threshold(p, bits) == min(round(p * 2 ** bits), 2 ** bits - 1) - 2 ** (bits - 1)
        keep = draw_keep((5, 6), p, generator=torch.Generator().manual_seed(5))
        assert keep.dtype == torch.bool and keep.shape == (5, 6)
        assert torch.equal(keep, lanes >= keep_threshold(p, bits)), p
    assert keep_threshold(0.5, 1) == 0 and keep_threshold(0.5, 8) == 0  # the sign bit alone decides: exact 1/2
    assert draw_keep((0, 3), 0.5).shape == (0, 3)
    # A forced width draws the same entries as its own p would on it.
    gen = torch.Generator().manual_seed(9)
    words = torch.empty(1, dtype=torch.int64).random_(-(1 << 63), None, generator=gen)
    forced = draw_keep((7,), 0.5, bits=8, generator=torch.Generator().manual_seed(9))
    assert torch.equal(forced, _lanes(words, 8, 7) >= 0)


@pytest.mark.parametrize("p,bits", [(0.5, 1), (0.25, 2), (0.375, 4), (3 / 256, 8), (0.3, 16)])
def test_packed_words_unpack_to_the_drawn_mask_in_bits_per_entry(p, bits):
    packed = draw_packed((37, 11), p, generator=torch.Generator().manual_seed(12))
    assert packed.bits == bits and packed.shape == (37, 11)
    assert packed.nbytes == -(-37 * 11 * bits // 64) * 8
    assert torch.equal(packed.unpack(), draw_keep((37, 11), p, generator=torch.Generator().manual_seed(12)))
