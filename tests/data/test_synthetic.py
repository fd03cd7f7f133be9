"""The synthetic contextual SBM: determinism, structure, and a task on which graph
aggregation clearly helps (checked with logistic regression on raw vs SGC features)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnpipe.data import SYNTHETIC_DEFAULTS, load_dataset, synthetic_graph
from gnnpipe.errors import DataError

FIELDS = ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask")


@pytest.fixture(scope="module")
def default_graph():
    return synthetic_graph()


def test_defaults_shape_and_split(default_graph):
    g = default_graph
    d = SYNTHETIC_DEFAULTS
    assert (g.num_nodes, g.num_features, g.num_classes) == (d["num_nodes"], d["num_features"], d["num_classes"])
    assert int(g.train_mask.sum()) == int(d["train_frac"] * d["num_nodes"])
    assert int(g.val_mask.sum()) == int(d["val_frac"] * d["num_nodes"])
    n_test = int((1 - d["train_frac"] - d["val_frac"]) * d["num_nodes"])
    assert abs(int(g.test_mask.sum()) - n_test) <= 1
    g.validate()


def test_symmetric_simple_and_near_requested_degree(default_graph):
    g = default_graph
    assert g.is_symmetric()
    assert g.remove_self_loops().num_edges == g.num_edges
    assert g.remove_duplicate_edges().num_edges == g.num_edges
    mean_deg = g.num_edges / g.num_nodes
    # Dropped self-loops and repeated pairs cost a little of the requested mean degree.
    assert 0.9 * SYNTHETIC_DEFAULTS["avg_degree"] <= mean_deg <= SYNTHETIC_DEFAULTS["avg_degree"]


def test_heavy_tailed_degrees(default_graph):
    deg = default_graph.in_degree.double()
    assert float(deg.max()) > 20 * float(deg.median())
    # Power-law tail: the top 1 % of vertices hold far more than 1 % of the edge ends.
    top = torch.topk(deg, deg.numel() // 100).values.sum() / deg.sum()
    assert float(top) > 0.05


def test_edge_homophily_follows_option():
    for h in (0.2, 0.8):
        g = synthetic_graph(num_nodes=5000, homophily=h, seed=1)
        src, dst = g.edge_index()
        same = float((g.labels[src] == g.labels[dst]).double().mean())
        # A pair leaves the class with probability 1 - h and then never lands in it.
        assert abs(same - h) < 0.03


def test_seeded_and_deterministic():
    a, b = synthetic_graph(num_nodes=3000, seed=5), synthetic_graph(num_nodes=3000, seed=5)
    c = synthetic_graph(num_nodes=3000, seed=6)
    assert all(torch.equal(getattr(a, k), getattr(b, k)) for k in FIELDS)
    assert not torch.equal(a.features, c.features)
    d = load_dataset("synthetic", num_nodes=3000, seed=5)  # no root needed
    assert all(torch.equal(getattr(a, k), getattr(d, k)) for k in FIELDS)


def test_settable_options():
    g = synthetic_graph(num_nodes=2000, num_features=7, num_classes=3, avg_degree=4.0, train_frac=0.1,
                        val_frac=0.2, seed=2)
    assert (g.num_features, g.num_classes) == (7, 3)
    assert set(g.labels.unique().tolist()) == {0, 1, 2}
    assert int(g.train_mask.sum()) == 200 and int(g.val_mask.sum()) == 400
    assert 3.0 <= g.num_edges / g.num_nodes <= 4.0


@pytest.mark.parametrize(
    "kwargs",
    [dict(num_nodes=1), dict(num_classes=1), dict(homophily=1.5), dict(degree_exponent=2.0),
     dict(train_frac=0.0), dict(train_frac=0.7, val_frac=0.5), dict(avg_degree=0), dict(num_features=0)],
)
def test_bad_options_are_data_errors(kwargs):
    with pytest.raises(DataError, match="synthetic"):
        synthetic_graph(**{"num_nodes": 100, **kwargs})


def _logreg_test_accuracy(x: torch.Tensor, g, steps: int = 300) -> float:
    """Full-batch multinomial logistic regression (Adam) on the training rows."""
    torch.manual_seed(0)
    mu, sd = x[g.train_mask].mean(0), x[g.train_mask].std(0) + 1e-6
    x = (x - mu) / sd
    lin = torch.nn.Linear(x.shape[1], g.num_classes)
    opt = torch.optim.Adam(lin.parameters(), lr=0.05, weight_decay=5e-4)
    xt, yt = x[g.train_mask], g.labels[g.train_mask]
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(lin(xt), yt).backward()
        opt.step()
    with torch.no_grad():
        pred = lin(x[g.test_mask]).argmax(1)
    return float((pred == g.labels[g.test_mask]).double().mean())


def _sgc_features(g, hops: int = 2) -> torch.Tensor:
    """(D^-1/2 (A + I) D^-1/2)^hops X, computed with scipy."""
    import scipy.sparse as sp

    a = g.to_scipy()
    d = np.asarray(a.sum(1)).ravel() + 1.0
    dinv = sp.diags(1.0 / np.sqrt(d))
    ahat = (dinv @ (a + sp.eye(g.num_nodes)) @ dinv).astype(np.float32)
    x = g.features.numpy()
    for _ in range(hops):
        x = ahat @ x
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


@pytest.fixture
def one_thread():
    """Tiny full-batch fits run fastest (and least disturbed by other processes) on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_default_task_graph_aggregation_clearly_helps(default_graph, one_thread):
    g = default_graph
    raw = _logreg_test_accuracy(g.features, g)
    sgc = _logreg_test_accuracy(_sgc_features(g), g)
    chance = 1.0 / g.num_classes
    assert raw > chance + 0.15  # the features alone carry signal
    assert sgc > raw + 0.15  # two-hop aggregation is clearly better
    assert sgc < 0.95  # and the task is clearly not solved


def test_default_task_rewards_depth(default_graph, one_thread):
    """The default graph is one on which deep GNNs should win: eight hops of
    aggregation beat two clearly, and the task is still not solved."""
    g = default_graph
    two = _logreg_test_accuracy(_sgc_features(g, hops=2), g)
    eight = _logreg_test_accuracy(_sgc_features(g, hops=8), g)
    assert eight > two + 0.08  # (gnnpipe 0.1's defaults: +0.02)
    assert eight < 0.97


def test_load_dataset_caches_synthetic_by_resolved_options(monkeypatch):
    from gnnpipe.data import registry
    from gnnpipe.data.cache import cache_dir

    a = load_dataset("synthetic", num_nodes=1000, seed=3)
    calls = []
    monkeypatch.setattr(registry, "synthetic_graph", lambda **kw: calls.append(kw) or synthetic_graph(**kw))
    b = load_dataset("synthetic", num_nodes=1000, seed=3, num_classes=SYNTHETIC_DEFAULTS["num_classes"])
    assert calls == [] and all(torch.equal(getattr(a, k), getattr(b, k)) for k in FIELDS)
    load_dataset("synthetic", num_nodes=1000, seed=4)
    assert len(calls) == 1
    monkeypatch.setattr(registry, "GENERATOR_VERSION", registry.GENERATOR_VERSION + 1)
    load_dataset("synthetic", num_nodes=1000, seed=3)
    assert len(calls) == 2 and len(list(cache_dir().glob("synthetic-*.graph"))) == 3
