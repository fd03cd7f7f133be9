"""Partitioners, the Partition container, reorder and the id mappings."""

from __future__ import annotations

import pymetis
import pytest
import torch

from gnnpipe.errors import PartitionError
from gnnpipe.partition import (
    KNOWN_METHODS,
    Partition,
    make_partition,
    metis_partition,
    random_partition,
    reorder,
    undirected_edge_cut,
)


def _check_partition_invariants(part: Partition, n: int, num_parts: int) -> None:
    assert part.parts.shape == (n,) and part.parts.dtype == torch.int64
    assert part.num_parts == num_parts
    # Every vertex in exactly one part: the parts' reordered ranges tile [0, N).
    assert int(part.parts.min()) >= 0 and int(part.parts.max()) < num_parts
    counts = torch.bincount(part.parts, minlength=num_parts)
    assert torch.equal(part.part_sizes, counts)
    assert int(part.offsets[0]) == 0 and int(part.offsets[-1]) == n
    # perm is a permutation and inv_perm its inverse.
    assert torch.equal(torch.sort(part.perm).values, torch.arange(n))
    assert torch.equal(part.perm[part.inv_perm], torch.arange(n))
    assert torch.equal(part.inv_perm[part.perm], torch.arange(n))
    # After reordering, part k is exactly [offsets[k], offsets[k+1]), in original order.
    for k in range(num_parts):
        a, b = part.part_range(k)
        members = part.perm[a:b]
        assert torch.equal(members, torch.nonzero(part.parts == k).flatten())
    assert torch.equal(part.reordered_parts, part.parts[part.perm])


@pytest.mark.parametrize("method", KNOWN_METHODS)
@pytest.mark.parametrize("num_parts", [1, 2, 5, 16])
def test_every_vertex_in_exactly_one_part(make_graph, method, num_parts):
    g = make_graph(150, 600, seed=num_parts)
    part = make_partition(g, num_parts, method=method, seed=3)
    _check_partition_invariants(part, g.num_nodes, num_parts)
    assert part.method == method and part.seed == 3


def test_random_partition_is_balanced_and_seeded(make_graph):
    g = make_graph(103, 300, seed=1)
    a = random_partition(g, 10, seed=7)
    sizes = a.part_sizes
    assert int(sizes.max()) - int(sizes.min()) <= 1
    assert torch.equal(a.parts, random_partition(g, 10, seed=7).parts)
    assert not torch.equal(a.parts, random_partition(g, 10, seed=8).parts)


def test_metis_is_deterministic_for_a_seed(make_graph):
    g = make_graph(300, 1500, seed=2)
    a = metis_partition(g, 6, seed=11)
    b = metis_partition(g, 6, seed=11)
    assert torch.equal(a.parts, b.parts)


def test_metis_sees_symmetrised_graph_and_its_cut_matches_stats(make_graph, monkeypatch):
    g = make_graph(200, 900, seed=4)
    seen = {}
    real = pymetis.part_graph

    def spy(nparts, adjacency, **kw):
        seen["adj"] = adjacency
        seen["result"] = real(nparts, adjacency, **kw)
        return seen["result"]

    monkeypatch.setattr(pymetis, "part_graph", spy)
    part = metis_partition(g, 4, seed=0)
    xadj = torch.as_tensor(seen["adj"].adj_starts)
    adj = torch.as_tensor(seen["adj"].adjacent)
    n = g.num_nodes
    # Brute-force undirected simple graph of g.
    pairs = set()
    for u, v in zip(g.indices.tolist(), g.dst_index().tolist()):
        if u != v:
            pairs.add((u, v))
            pairs.add((v, u))
    got = {(int(adj[j]), v) for v in range(n) for j in range(int(xadj[v]), int(xadj[v + 1]))}
    assert int(xadj[-1]) == len(pairs) and got == pairs
    # METIS' own objective equals our undirected edge cut.
    cut, _ = undirected_edge_cut(g, part.parts, 4)
    assert cut == seen["result"].edge_cuts


def test_one_part_does_not_call_metis(make_graph, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("METIS must not run for one part")

    monkeypatch.setattr(pymetis, "part_graph", boom)
    g = make_graph(40, 100, seed=5)
    part = metis_partition(g, 1)
    assert torch.equal(part.parts, torch.zeros(40, dtype=torch.int64))
    assert torch.equal(part.perm, torch.arange(40))


def test_vertex_weights_reach_metis(make_graph, monkeypatch):
    g = make_graph(120, 500, seed=6)
    seen = {}
    real = pymetis.part_graph

    def spy(nparts, adjacency, **kw):
        seen["vweights"] = kw.get("vweights")
        return real(nparts, adjacency, **kw)

    monkeypatch.setattr(pymetis, "part_graph", spy)
    metis_partition(g, 3, vertex_weights="degree")
    assert torch.equal(torch.as_tensor(seen["vweights"]), g.in_degree + 1)
    w = torch.arange(1, 121)
    metis_partition(g, 3, vertex_weights=w)
    assert torch.equal(torch.as_tensor(seen["vweights"]), w)
    metis_partition(g, 3)
    assert seen["vweights"] is None


@pytest.mark.parametrize(
    "weights, needle",
    [(torch.zeros(120, dtype=torch.int64), ">= 1"), (torch.ones(7), "N=120"),
     (torch.full((120,), 1.5), "integers"), ("heavy", "'heavy'")],
)
def test_bad_vertex_weights(make_graph, weights, needle):
    g = make_graph(120, 500, seed=6)
    with pytest.raises(PartitionError, match=needle):
        metis_partition(g, 3, vertex_weights=weights)


@pytest.mark.parametrize("method", KNOWN_METHODS)
@pytest.mark.parametrize("num_parts", [0, -2, 51])
def test_impossible_part_counts_name_both_numbers(make_graph, method, num_parts):
    g = make_graph(50, 100, seed=7)
    with pytest.raises(PartitionError) as err:
        make_partition(g, num_parts, method=method)
    msg = str(err.value)
    assert "\n" not in msg and "N=50" in msg and f"num_parts={num_parts}" in msg


def test_unknown_method_lists_known_ones(make_graph):
    g = make_graph(50, 100, seed=7)
    with pytest.raises(PartitionError) as err:
        make_partition(g, 2, method="spectral")
    msg = str(err.value)
    assert "'spectral'" in msg and all(m in msg for m in KNOWN_METHODS)


def test_random_method_rejects_weights(make_graph):
    g = make_graph(50, 100, seed=7)
    with pytest.raises(PartitionError, match="metis"):
        make_partition(g, 2, method="random", vertex_weights="degree")


def test_from_parts_rejects_out_of_range_ids():
    with pytest.raises(PartitionError, match=r"\[0, 3\)"):
        Partition.from_parts(torch.tensor([0, 3, 1]), 3)


@pytest.mark.parametrize("method", KNOWN_METHODS)
def test_reorder_permutes_everything_consistently(make_graph, dense, method):
    g = make_graph(90, 400, seed=8)
    part = make_partition(g, 5, method=method, seed=1)
    r = reorder(g, part)
    r.validate()
    perm = part.perm
    # A_new[i, j] = A_old[perm[i], perm[j]], multiplicities included.
    a_old, a_new = dense(g), dense(r)
    assert torch.equal(a_new, a_old[perm][:, perm])
    assert r.num_edges == g.num_edges
    assert torch.equal(r.features, g.features[perm])
    assert torch.equal(r.labels, g.labels[perm])
    for key in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(r, key), getattr(g, key)[perm])
    assert r.num_classes == g.num_classes and r.name == g.name


def test_reorder_rejects_partition_of_another_graph(make_graph):
    g = make_graph(90, 400, seed=8)
    part = random_partition(make_graph(60, 100, seed=9), 3)
    with pytest.raises(PartitionError, match="N=60"):
        reorder(g, part)


def test_mapping_helpers_round_trip(make_graph):
    g = make_graph(80, 300, seed=10)
    part = random_partition(g, 4, seed=2)
    r = reorder(g, part)
    old = torch.randint(0, 80, (25,))
    assert torch.equal(part.to_original_nid(part.to_reordered_nid(old)), old)
    # Row mappings: features of the reordered graph map back to the original ones.
    assert torch.equal(part.rows_to_original(r.features), g.features)
    assert torch.equal(part.rows_to_reordered(g.features), r.features)
    x = torch.randn(80, 2, 3)
    assert torch.equal(part.rows_to_original(part.rows_to_reordered(x)), x)
    with pytest.raises(PartitionError, match="N=80"):
        part.rows_to_original(torch.zeros(79, 2))


def test_symmetric_adjacency_equals_graph_symmetrize(make_graph):
    from gnnpipe.partition.core import symmetric_adjacency

    g = make_graph(130, 500, seed=12)
    indptr, indices = symmetric_adjacency(g)
    want = g.symmetrize().remove_self_loops()
    assert torch.equal(torch.from_numpy(indptr), want.indptr)
    assert torch.equal(torch.from_numpy(indices), want.indices)


def test_symmetric_adjacency_keeps_a_pair_of_many_parallel_edges_and_drops_self_loops():
    # 256 parallel edges 0 -> 1 (their count once wrapped to 0 in int8, and the pair
    # vanished from what METIS sees) and a self-loop on 2.
    from gnnpipe.data import Graph
    from gnnpipe.partition.core import symmetric_adjacency

    n = 4
    src = torch.tensor([0] * 256 + [2, 2])
    dst = torch.tensor([1] * 256 + [3, 2])
    g = Graph.from_edge_index(torch.stack([src, dst]), torch.zeros(n, 1), torch.zeros(n, dtype=torch.int64),
                              train_mask=torch.ones(n, dtype=torch.bool), num_classes=1, name="multi")
    indptr, indices = symmetric_adjacency(g)
    assert indptr.tolist() == [0, 1, 2, 3, 4] and indices.tolist() == [1, 0, 3, 2]
