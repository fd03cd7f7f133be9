"""Mode ``hybrid`` (DESIGN.md 6, 7) on real gloo workers: with S = 1, W = P, C = P it
equals graph mode (E1's GraphRunner) and single; with W = 1 it equals pipeline mode;
with W = 2 ways of 2 stages it equals the simulator (including ways with unequal
blocks, which take idle exchange steps); and it sends exactly the predicted bytes,
whose halo term uses M_W, the M of the partition into way-blocks."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.engine.test_pipeline import (
    HYB2,
    HYB4,
    TOL,
    assert_bytes,
    assert_matches,
    chunked_for,
    results_for,
    simulate,
    single_reference,
)

pytestmark = pytest.mark.dist

@pytest.fixture(scope="module")
def hyb2():
    return results_for(2, HYB2)


def _same_run(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    """Two runs of the same layout agree on every rank: loss, owned grads and params."""
    for ra, rb in zip(a, b):
        assert ra["acc"] == pytest.approx(rb["acc"])
        for ea, eb in zip(ra["epochs"], rb["epochs"]):
            assert ea["loss"] == pytest.approx(eb["loss"], rel=1e-10)
            for key in ("grads", "params"):
                assert set(ea[key]) == set(eb[key])
                for k in ea[key]:
                    torch.testing.assert_close(ea[key][k], eb[key][k], **TOL, msg=f"{key} {k}")


@pytest.mark.parametrize("i", [0, 2], ids=["gcnii", "resgcn+"])
def test_hybrid_one_stage_equals_graph_mode_and_single(hyb2, i):
    _same_run(hyb2[i], hyb2[i + 1])
    epochs, acc = single_reference(HYB2[i])
    assert_matches(hyb2[i], epochs, acc)


def test_hybrid_one_way_equals_pipeline(hyb2):
    _same_run(hyb2[4], hyb2[5])
    assert hyb2[4][0]["predicted"] == hyb2[5][0]["predicted"]


@pytest.mark.parametrize("i", [0, 6], ids=["one-stage", "unequal-blocks"])
def test_hybrid_way_holds_its_block_and_the_rows_it_reads(hyb2, i):
    # Each way's buffers cover its block's rows and the other blocks' rows that its
    # chunks read, nothing more (not all N rows on every way).
    from gnnpipe.engine.schedule import way_blocks

    chunked = chunked_for(HYB2[i])
    n = chunked.graph.num_nodes
    ways = HYB2[i]["ways"]
    blocks = way_blocks(chunked.num_chunks, ways)
    seen = set()
    for res in hyb2[i]:
        way, rows, shapes = res["way_rows"]
        blk = blocks[way]
        r0, r1 = chunked.plans[blk[0]].row_start, chunked.plans[blk[-1]].row_end
        read = torch.cat([chunked.plans[k].halo_global_nid for k in blk])
        foreign = torch.unique(read[(read < r0) | (read >= r1)])
        assert torch.equal(rows, torch.cat([torch.arange(r0, r1), foreign]))
        assert rows.numel() < n
        # With one chunk per way B_l keeps only the block (the other ways' rows are read
        # at the step they arrive, from one buffer shared by the layers).
        one_chunk_per_way = all(len(b) == 1 for b in blocks)
        assert all(s[0] == (r1 - r0 if one_chunk_per_way else rows.numel()) for s in shapes.values())
        # Its gradient buffers cover only the rows a read gives a gradient: the rows its
        # chunks read outside themselves, and the rows of its block other ways read.
        grad_rows, grad_shapes, distinct = res["grad_rows"]
        read_by_others = torch.cat([chunked.plans[k].halo_global_nid for w, b in enumerate(blocks)
                                    if w != way for k in b])
        mine = read_by_others[(read_by_others >= r0) & (read_by_others < r1)]
        expected = torch.unique(torch.cat([read, mine]))
        row_of = torch.full((n,), -1, dtype=torch.int64)
        row_of[rows] = torch.arange(rows.numel())
        assert torch.equal(grad_rows, torch.sort(row_of[expected]).values)
        assert all(s[0] == grad_rows.numel() for s in grad_shapes.values())
        # One chunk per way (C = W): no gradient outlives its layer, one buffer per
        # width serves every layer; else each layer has its own.
        widths = {s[1] for s in grad_shapes.values()}
        one_each = all(len(b) == 1 for b in blocks)
        assert distinct == (len(widths) if one_each else len(grad_shapes))
        seen.add(way)
    assert seen == set(range(ways))


@pytest.mark.parametrize("i", [6, 7, 8, 9], ids=["unequal-blocks", "empty-chunks", "dropout-resgcn+",
                                                  "dropout-gcnii"])
def test_hybrid_two_ways_equal_simulator(hyb2, i):
    epochs, acc, _ = simulate(HYB2[i])
    assert_matches(hyb2[i], epochs, acc)


@pytest.mark.parametrize("i", [0, 2, 4, 6, 7, 8, 9], ids=lambda i: f"case{i}")
def test_hybrid_bytes_equal_prediction(hyb2, i):
    assert_bytes(hyb2[i])


def _m_w_from_plans(chunked, ways: int) -> int:
    """Rows of each way-block that a chunk of another way reads, counted per (owner,
    reader) pair of ways, straight from the plans: every distinct row that way w reads
    from another way belongs to exactly one owner, so the pair counts of reader w sum
    to the number of such rows."""
    from gnnpipe.engine.schedule import way_blocks

    blocks = way_blocks(chunked.num_chunks, ways)
    way_of = {k: w for w, blk in enumerate(blocks) for k in blk}
    total = 0
    for w in range(ways):
        read: set[int] = set()
        for k in blocks[w]:
            p = chunked.plans[k]
            read |= {int(v) for v, c in zip(p.halo_global_nid, p.halo_chunk) if way_of[int(c)] != w}
        total += len(read)
    return total


def test_hybrid_four_workers():
    results = results_for(4, HYB4)
    epochs, acc, _ = simulate(HYB4[0])
    assert_matches(results[0], epochs, acc)
    epochs, acc = single_reference(HYB4[1])
    assert_matches(results[1], epochs, acc)
    for case, res in zip(HYB4, results):
        assert_bytes(res)
        chunked = chunked_for(case)
        m_w = _m_w_from_plans(chunked, case["ways"])
        # float64, hidden 5, L = 4: halo term 8 * (L-1) * M_W * H each direction.
        assert res[0]["predicted"]["halo_rows"] == res[0]["predicted"]["halo_gradients"] == 8 * 3 * m_w * 5
        assert m_w > 0
