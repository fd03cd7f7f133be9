"""The ``normalize_features`` loader option and Graph.row_normalize_features."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.data import Graph, load_dataset
from gnnpipe.errors import DataError


def test_rows_sum_to_one_and_zero_rows_stay_zero():
    x = torch.tensor([[1.0, 3.0, 0.0], [0.0, 0.0, 0.0], [2.0, 2.0, 4.0]])
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), x, torch.tensor([0, 1, 0]),
                              train_mask=torch.tensor([True, False, False]))
    expected = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 0.0], [0.25, 0.25, 0.5]])
    assert torch.equal(g.row_normalize_features().features, expected)
    assert torch.equal(g.features, x)  # the graph itself is unchanged


def test_load_dataset_option_normalises_after_the_cache():
    raw = load_dataset("synthetic", num_nodes=300, seed=1)
    normed = load_dataset("synthetic", num_nodes=300, seed=1, normalize_features=True)
    assert torch.equal(normed.features, raw.row_normalize_features().features)
    assert torch.equal(load_dataset("synthetic", num_nodes=300, seed=1).features, raw.features)
    with pytest.raises(DataError, match="normalize_features"):
        load_dataset("synthetic", num_nodes=300, normalize_features="yes")


def test_cora_through_the_option_matches_row_sums(datasets_root):
    g = load_dataset("cora", root=datasets_root, normalize_features=True)
    assert g.sparse_features  # normalised in place of the CSR values
    sums = g.features.to_dense().sum(dim=1)
    nonzero = sums > 0
    assert torch.allclose(sums[nonzero], torch.ones(int(nonzero.sum())), atol=1e-6)
