"""Chunk plans: the chunks' local CSRs with their halos reproduce the graph exactly."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gnnpipe.errors import PartitionError
from gnnpipe.partition import (
    build_chunk_plans,
    halo_send_lists,
    make_partition,
    reorder,
    whole_graph_plan,
)


def _reassemble(plans, n: int) -> torch.Tensor:
    """Dense [N, N] count matrix (v, u) rebuilt from the chunk plans by a Python loop."""
    a = torch.zeros(n, n, dtype=torch.int64)
    for plan in plans:
        halo = plan.halo_global_nid.tolist()
        indptr, indices = plan.indptr.tolist(), plan.indices.tolist()
        for r in range(plan.num_own):
            v = plan.row_start + r
            for j in range(indptr[r], indptr[r + 1]):
                local = indices[j]
                u = plan.row_start + local if local < plan.num_own else halo[local - plan.num_own]
                a[v, u] += 1
    return a


def _offsets_with_empty_chunks(n: int, gen: torch.Generator) -> torch.Tensor:
    """Random cut points, including repeated ones (empty chunks) and an empty last chunk."""
    cuts = torch.sort(torch.randint(0, n + 1, (6,), generator=gen)).values
    cuts = torch.cat([cuts[:3], cuts[2:3], cuts[3:]])  # a repeated cut = an empty chunk
    return torch.cat([torch.tensor([0, 0]), cuts, torch.tensor([n, n])])


def _brute_force_checks(graph, plans, offsets, dense) -> None:
    n = graph.num_nodes
    num_chunks = offsets.numel() - 1
    assert len(plans) == num_chunks
    # Exact reassembly, multiplicities included.
    assert torch.equal(_reassemble(plans, n), dense(graph))
    assert sum(p.num_edges for p in plans) == graph.num_edges
    deg = dense(graph).sum(dim=1)
    chunk_of = {v: k for k in range(num_chunks) for v in range(int(offsets[k]), int(offsets[k + 1]))}
    for k, plan in enumerate(plans):
        a, b = int(offsets[k]), int(offsets[k + 1])
        assert (plan.chunk_idx, plan.num_chunks, plan.row_start, plan.row_end) == (k, num_chunks, a, b)
        assert plan.indptr.numel() == b - a + 1 and int(plan.indptr[0]) == 0
        # Halo = sources of in-edges of the chunk that lie outside it, sorted.
        want_halo = sorted({u for v in range(a, b)
                            for u in graph.indices[graph.indptr[v]:graph.indptr[v + 1]].tolist()
                            if not a <= u < b})
        assert plan.halo_global_nid.tolist() == want_halo
        # halo_chunk = owner chunk of each halo vertex.
        assert plan.halo_chunk.tolist() == [chunk_of[u] for u in want_halo]
        # in_degree = global in-degree of every local vertex.
        assert torch.equal(plan.in_degree, deg[plan.local_global_nid])
        assert plan.num_local == (b - a) + len(want_halo)
        if plan.num_edges:
            assert int(plan.indices.min()) >= 0 and int(plan.indices.max()) < plan.num_local
        # Sorted local ids within each row.
        for r in range(plan.num_own):
            row = plan.indices[plan.indptr[r]:plan.indptr[r + 1]]
            assert torch.equal(row, torch.sort(row).values)
        assert torch.equal(plan.dst_local(), torch.repeat_interleave(
            torch.arange(plan.num_own), plan.indptr[1:] - plan.indptr[:-1]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plans_reproduce_adjacency_with_empty_chunks(make_graph, dense, seed):
    g = make_graph(70, 260, seed=seed)
    gen = torch.Generator().manual_seed(100 + seed)
    offsets = _offsets_with_empty_chunks(g.num_nodes, gen)
    assert bool((offsets[1:] == offsets[:-1]).any())  # the case under test
    plans = build_chunk_plans(g, offsets)
    _brute_force_checks(g, plans, offsets, dense)
    for k in torch.nonzero(offsets[1:] == offsets[:-1]).flatten().tolist():
        assert plans[k].num_own == 0 and plans[k].num_edges == 0 and plans[k].num_halo == 0


@pytest.mark.parametrize("method", ["metis", "random"])
def test_plans_of_a_reordered_partition(make_graph, dense, method):
    g = make_graph(120, 500, seed=3)
    part = make_partition(g, 6, method=method)
    r = reorder(g, part)
    plans = build_chunk_plans(r, part.offsets)
    _brute_force_checks(r, plans, part.offsets, dense)


def test_whole_graph_plan_is_the_graph(make_graph, dense):
    g = make_graph(60, 200, seed=4)
    plan = whole_graph_plan(g)
    assert plan.num_halo == 0 and plan.num_own == g.num_nodes
    assert torch.equal(plan.indptr, g.indptr) and torch.equal(plan.indices, g.indices)
    assert torch.equal(plan.in_degree, g.in_degree)


def test_halo_send_lists_are_slices_of_the_readers_halo(make_graph):
    g = make_graph(100, 400, seed=5)
    part = make_partition(g, 5, method="random", seed=1)
    r = reorder(g, part)
    plans = build_chunk_plans(r, part.offsets)
    send = halo_send_lists(plans)
    for q, plan in enumerate(plans):
        got = torch.cat([send[p][q] for p in range(len(plans)) if p != q])
        # Senders in chunk order concatenate to q's halo, as it is sorted by owner too.
        assert torch.equal(got, plan.halo_global_nid)
        for p in range(len(plans)):
            if p != q:
                a, b = part.part_range(p)
                assert bool(((send[p][q] >= a) & (send[p][q] < b)).all())
        assert send[q][q].numel() == 0


@pytest.mark.parametrize(
    "offsets, needle",
    [([0, 30, 20, 60], "non-decreasing"), ([1, 30, 60], "from 0 to N=60"),
     ([0, 30, 59], "from 0 to N=60"), ([0], ">= 2")],
)
def test_bad_offsets(make_graph, offsets, needle):
    g = make_graph(60, 200, seed=6)
    with pytest.raises(PartitionError, match=needle):
        build_chunk_plans(g, torch.tensor(offsets))


@pytest.mark.parametrize("seed", [0, 1])
def test_plan_graph_edges_carry_graph_edge_weights_into_the_plans(make_graph, seed):
    # Graph edge weights reach a plan through plan_graph_edges, and the weighted
    # aggregation over the chunks reproduces the whole-graph weighted sum (duplicate
    # edges and self-loops with their own weights, empty chunks).
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.partition import plan_graph_edges

    g = make_graph(70, 260, seed=seed)
    gen = torch.Generator().manual_seed(7 + seed)
    part = make_partition(g, 5, method="metis")
    r = reorder(g, part)
    offsets = torch.cat([part.offsets[:2], part.offsets[1:]])  # chunk 1 is empty
    plans = build_chunk_plans(r, offsets)
    w = torch.rand(r.num_edges, generator=gen, dtype=torch.float64) + 0.1
    x = torch.randn(r.num_nodes, 4, generator=gen, dtype=torch.float64)
    want = torch.zeros(r.num_nodes, 4, dtype=torch.float64)
    dst = torch.repeat_interleave(torch.arange(r.num_nodes), r.indptr[1:] - r.indptr[:-1])
    want.index_add_(0, dst, w.unsqueeze(1) * x[r.indices])
    got = torch.zeros_like(want)
    seen = []
    for plan in plans:
        eid = plan_graph_edges(r, plan)
        seen.append(eid)
        # the same source vertex, edge by edge
        assert torch.equal(r.indices[eid], plan.local_global_nid[plan.indices])
        ops = ChunkOps.build(plan, dtype=torch.float64)
        got[plan.row_start:plan.row_end] = ops.aggregate(x[plan.local_global_nid], "weighted", w[eid])
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert torch.equal(torch.sort(torch.cat(seen)).values, torch.arange(r.num_edges))  # each edge once
    with pytest.raises(PartitionError, match="not the graph it was built from"):
        plan_graph_edges(g.add_self_loops(), plans[0])


@pytest.mark.parametrize("seed", [0, 1])
def test_halo_blocks_are_the_runs_of_each_source_chunk(make_graph, seed):
    """``halo_blocks``: one (chunk, start, stop) per chunk owning halo rows, ascending,
    covering the halo exactly, each run holding only that chunk's rows."""
    g = make_graph(90, 400, seed=seed)
    part = make_partition(g, 5, method="random", seed=seed)
    plans = build_chunk_plans(reorder(g, part), part.offsets)
    some = 0
    for plan in plans:
        blocks = plan.halo_blocks
        assert [j for j, _, _ in blocks] == sorted(set(plan.halo_chunk.tolist()))
        assert [a for _, a, _ in blocks] == [plan.num_own] + [b for _, _, b in blocks[:-1]]
        assert (blocks[-1][2] if blocks else plan.num_own) == plan.num_local
        for j, a, b in blocks:
            assert b > a and bool((plan.halo_chunk[a - plan.num_own:b - plan.num_own] == j).all())
        some += len(blocks) > 1
    assert some


def test_halo_blocks_refuse_a_halo_not_grouped_by_chunk(make_graph):
    g = make_graph(40, 160, seed=5)
    part = make_partition(g, 4, method="random", seed=5)
    plan = next(p for p in build_chunk_plans(reorder(g, part), part.offsets)
                if len(set(p.halo_chunk.tolist())) > 1)
    scrambled = dataclasses.replace(plan, halo_chunk=plan.halo_chunk.flip(0))
    with pytest.raises(PartitionError, match=rf"chunk {plan.chunk_idx}: expected its halo grouped by source chunk"):
        scrambled.halo_blocks
