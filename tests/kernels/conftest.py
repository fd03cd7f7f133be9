"""Small random graphs with every awkward case the kernels must handle: isolated
vertices, self-loops, duplicate edges, rows without in-edges, empty chunks and
chunks without halo."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.data import Graph


def random_graph(num_nodes: int, num_edges: int, seed: int, *, num_isolated: int = 3) -> Graph:
    """A random directed multigraph: ``num_isolated`` vertices touch no edge, about a
    tenth of the edges are duplicated and a few self-loops are added."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randperm(num_nodes, generator=g)
    isolated, active = ids[:num_isolated], ids[num_isolated:]
    pick = lambda k: active[torch.randint(0, active.numel(), (k,), generator=g)]  # noqa: E731
    src, dst = pick(num_edges), pick(num_edges)
    dup = torch.randint(0, num_edges, (max(1, num_edges // 10),), generator=g)
    loops = pick(4)
    edge_index = torch.stack([torch.cat([src, src[dup], loops]), torch.cat([dst, dst[dup], loops])])
    graph = Graph.from_edge_index(
        edge_index, torch.randn(num_nodes, 3, generator=g), torch.zeros(num_nodes, dtype=torch.int64),
        num_classes=2, name=f"random{seed}",
    )
    assert bool((graph.in_degree[isolated] == 0).all())
    return graph


def two_component_graph(seed: int) -> tuple[Graph, torch.Tensor]:
    """Two disconnected random blocks [0, 12) and [12, 20): splitting at 12 gives two
    chunks with halo 0. Returns the graph and those offsets."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, 12, (2, 40), generator=g)
    b = torch.randint(12, 20, (2, 25), generator=g)
    edge_index = torch.cat([a, b, a[:, :3]], dim=1)
    graph = Graph.from_edge_index(edge_index, torch.randn(20, 3, generator=g), torch.zeros(20, dtype=torch.int64), num_classes=2)
    return graph, torch.tensor([0, 12, 20])


@pytest.fixture
def make_random_graph():
    """The :func:`random_graph` factory (fixtures, as importlib mode forbids sibling imports)."""
    return random_graph


@pytest.fixture
def make_two_component_graph():
    """The :func:`two_component_graph` factory."""
    return two_component_graph
