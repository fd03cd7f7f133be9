"""Sparse (CSR) features through partitioning: the reorder permutes their rows exactly
as it permutes dense rows, the row mappings invert it, and every chunk's [own | halo]
rows are the dense ones."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.partition import chunk_graph, make_partition, reorder


def _sparse_version(g, seed: int = 0):
    """``g`` with bag-of-words-like features (about 10 % non-zero, some empty rows),
    dense and sparse."""
    gen = torch.Generator().manual_seed(seed)
    n = g.num_nodes
    x = torch.randint(1, 6, (n, 40), generator=gen).float() * (torch.rand(n, 40, generator=gen) < 0.1)
    x[::7] = 0.0
    dense = g.replace(features=x).validate()
    return dense, dense.with_feature_layout(True)


@pytest.mark.parametrize("method", ["metis", "random"])
def test_reorder_permutes_sparse_rows_like_dense(make_graph, method):
    dense, sparse = _sparse_version(make_graph(90, 400, seed=8))
    assert sparse.sparse_features
    part = make_partition(dense, 5, method=method, seed=1)
    rd, rs = reorder(dense, part), reorder(sparse, part)
    assert rs.sparse_features and rs.validate() is rs
    assert torch.equal(rs.features.to_dense(), rd.features)
    assert torch.equal(rd.features, dense.features[part.perm])
    for k in ("indptr", "indices", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(rs, k), getattr(rd, k))
    assert part.rows_to_original(rs.features).equal(sparse.features)
    assert part.rows_to_reordered(sparse.features).equal(rs.features)


def test_chunk_rows_of_sparse_features_equal_dense(make_graph):
    dense, sparse = _sparse_version(make_graph(120, 500, seed=3), seed=1)
    cd = chunk_graph(dense, 4, method="metis", seed=0, cache=False)
    cs = chunk_graph(sparse, 4, method="metis", seed=0)  # through the partition cache
    assert cs.graph.sparse_features
    assert torch.equal(cs.partition.perm, cd.partition.perm)
    assert any(p.num_halo for p in cs.plans)
    for ps, pd in zip(cs.plans, cd.plans):
        rows = cs.graph.features[ps.local_global_nid]  # as graph mode reads them
        assert rows.check() is None
        assert torch.equal(rows.to_dense(), cd.graph.features[pd.local_global_nid])
        own = cs.graph.features[ps.row_start:ps.row_end]
        assert torch.equal(own.to_dense(), cd.graph.features[pd.row_start:pd.row_end])
