"""Partition quality figures against brute-force Python-loop counts."""

from __future__ import annotations

import json

import pytest
import torch

from gnnpipe.errors import PartitionError
from gnnpipe.partition import chunk_graph, make_partition, pair_counts, partition_stats


def _edges(graph):
    return list(zip(graph.indices.tolist(), graph.dst_index().tolist()))  # (u, v): u -> v


def _brute(graph, parts, num_parts):
    parts = parts.tolist()
    n = graph.num_nodes
    edges = _edges(graph)
    undirected = {(min(u, v), max(u, v)) for u, v in edges if u != v}
    cut = sum(1 for u, v in undirected if parts[u] != parts[v])
    sizes = [parts.count(p) for p in range(num_parts)]
    in_edges = [sum(1 for _, v in edges if parts[v] == p) for p in range(num_parts)]
    cut_in = sum(1 for u, v in edges if parts[u] != parts[v])
    halo = [len({u for u, v in edges if parts[v] == q and parts[u] != q}) for q in range(num_parts)]
    m = [[0] * num_parts for _ in range(num_parts)]
    for p in range(num_parts):
        for q in range(num_parts):
            if p != q:
                m[p][q] = sum(
                    1 for x in range(n)
                    if parts[x] == p and any(u == x and parts[v] == q for u, v in edges)
                )
    total_m = sum(m[p][q] for p in range(num_parts) for q in range(num_parts) if p != q)
    return dict(edge_cut=cut, num_undirected=len(undirected), sizes=sizes, in_edges=in_edges,
                cut_in=cut_in, halo=halo, m=m, total_m=total_m,
                balance=max(sizes) / (n / num_parts))


@pytest.mark.parametrize("method, num_parts, seed", [("metis", 4, 0), ("random", 5, 1), ("metis", 7, 2)])
def test_stats_equal_brute_force(make_graph, method, num_parts, seed):
    g = make_graph(80, 300, seed=seed)
    part = make_partition(g, num_parts, method=method, seed=seed)
    s = partition_stats(g, part.parts, num_parts, method=method, seed=seed)
    want = _brute(g, part.parts, num_parts)
    assert s.edge_cut == want["edge_cut"]
    assert s.num_undirected_edges == want["num_undirected"]
    assert list(s.part_sizes) == want["sizes"]
    assert list(s.part_in_edges) == want["in_edges"]
    assert s.cut_in_edges == want["cut_in"]
    assert list(s.halo_sizes) == want["halo"]
    assert s.total_halo == sum(want["halo"])
    assert [list(r) for r in s.pair_counts] == want["m"]
    assert s.M == want["total_m"]
    assert s.balance == pytest.approx(want["balance"])
    assert s.edge_cut_fraction == pytest.approx(want["edge_cut"] / want["num_undirected"])
    assert torch.equal(s.pair_matrix(), torch.tensor(want["m"]))


def test_stats_do_not_depend_on_the_id_space(make_graph):
    g = make_graph(90, 350, seed=3)
    cg = chunk_graph(g, 6, method="random", seed=4, cache=False)
    s_orig = partition_stats(g, cg.partition.parts, 6, method="random", seed=4)
    assert s_orig.as_dict() == cg.stats.as_dict()
    # Halo sizes match the plans.
    assert list(cg.stats.halo_sizes) == [p.num_halo for p in cg.plans]


def test_group_pair_counts_count_each_vertex_once_per_group(make_graph):
    g = make_graph(100, 450, seed=5)
    cg = chunk_graph(g, 8, method="metis", cache=False)
    way_of_chunk = [0, 0, 1, 1, 2, 2, 3, 3]
    got = cg.group_pair_counts(way_of_chunk)
    way = torch.tensor(way_of_chunk)[cg.partition.reordered_parts].tolist()
    edges = _edges(cg.graph)
    want = torch.zeros(4, 4, dtype=torch.int64)
    for w in range(4):
        for w2 in range(4):
            if w != w2:
                want[w, w2] = len({u for u, v in edges if way[u] == w and way[v] == w2})
    assert torch.equal(got, want)
    # One group per chunk gives the chunk-level matrix.
    assert torch.equal(cg.group_pair_counts(list(range(8))), cg.stats.pair_matrix())
    with pytest.raises(PartitionError, match="num_chunks=8"):
        cg.group_pair_counts([0, 1])


def test_as_dict_is_json_and_table_lists_every_part(make_graph):
    g = make_graph(60, 200, seed=6)
    cg = chunk_graph(g, 3, method="random", cache=False)
    d = json.loads(json.dumps(cg.stats.as_dict()))
    assert d["edge_cut"] == cg.stats.edge_cut and d["pair_counts"] == [list(r) for r in cg.stats.pair_counts]
    table = cg.stats.format_table()
    for p in range(3):
        assert any(line.split()[:2] == [str(p), str(cg.stats.part_sizes[p])] for line in table.splitlines())
    assert f"edge cut {cg.stats.edge_cut} of" in table


def test_pair_counts_reject_bad_parts(make_graph):
    g = make_graph(60, 200, seed=6)
    with pytest.raises(PartitionError, match="N=60"):
        pair_counts(g, torch.zeros(5, dtype=torch.int64), 2)
    with pytest.raises(PartitionError, match=r"\[0, 2\)"):
        pair_counts(g, torch.full((60,), 2), 2)
