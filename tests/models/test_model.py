"""Model-level tests: structure, shapes, depth, seeding, parameter groups, config
errors, and the whole model computed chunk by chunk (as graph parallelism does)
against the whole-graph reference forward."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gnnpipe.errors import ConfigError
from gnnpipe.kernels import ChunkOps
from gnnpipe.models import MODEL_NAMES, DeepGNN, build_model
from gnnpipe.partition.plan import build_chunk_plans, whole_graph_plan

from .test_layers import OFFSETS, random_graph

DT = torch.float64
F_IN, C = 6, 3


def cfg(model: str, layers: int, hidden: int = 5, **kw) -> SimpleNamespace:
    base = dict(model=model, layers=layers, hidden=hidden, dropout=0.0, alpha=0.1, lambda_=0.5,
                input_proj=None, classifier=None)
    base.update(kw)
    return SimpleNamespace(**base)


@pytest.fixture(scope="module")
def graph():
    return random_graph(feat=F_IN, classes=C)


@pytest.fixture(scope="module")
def whole_ops(graph):
    return ChunkOps.build(whole_graph_plan(graph), dtype=DT)


@pytest.fixture(scope="module")
def chunks(graph):
    return [(p, ChunkOps.build(p, dtype=DT)) for p in build_chunk_plans(graph, OFFSETS)]


def chunked_forward(model: DeepGNN, x: torch.Tensor, chunks) -> torch.Tensor:
    """Graph-parallel evaluation: every layer over all chunks from the previous layer's
    full output (gathering [own | halo] rows), encode/decode per chunk of rows."""
    h0 = torch.cat([model.encode(x[p.row_start:p.row_end]) for p, _ in chunks])
    h = h0
    for layer in model.layers:
        h = torch.cat([
            layer(h[p.local_global_nid], ops, h0[p.row_start:p.row_end] if layer.needs_h0 else None)
            for p, ops in chunks
        ])
    return torch.cat([model.decode(h[p.row_start:p.row_end]) for p, _ in chunks])


@pytest.mark.parametrize("model_name", MODEL_NAMES)
@pytest.mark.parametrize("depth", [2, 8])
def test_model_shapes_and_layer_dims(graph, whole_ops, model_name, depth):
    torch.manual_seed(0)
    model = build_model(cfg(model_name, depth), F_IN, C).to(DT)
    assert len(model.layers) == depth
    # GCNII / ResGCN+ project F -> H and classify H -> C; the plain models read F in
    # layer 1 and write C in the last (PyG's models.GCN convention).
    structured = model_name in ("gcnii", "resgcn+")
    assert model.layer_dims == ([5] * (depth + 1) if structured else [F_IN] + [5] * (depth - 1) + [C])
    assert [l.in_dim for l in model.layers] == model.layer_dims[:-1]
    assert [l.out_dim for l in model.layers] == model.layer_dims[1:]
    assert model.needs_h0 == (model_name == "gcnii")
    logits = model(graph.features.to(DT), whole_ops)
    assert logits.shape == (graph.num_nodes, C)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("model_name", MODEL_NAMES)
@pytest.mark.parametrize("depth", [2, 8])
def test_model_chunked_equals_whole_graph(graph, whole_ops, chunks, model_name, depth):
    torch.manual_seed(0)
    model = build_model(cfg(model_name, depth), F_IN, C).to(DT)
    x = graph.features.to(DT)
    w = torch.randn(graph.num_nodes, C, generator=torch.Generator().manual_seed(1), dtype=DT)

    model.zero_grad()
    ref = model(x, whole_ops)
    (ref * w).sum().backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    out = chunked_forward(model, x, chunks)
    (out * w).sum().backward()

    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
    for (name, p), g in zip(model.named_parameters(), ref_grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-10, atol=1e-12, msg=lambda m: f"{name}: {m}")
    assert any(g.abs().sum() > 0 for g in ref_grads)


def test_depth_128_gcnii_trains_a_step(graph, whole_ops):
    torch.manual_seed(0)
    model = build_model(cfg("gcnii", 128, hidden=4, dropout=0.5), F_IN, C)
    ops = ChunkOps.build(whole_graph_plan(graph))
    model.train()
    logits = model(graph.features, ops)
    assert logits.shape == (graph.num_nodes, C) and len(model.layers) == 128
    loss = torch.nn.functional.cross_entropy(logits, graph.labels)
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    # Identity mapping keeps the deepest layer's gradient alive.
    assert model.layers[0].weight.grad.abs().sum() > 0


def test_kipf_welling_two_layer_gcn_structure(graph, whole_ops):
    """input_proj=False, classifier=False: conv F->16, ReLU, conv 16->C, nothing else."""
    torch.manual_seed(0)
    model = build_model(cfg("gcn", 2, hidden=16, input_proj=False, classifier=False), F_IN, C).to(DT)
    assert model.layer_dims == [F_IN, 16, C]
    assert list(model.dense_parameters()) == []
    shapes = sorted(tuple(p.shape) for p in model.parameters())
    assert shapes == sorted([(F_IN, 16), (16,), (16, C), (C,)])
    x = graph.features.to(DT)
    l1, l2 = model.layers
    expected = l2(l1(x, whole_ops), whole_ops)
    assert not l2.activation and l1.activation
    torch.testing.assert_close(model(x, whole_ops), expected, rtol=0, atol=0)
    assert (expected < 0).any()  # raw logits: no activation on the last layer


@pytest.mark.parametrize("model_name", MODEL_NAMES)
def test_same_seed_gives_identical_parameters(model_name):
    def build(seed):
        torch.manual_seed(seed)
        return build_model(cfg(model_name, 4), F_IN, C)

    a, b, c = build(7), build(7), build(8)
    for (na, pa), (nb, pb), (_, pc) in zip(a.named_parameters(), b.named_parameters(), c.named_parameters()):
        assert na == nb
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()))


@pytest.mark.parametrize("model_name", MODEL_NAMES)
def test_layer_and_dense_parameters_partition_all_parameters(model_name):
    torch.manual_seed(0)
    # The plain models have no projection or classifier by default: opt in, so that
    # both groups are non-empty.
    model = build_model(cfg(model_name, 3, input_proj=True, classifier=True), F_IN, C)
    layer_ids = {id(p) for p in model.layer_parameters()}
    dense_ids = {id(p) for p in model.dense_parameters()}
    assert layer_ids and dense_ids and not (layer_ids & dense_ids)
    assert layer_ids | dense_ids == {id(p) for p in model.parameters()}
    assert layer_ids == {id(p) for p in model.layers.parameters()}


def test_build_model_accepts_the_model_config_dataclass():
    from gnnpipe.config import ModelConfig

    torch.manual_seed(0)
    m = build_model(ModelConfig(model="gcnii", layers=4, hidden=8, dropout=0.6, alpha=0.2, lambda_=1.0), F_IN, C)
    assert m.model_name == "gcnii" and m.layer_dims == [8] * 5
    assert m.layers[0].alpha == 0.2 and m.layers[0].lambda_ == 1.0 and m.layers[0].dropout == 0.6


@pytest.mark.parametrize("bad,needle", [
    (dict(model="gat"), "model"),
    (dict(model=None), "model"),
    (dict(layers=0), "layers"),
    (dict(layers=2.5), "layers"),
    (dict(hidden=0), "hidden"),
    (dict(dropout=1.0), "dropout"),
    (dict(dropout=-0.1), "dropout"),
    (dict(alpha=1.5), "alpha"),
    (dict(lambda_=0.0), "lambda_"),
    (dict(model="gcnii", input_proj=False), "input_proj"),
    (dict(model="gcnii", classifier=False), "classifier"),
    (dict(model="resgcn+", classifier=False), "classifier"),
    (dict(input_proj="yes"), "input_proj"),
])
def test_bad_config_raises_config_error(bad, needle):
    c = cfg("gcn", 2)
    for k, v in bad.items():
        setattr(c, k, v)
    with pytest.raises(ConfigError) as exc:
        build_model(c, F_IN, C)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(needle)


def test_bad_sizes_raise_config_error():
    with pytest.raises(ConfigError, match="in_features"):
        build_model(cfg("gcn", 2), 0, C)
    with pytest.raises(ConfigError, match="num_classes"):
        build_model(cfg("gcn", 2), F_IN, 0)


@pytest.mark.parametrize("model_name", MODEL_NAMES)
def test_model_reduces_are_the_aggregations_its_forward_calls(graph, model_name):
    """``DeepGNN.reduces`` (what runners build) is exactly the set of reduces a
    training forward and backward call, so no operator is built that none reads."""
    model = build_model(cfg(model_name, 3, dropout=0.5), F_IN, C).to(DT)
    ops = ChunkOps.build(whole_graph_plan(graph), dtype=DT, reduces=model.reduces)
    called = set()
    real = ops.aggregate
    ops.aggregate = lambda x, reduce, edge_weight=None: called.add(reduce) or real(x, reduce, edge_weight)
    model.train()
    model(graph.features.to(DT), ops).sum().backward()
    assert tuple(sorted(called)) == model.reduces
    assert ops._impl.built == frozenset(model.reduces)
    expected = {"gcn": ("gcn",), "gcnii": ("gcn",), "sage": ("mean",), "resgcn+": ("mean",), "mlp": ()}
    assert model.reduces == expected[model_name]


def test_dense_input_dropout_keeps_its_mask_not_a_dropped_copy():
    """A dense input's dropout (a pipeline's stage 0 keeps it for the epoch) is the input
    itself and a bool mask, a quarter of a float copy; its rows, selected, are the rows
    of the dropout that masked_dropout draws from the same generator."""
    from gnnpipe.models.layers import masked_dropout
    from gnnpipe.models.model import InputProjection

    proj = InputProjection(9, 5, dropout=0.5).to(DT)
    x = torch.randn(40, 9, dtype=DT)
    d = proj.drop(x, torch.Generator().manual_seed(4))
    assert d.x is x and d.keep.dtype == torch.bool and d.keep.shape == x.shape
    want, scale = masked_dropout(x, 0.5, True, generator=torch.Generator().manual_seed(4))
    rows = torch.tensor([7, 0, 33])
    assert torch.equal(d.select(rows).x, want[rows]) and torch.equal(d.select(None).x, want)
    assert d.scale == scale == 2.0 and d.select(rows).keep is None
    proj.eval()
    assert proj.drop(x).keep is None and proj.drop(x).x is x
