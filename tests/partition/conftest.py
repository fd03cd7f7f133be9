"""Random multigraphs for the partition tests: isolated vertices, self-loops and
duplicate edges on purpose, ids shuffled so that the special vertices are scattered."""

from __future__ import annotations

from typing import Callable

import pytest
import torch

from gnnpipe.data import Graph


def random_multigraph(
    num_nodes: int, num_edges: int, *, seed: int, num_isolated: int = 5,
    num_self_loops: int = 6, num_duplicates: int = 20, num_features: int = 3,
) -> Graph:
    gen = torch.Generator().manual_seed(seed)
    active = num_nodes - num_isolated
    src = torch.randint(0, active, (num_edges,), generator=gen)
    dst = torch.randint(0, active, (num_edges,), generator=gen)
    dup = torch.randint(0, num_edges, (num_duplicates,), generator=gen)
    loops = torch.randint(0, active, (num_self_loops,), generator=gen)
    src = torch.cat([src, src[dup], src[dup[:3]], loops, loops[:2]])
    dst = torch.cat([dst, dst[dup], dst[dup[:3]], loops, loops[:2]])
    # Scatter the isolated vertices (ids >= active) over the id range.
    relabel = torch.randperm(num_nodes, generator=gen)
    src, dst = relabel[src], relabel[dst]
    labels = torch.randint(0, 3, (num_nodes,), generator=gen)
    mask_order = torch.randperm(num_nodes, generator=gen)
    train = torch.zeros(num_nodes, dtype=torch.bool)
    val = torch.zeros(num_nodes, dtype=torch.bool)
    train[mask_order[: num_nodes // 3]] = True
    val[mask_order[num_nodes // 3 : num_nodes // 2]] = True
    return Graph.from_edge_index(
        torch.stack([src, dst]),
        torch.randn(num_nodes, num_features, generator=gen),
        labels,
        num_nodes=num_nodes,
        train_mask=train,
        val_mask=val,
        test_mask=~(train | val),
        num_classes=3,
        name=f"random{seed}",
    ).validate()


@pytest.fixture
def make_graph() -> Callable[..., Graph]:
    return random_multigraph


def dense_adjacency(graph: Graph) -> torch.Tensor:
    """int64 [N, N]: entry (v, u) = multiplicity of edge u -> v, by a Python loop."""
    n = graph.num_nodes
    a = torch.zeros(n, n, dtype=torch.int64)
    indptr, indices = graph.indptr.tolist(), graph.indices.tolist()
    for v in range(n):
        for j in range(indptr[v], indptr[v + 1]):
            a[v, indices[j]] += 1
    return a


@pytest.fixture
def dense() -> Callable[[Graph], torch.Tensor]:
    return dense_adjacency
