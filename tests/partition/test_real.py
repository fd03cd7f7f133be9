"""Partition quality on a real graph (Cora from the shared datasets)."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.partition import build_chunk_plans, chunk_graph


@pytest.fixture(scope="module")
def cora(datasets_root):
    import gnnpipe.data

    if not hasattr(gnnpipe.data, "load_dataset"):
        pytest.skip("gnnpipe.data.load_dataset is not available yet")
    return gnnpipe.data.load_dataset("cora", root=datasets_root)


def test_metis_cuts_at_most_a_third_of_random_on_cora(cora):
    metis = chunk_graph(cora, 8, method="metis", seed=0, cache=False)
    rand = chunk_graph(cora, 8, method="random", seed=0, cache=False)
    assert metis.stats.edge_cut * 3 <= rand.stats.edge_cut
    assert metis.stats.M < rand.stats.M
    assert metis.stats.balance <= 1.1


def test_cora_chunks_cover_every_edge_once(cora):
    cg = chunk_graph(cora, 8, cache=False)
    assert sum(p.num_edges for p in cg.plans) == cora.num_edges
    assert sum(p.num_own for p in cg.plans) == cora.num_nodes
    # Reassemble the global COO from the plans and compare with the reordered graph.
    src, dst = [], []
    for p in cg.plans:
        src.append(p.local_global_nid[p.indices])
        dst.append(p.own_global_nid[p.dst_local()])
    key = torch.cat(dst) * cora.num_nodes + torch.cat(src)
    want = cg.graph.dst_index() * cora.num_nodes + cg.graph.indices
    assert torch.equal(torch.sort(key).values, torch.sort(want).values)
    assert cora.sparse_features and cg.graph.sparse_features
    assert cg.partition.rows_to_original(cg.graph.features).equal(cora.features)
    assert len(build_chunk_plans(cg.graph, cg.offsets)) == 8
