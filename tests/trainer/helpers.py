"""A small, easy, seeded graph for trainer tests (no dataset files needed).

Planted partition: vertices of the same class are linked with high probability and
features are a noisy class signal, so a short run separates the classes well.
"""

from __future__ import annotations

import torch

from gnnpipe.data import Graph


def easy_graph(num_nodes: int = 300, num_classes: int = 3, num_features: int = 16,
               seed: int = 0, noise: float = 1.0, name: str = "easy") -> Graph:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (num_nodes,), generator=g)
    centers = torch.randn(num_classes, num_features, generator=g) * 1.5
    x = centers[y] + noise * torch.randn(num_nodes, num_features, generator=g)
    # ~6 same-class and ~1 random neighbour per vertex, both directions, no self-loops.
    src, dst = [], []
    for _ in range(6):
        s = torch.arange(num_nodes)
        # pair each vertex with a random vertex of its own class
        same = torch.empty(num_nodes, dtype=torch.long)
        for c in range(num_classes):
            idx = (y == c).nonzero().flatten()
            same[idx] = idx[torch.randperm(idx.numel(), generator=g)]
        src += [s, same]
        dst += [same, s]
    noise_dst = torch.randint(0, num_nodes, (num_nodes,), generator=g)
    src += [torch.arange(num_nodes), noise_dst]
    dst += [noise_dst, torch.arange(num_nodes)]
    ei = torch.stack([torch.cat(src), torch.cat(dst)])
    order = torch.randperm(num_nodes, generator=g)
    n_tr, n_va = num_nodes // 2, num_nodes // 4
    return Graph.from_edge_index(
        ei, x, y, num_nodes=num_nodes, num_classes=num_classes,
        train_mask=order[:n_tr], val_mask=order[n_tr:n_tr + n_va], test_mask=order[n_tr + n_va:],
        name=name,
    ).remove_duplicate_edges().remove_self_loops().validate()
