"""Config dataclasses: every bad value is a one-line ConfigError naming its field;
defaults resolve; TOML loading with overrides and unknown keys."""

from __future__ import annotations

import dataclasses

import pytest

from gnnpipe.config import DataConfig, ModelConfig, ParallelConfig, RunConfig, TrainConfig
from gnnpipe.errors import ConfigError

BAD = [
    (ModelConfig, {"model": "gat"}, "model.model"),
    (ModelConfig, {"layers": 0}, "model.layers"),
    (ModelConfig, {"layers": "8"}, "model.layers"),
    (ModelConfig, {"layers": True}, "model.layers"),
    (ModelConfig, {"hidden": 0}, "model.hidden"),
    (ModelConfig, {"dropout": 1.0}, "model.dropout"),
    (ModelConfig, {"dropout": -0.1}, "model.dropout"),
    (ModelConfig, {"alpha": 1.5}, "model.alpha"),
    (ModelConfig, {"lambda_": 0.0}, "model.lambda_"),
    (ModelConfig, {"input_proj": "yes"}, "model.input_proj"),
    (TrainConfig, {"epochs": 0}, "train.epochs"),
    (TrainConfig, {"lr": 0.0}, "train.lr"),
    (TrainConfig, {"lr": -1e-3}, "train.lr"),
    (TrainConfig, {"lr": float("nan")}, "train.lr"),
    (TrainConfig, {"lr": "fast"}, "train.lr"),
    (TrainConfig, {"weight_decay": -1.0}, "train.weight_decay"),
    (TrainConfig, {"layer_weight_decay": -1.0}, "train.layer_weight_decay"),
    (TrainConfig, {"eval_every": 0}, "train.eval_every"),
    (TrainConfig, {"patience": 0}, "train.patience"),
    (TrainConfig, {"dtype": "float16"}, "train.dtype"),
    (TrainConfig, {"log_level": "LOUD"}, "train.log_level"),
    (TrainConfig, {"seed": -1}, "train.seed"),
    (DataConfig, {"dataset": ""}, "data.dataset"),
    (DataConfig, {"options": [1, 2]}, "data.options"),
    (ParallelConfig, {"mode": "data"}, "parallel.mode"),
    (ParallelConfig, {"mode": "pipeline", "workers": 0}, "parallel.workers"),
    (ParallelConfig, {"mode": "single", "workers": 2}, "parallel.workers"),
    (ParallelConfig, {"mode": "pipeline", "chunks": 0}, "parallel.chunks"),
    (ParallelConfig, {"mode": "graph", "workers": 2, "chunks": 3}, "parallel.chunks"),
    (ParallelConfig, {"mode": "pipeline", "ways": 2}, "parallel.ways"),
    (ParallelConfig, {"mode": "hybrid", "workers": 6, "ways": 4}, "parallel.ways"),
    (ParallelConfig, {"mode": "pipeline", "workers": 2, "stage_split": (4, 2, 2)}, "parallel.stage_split"),
    (ParallelConfig, {"mode": "pipeline", "workers": 2, "stage_split": (8, 0)}, "parallel.stage_split"),
    (ParallelConfig, {"partition": "kway"}, "parallel.partition"),
    (ParallelConfig, {"backend": "mpi"}, "parallel.backend"),
    (ParallelConfig, {"device": "tpu"}, "parallel.device"),
    (ParallelConfig, {"kernel_backend": "cusparse"}, "parallel.kernel_backend"),
    (ParallelConfig, {"snapshot_period": 0}, "parallel.snapshot_period"),
    (ParallelConfig, {"history_init": "ones"}, "parallel.history_init"),
]


@pytest.mark.parametrize("cls,kwargs,field_name", BAD, ids=[f"{b[2]}={list(b[1].values())[-1]!r}" for b in BAD])
def test_bad_value_raises_one_line_naming_the_field(cls, kwargs, field_name):
    with pytest.raises(ConfigError) as info:
        cls(**kwargs)
    msg = str(info.value)
    assert msg.startswith(field_name + ":")
    assert "\n" not in msg


def test_defaults_are_valid_and_roundtrip_through_dict():
    cfg = RunConfig()
    again = RunConfig.from_dict(cfg.to_dict())
    assert again == cfg
    assert again.to_dict() == cfg.to_dict()


def test_resolved_defaults_depend_on_the_mode():
    assert ParallelConfig(mode="single").chunks == 1
    pipe = ParallelConfig(mode="pipeline", workers=3)
    assert (pipe.stages, pipe.chunks, pipe.ways) == (3, 12, 1)
    graph = ParallelConfig(mode="graph", workers=4)
    assert (graph.stages, graph.chunks) == (1, 4)
    hyb = ParallelConfig(mode="hybrid", workers=4)
    assert (hyb.ways, hyb.stages, hyb.chunks) == (2, 2, 16)
    assert pipe.layer_split(8) == (3, 3, 2)
    assert sum(pipe.layer_split(8)) == 8


@pytest.mark.parametrize("model,layers,mode,workers,expected,period", [
    ("gcn", 32, "pipeline", 2, 2, 1),      # stale-sensitive: one chunk per stage, R = 1
    ("sage", 16, "pipeline", 4, 4, 1),
    ("gcn", 32, "hybrid", 4, 4, 1),        # one chunk per stage and way: 2 ways x 2 stages
    ("gcn", 8, "pipeline", 2, 8, 23),      # shallow: the 4 S default, R = 23
    ("gcnii", 32, "pipeline", 2, 8, 23),   # residual models keep 4 S and R = 23
    ("resgcn+", 64, "hybrid", 4, 16, 23),
])
def test_a_stale_sensitive_model_defaults_to_one_chunk_per_stage_and_way_and_last_epochs_history(
        model, layers, mode, workers, expected, period):
    cfg = RunConfig(model=ModelConfig(model=model, layers=layers),
                    parallel=ParallelConfig(mode=mode, workers=workers))
    assert (cfg.parallel.chunks, cfg.parallel.snapshot_period) == (expected, period)
    # The resolved count is what the record holds and what a reload gives back.
    assert RunConfig.from_dict(cfg.to_dict()) == cfg


def test_a_given_chunk_count_and_snapshot_period_are_kept_for_a_stale_sensitive_model():
    cfg = RunConfig(model=ModelConfig(model="gcn", layers=32),
                    parallel=ParallelConfig(mode="pipeline", workers=2, chunks=8, snapshot_period=23))
    assert (cfg.parallel.chunks, cfg.parallel.snapshot_period) == (8, 23)
    # Either one given alone: the other still follows the model.
    only_chunks = RunConfig(model=ModelConfig(model="gcn", layers=32),
                            parallel=ParallelConfig(mode="pipeline", workers=2, chunks=8))
    assert (only_chunks.parallel.chunks, only_chunks.parallel.snapshot_period) == (8, 1)
    # A derived count follows the model through replace; a given one stays.
    shallow = RunConfig(model=ModelConfig(model="gcn", layers=4), parallel=ParallelConfig(mode="pipeline"))
    deep = dataclasses.replace(shallow, model=ModelConfig(model="gcn", layers=32))
    assert (shallow.parallel.chunks, deep.parallel.chunks) == (8, 2)
    assert deep.parallel.snapshot_period == 1
    back = dataclasses.replace(deep, model=ModelConfig(model="gcnii", layers=32))
    assert (back.parallel.chunks, back.parallel.snapshot_period) == (8, 23)
    assert dataclasses.replace(cfg, model=ModelConfig(model="gcn", layers=4)).parallel.chunks == 8


def test_cross_epoch_chunks_above_the_narrowed_default_are_refused():
    with pytest.raises(ConfigError, match=r"parallel.cross_epoch_chunks: expected an integer <= chunks=2, found 3"):
        RunConfig(model=ModelConfig(model="gcn", layers=32),
                  parallel=ParallelConfig(mode="pipeline", workers=2, cross_epoch_chunks=3))


def test_int_is_accepted_for_float_and_list_for_tuple():
    t = TrainConfig(lr=1)
    assert isinstance(t.lr, float) and t.lr == 1.0
    p = ParallelConfig(mode="pipeline", workers=2, stage_split=[5, 3])
    assert p.stage_split == (5, 3)


@pytest.mark.parametrize("kwargs,field_name", [
    ({"model": ModelConfig(layers=2), "parallel": ParallelConfig(mode="pipeline", workers=4)}, "model.layers"),
    ({"model": ModelConfig(layers=8), "parallel": ParallelConfig(mode="pipeline", workers=2, stage_split=(4, 3))},
     "parallel.stage_split"),
])
def test_cross_field_checks(kwargs, field_name):
    with pytest.raises(ConfigError, match=r"^" + field_name.replace(".", r"\.") + ":"):
        RunConfig(**kwargs)


def test_a_cuda_config_can_be_built_on_any_host():
    # Whether CUDA is present is asked where the run starts (engine.layout), not here.
    p = ParallelConfig(mode="graph", workers=2, device="cuda", backend="nccl")
    assert (p.device, p.backend) == ("cuda", "nccl")
    with pytest.raises(ConfigError, match=r"^parallel\.backend: .*nccl"):
        ParallelConfig(mode="graph", workers=2, device="cpu", backend="nccl")


@pytest.mark.parametrize("seed", [-1, 2**32, 2**70])
def test_seed_out_of_range_is_refused(seed):
    with pytest.raises(ConfigError, match=r"^train\.seed: expected an integer in \[0, 4294967295\]"):
        TrainConfig(seed=seed)


def test_config_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_bytes(b"[train]\nepochs = 3 # \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"expected a UTF-8 TOML file, found a byte that is not UTF-8"):
        RunConfig.from_toml(path)


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ModelConfig().layers = 3  # type: ignore[misc]


# ------------------------------------------------------------------- TOML
TOML = """
[data]
dataset = "synthetic"
[data.options]
num_nodes = 700
[model]
model = "sage"
layers = 6
lambda = 1.5
[train]
lr = 0.005
epochs = 7
[parallel]
mode = "pipeline"
workers = 3
stage_split = [2, 2, 2]
"""


def test_from_toml_reads_every_section(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    cfg = RunConfig.from_toml(path)
    assert cfg.data.options == {"num_nodes": 700}
    assert (cfg.model.model, cfg.model.layers) == ("sage", 6)
    assert cfg.model.lambda_ == 1.5  # the flag's spelling is accepted for the field lambda_
    assert (cfg.train.lr, cfg.train.epochs) == (0.005, 7)
    assert (cfg.parallel.mode, cfg.parallel.workers, cfg.parallel.stage_split) == ("pipeline", 3, (2, 2, 2))
    assert cfg.parallel.chunks == 12


def test_overrides_beat_the_file_nested_or_dotted(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    cfg = RunConfig.from_toml(path, {"model": {"layers": 9}, "parallel.stage_split": [3, 3, 3],
                                     "data": {"options": {"seed": 4}}})
    assert cfg.model.layers == 9
    assert cfg.parallel.stage_split == (3, 3, 3)
    assert cfg.data.options == {"num_nodes": 700, "seed": 4}
    assert cfg.model.model == "sage"  # untouched keys keep the file's value


@pytest.mark.parametrize("text,needle", [
    ("[model]\nlayer = 3\n", "unknown key 'layer' in section [model]"),
    ("[parallel]\nstages = 3\n", "unknown key 'stages' in section [parallel]"),
    ("[optim]\nlr = 3\n", "unknown section [optim]"),
    ("[model]\nlayers = \n", "expected valid TOML"),
    ("[model]\nlayers = 'eight'\n", "model.layers: expected int"),
])
def test_bad_toml_is_one_line_config_error(tmp_path, text, needle):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        RunConfig.from_toml(path)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_toml_file_is_config_error(tmp_path):
    with pytest.raises(ConfigError, match="expected an existing TOML file"):
        RunConfig.from_toml(tmp_path / "nope.toml")


def test_data_root_falls_back_to_env(monkeypatch, tmp_path):
    monkeypatch.setenv("GNNPIPE_DATA_ROOT", str(tmp_path))
    assert DataConfig().resolved_root() == str(tmp_path)
    assert DataConfig(root="/elsewhere").resolved_root() == "/elsewhere"
    monkeypatch.delenv("GNNPIPE_DATA_ROOT")
    assert DataConfig().resolved_root() is None
