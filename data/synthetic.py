"""A seeded contextual stochastic block model with heavy-tailed degrees.

Why: the default job of ``python -m gnnpipe.train`` and every benchmark above the size of
the shared datasets need a graph of any size, with a learnable task on which message
passing helps (so that staleness and exactness effects are visible in accuracy).

Model (all vectorised; no Python loop over vertices or edges):

1. Labels: each vertex draws one of ``num_classes`` classes uniformly.
2. Degree propensities: ``theta_v`` is Pareto distributed with tail exponent
   ``degree_exponent`` (P(theta > t) ~ t^-(exponent-1)), capped at ``sqrt(N)`` so that
   no vertex dominates a small graph. Expected degrees are proportional to ``theta``.
3. Edges (degree-corrected SBM): ``N * avg_degree / 2`` candidate pairs. One end ``u``
   is drawn with probability proportional to ``theta``; with probability ``homophily``
   the other end is drawn (again proportional to ``theta``) from ``u``'s class, else from
   a uniformly chosen other class. Self-loops and repeated pairs are dropped, and every
   pair is stored in both directions, so the graph is symmetric with mean degree
   slightly below ``avg_degree``.
4. Features (contextual part): class means ``mu_c ~ N(0, feature_signal^2 I_F)`` and
   ``x_v = mu_{y_v} + feature_noise * N(0, I_F)``: the features alone are a noisy
   signal, and averaging over (mostly same-class) neighbours denoises it.
5. Split: random fractions ``train_frac`` / ``val_frac``, the rest test.

The defaults (:data:`SYNTHETIC_DEFAULTS`) are the default job: 20 000 vertices, mean
degree ~4 (the sparsity of the Planetoid citation graphs), homophily 0.93, 64 features
with a weak class signal (0.15 against noise 1), 8 classes, 5 % training vertices.
They are chosen so that depth pays, as gnnpipe exists for deep GNNs: a vertex's own
features and its few neighbours say little, and the label signal decays slowly per
hop (0.93 - 0.07 / 7 = 0.92, derived from the generator), so aggregating over many
hops denoises further. On them a linear model on the raw features is clearly worse
than the same model on two-hop GCN-normalised features (SGC), which is clearly worse
than on eight-hop features, itself below 100 % (tests/data/test_synthetic.py checks
this; bench/depth_probe.py measures every hop count). gnnpipe 0.1's defaults were
homophily 0.6, feature signal 0.22, mean degree 10, where two hops were best and
deeper models lost accuracy; the systems benchmarks keep that graph
(``bench/graphs.py``).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from gnnpipe.data.graph import Graph
from gnnpipe.data.splits import fraction_split
from gnnpipe.errors import DataError

__all__ = ["synthetic_graph", "check_synthetic_options", "SYNTHETIC_DEFAULTS", "GENERATOR_VERSION"]

logger = logging.getLogger(__name__)

#: Part of the cache key of generated graphs: bump it whenever the generator's output
#: for given options changes.
GENERATOR_VERSION = 1

#: The defaults of :func:`synthetic_graph` (the default job of ``python -m gnnpipe.train``).
SYNTHETIC_DEFAULTS: dict[str, Any] = {
    "num_nodes": 20_000,
    "num_features": 64,
    "num_classes": 8,
    "avg_degree": 4.0,
    "homophily": 0.93,
    "degree_exponent": 2.5,
    "feature_signal": 0.15,
    "feature_noise": 1.0,
    "train_frac": 0.05,
    "val_frac": 0.15,
    "seed": 0,
}


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    """A finite int or float (bools and strings are not numbers here)."""
    return (_is_int(v) or isinstance(v, (float, np.floating))) and bool(np.isfinite(v))


def _check(cond: bool, what: str, expected: str, found: Any) -> None:
    if not cond:
        raise DataError(f"synthetic: {what} must be {expected}, found {found!r}")


def check_synthetic_options(
    num_nodes: Any, num_features: Any, num_classes: Any, avg_degree: Any, homophily: Any, degree_exponent: Any,
    feature_signal: Any, feature_noise: Any, train_frac: Any, val_frac: Any, seed: Any, name: Any,
) -> None:
    """DataError (one line naming the option) for a value of the wrong type or range;
    the registry calls it before the cache is looked at, :func:`synthetic_graph` too."""
    _check(_is_int(num_nodes) and num_nodes >= 2, "num_nodes", "an integer >= 2", num_nodes)
    _check(_is_int(num_features) and num_features >= 1, "num_features", "an integer >= 1", num_features)
    _check(_is_int(num_classes) and 2 <= num_classes <= num_nodes, "num_classes",
           f"an integer in [2, num_nodes={num_nodes}]", num_classes)
    _check(_is_real(avg_degree) and 0 < avg_degree < num_nodes, "avg_degree", f"a number in (0, num_nodes={num_nodes})",
           avg_degree)
    _check(_is_real(homophily) and 0.0 <= homophily <= 1.0, "homophily", "a number in [0, 1]", homophily)
    _check(_is_real(degree_exponent) and degree_exponent > 2.0, "degree_exponent", "a number > 2 (finite mean degree)",
           degree_exponent)
    _check(_is_real(feature_signal) and _is_real(feature_noise) and feature_signal >= 0 and feature_noise >= 0,
           "feature_signal/feature_noise", "numbers >= 0", (feature_signal, feature_noise))
    _check(_is_real(train_frac) and _is_real(val_frac) and 0 < train_frac and 0 <= val_frac
           and train_frac + val_frac <= 1, "train_frac/val_frac",
           "numbers with train_frac > 0, val_frac >= 0, sum <= 1", (train_frac, val_frac))
    _check(_is_int(seed) and seed >= 0, "seed", "an integer >= 0", seed)
    _check(isinstance(name, str), "name", "a string", name)


def synthetic_graph(
    num_nodes: int = SYNTHETIC_DEFAULTS["num_nodes"],
    num_features: int = SYNTHETIC_DEFAULTS["num_features"],
    num_classes: int = SYNTHETIC_DEFAULTS["num_classes"],
    avg_degree: float = SYNTHETIC_DEFAULTS["avg_degree"],
    homophily: float = SYNTHETIC_DEFAULTS["homophily"],
    degree_exponent: float = SYNTHETIC_DEFAULTS["degree_exponent"],
    feature_signal: float = SYNTHETIC_DEFAULTS["feature_signal"],
    feature_noise: float = SYNTHETIC_DEFAULTS["feature_noise"],
    train_frac: float = SYNTHETIC_DEFAULTS["train_frac"],
    val_frac: float = SYNTHETIC_DEFAULTS["val_frac"],
    seed: int = SYNTHETIC_DEFAULTS["seed"],
    name: str = "synthetic",
) -> Graph:
    """Generate the contextual SBM described in the module docstring (deterministic in ``seed``).

    Shapes: features float32 [num_nodes, num_features]; labels int64 [num_nodes].
    """
    check_synthetic_options(num_nodes, num_features, num_classes, avg_degree, homophily, degree_exponent,
                            feature_signal, feature_noise, train_frac, val_frac, seed, name)
    n, c = int(num_nodes), int(num_classes)
    rng = np.random.default_rng(seed)

    labels = rng.integers(0, c, size=n)
    # Pareto(xm=1) propensities via the inverse CDF, capped at sqrt(N).
    theta = (1.0 - rng.random(n)) ** (-1.0 / (degree_exponent - 1.0))
    np.minimum(theta, max(np.sqrt(n), 1.0), out=theta)

    # Vertices grouped by class, with cumulative propensity within the grouped order, so
    # that "a vertex of class k proportional to theta" is one searchsorted.
    by_class = np.argsort(labels, kind="stable")
    cum = np.cumsum(theta[by_class])
    class_count = np.bincount(labels, minlength=c)
    class_end = np.cumsum(class_count)
    class_start = class_end - class_count
    cum_before = np.where(class_start > 0, cum[np.maximum(class_start - 1, 0)], 0.0)
    class_mass = cum[np.maximum(class_end - 1, 0)] - cum_before
    # An empty class can never be chosen as the target (mass 0 handled by same-class fallback).

    num_pairs = int(round(n * avg_degree / 2.0))
    cum_all = np.cumsum(theta)
    # The pairs are exchangeable, so the first ends may be drawn in sorted order: sorted
    # queries make this searchsorted sequential in memory (several times faster).
    u = np.searchsorted(cum_all, np.sort(rng.random(num_pairs)) * cum_all[-1], side="right")
    np.minimum(u, n - 1, out=u)
    cu = labels[u]
    other = (cu + rng.integers(1, c, size=num_pairs)) % c
    tgt_class = np.where(rng.random(num_pairs) < homophily, cu, other)
    tgt_class = np.where(class_count[tgt_class] > 0, tgt_class, cu)
    pos = np.searchsorted(cum, cum_before[tgt_class] + rng.random(num_pairs) * class_mass[tgt_class], side="right")
    pos = np.clip(pos, class_start[tgt_class], class_end[tgt_class] - 1)
    v = by_class[pos]
    del cu, other, tgt_class, pos

    # Canonical unordered pairs, without self-loops and repeats, then both directions.
    a, b = np.minimum(u, v), np.maximum(u, v)
    keep = a != b
    # Sort + adjacent comparison: much faster than np.unique's hash path on 10^7 keys.
    pair_key = np.sort(a[keep] * n + b[keep])
    if pair_key.size:
        pair_key = pair_key[np.concatenate(([True], pair_key[1:] != pair_key[:-1]))]
    del a, b, keep, u, v
    a, b = pair_key // n, pair_key % n
    del pair_key
    edge_index = torch.from_numpy(np.stack([np.concatenate([a, b]), np.concatenate([b, a])]))
    del a, b

    mu = rng.standard_normal((c, int(num_features)), dtype=np.float32) * np.float32(feature_signal)
    feats = rng.standard_normal((n, int(num_features)), dtype=np.float32)
    feats *= np.float32(feature_noise)
    feats += mu[labels]

    y = torch.from_numpy(labels.astype(np.int64))
    train, val, test = fraction_split(y, train=train_frac, val=val_frac, test=1.0 - train_frac - val_frac, seed=seed + 1)
    graph = Graph.from_edge_index(edge_index, torch.from_numpy(feats), y, num_nodes=n, num_classes=c,
                                  train_mask=train, val_mask=val, test_mask=test, name=name)
    logger.info("synthetic graph: N=%d, E=%d (directed, symmetric), F=%d, C=%d", n, graph.num_edges, num_features, c)
    return graph.validate()
