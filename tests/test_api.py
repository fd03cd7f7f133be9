"""The library API. ``README_EXAMPLE`` is read from README.md itself, so the example
that users copy is the one that runs here."""

from __future__ import annotations

import pytest


pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py

def _readme_example() -> str:
    """The first ``python`` block under "### Library API" in README.md, verbatim."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("### Library API", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


README_EXAMPLE = _readme_example()


def test_readme_example_runs(capsys):
    scope: dict = {}
    exec(compile(README_EXAMPLE, "README_EXAMPLE", "exec"), scope)
    rec = scope["record"]
    from gnnpipe.trainer.record import check_record

    check_record(rec)
    assert rec["mode"] == "single" and rec["summary"]["epochs_run"] == 20
    assert rec["config"]["data"]["dataset"] == "synthetic"
    printed = capsys.readouterr().out.split()
    assert float(printed[0]) == rec["best"]["test_acc"]


def test_train_is_the_function_and_importing_the_cli_module_warns():
    import sys
    import warnings

    import gnnpipe
    from gnnpipe.api import train

    assert gnnpipe.train is train
    sys.modules.pop("gnnpipe.train", None)
    try:
        with pytest.warns(UserWarning, match="gnnpipe.train is the command-line module"):
            import gnnpipe.train  # noqa: F401
    finally:
        sys.modules.pop("gnnpipe.train", None)
        gnnpipe.__dict__.pop("train", None)  # back to the package's own attribute
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gnnpipe.train is train


def test_train_from_config_loads_the_dataset_and_writes_json(tmp_path):
    import json

    from gnnpipe.api import train_from_config
    from gnnpipe.config import DataConfig, ModelConfig, ParallelConfig, RunConfig, TrainConfig

    out = tmp_path / "r.json"
    cfg = RunConfig(data=DataConfig(options={"num_nodes": 300}), model=ModelConfig(model="sage", layers=2, hidden=8),
                    train=TrainConfig(epochs=2, json_out=str(out)), parallel=ParallelConfig(mode="single"))
    rec = train_from_config(cfg)
    assert json.loads(out.read_text()) == json.loads(json.dumps(rec))
    assert rec["dataset"]["num_nodes"] == 300


def test_bad_arguments_are_config_errors():
    import gnnpipe
    from gnnpipe.errors import ConfigError
    from tests.trainer.helpers import easy_graph

    with pytest.raises(ConfigError, match="graph"):
        gnnpipe.train("not a graph")
    with pytest.raises(ConfigError, match="model_config"):
        gnnpipe.train(easy_graph(num_nodes=60), {"model": "gcn"})


@pytest.mark.parametrize("model,layers,mode,ways,chunks,warns", [
    ("gcn", 32, "pipeline", 1, 8, True),     # the measured collapse (bench/results/gcn-long)
    ("sage", 16, "hybrid", 2, 8, True),
    ("gcn", 32, "pipeline", 1, 2, False),    # one chunk per stage
    ("gcn", 32, "hybrid", 2, 2, False),      # one chunk per stage and way
    ("gcn", 32, "pipeline", 1, None, False),  # the default: narrowed to one chunk per stage
    ("gcnii", 32, "pipeline", 1, 8, False),  # residual models train in pipeline mode
    ("gcn", 8, "pipeline", 1, 8, False),     # shallow
    ("gcn", 32, "graph", 2, 2, False),       # exact
])
def test_a_deep_plain_model_over_more_chunks_than_stages_is_warned(model, layers, mode, ways, chunks, warns):
    from gnnpipe.api import stale_read_warning
    from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig
    from gnnpipe.engine.layout import resolve_layout

    cfg = RunConfig(model=ModelConfig(model=model, layers=layers, hidden=8),
                    parallel=ParallelConfig(mode=mode, workers=2, ways=ways if mode == "hybrid" else None,
                                            chunks=chunks))
    text = stale_read_warning(cfg, resolve_layout(cfg, num_nodes=1000))
    assert (text is not None) == warns
    if warns:
        assert f"{model}-{layers}" in text and "--chunks" in text and "gcn-long" in text


def test_the_stale_read_warning_is_logged_once_by_a_run(caplog):
    import logging

    import gnnpipe
    from gnnpipe.config import ModelConfig, ParallelConfig, TrainConfig

    graph = gnnpipe.load_dataset("synthetic", num_nodes=200)
    with caplog.at_level(logging.WARNING, logger="gnnpipe.train"):
        gnnpipe.train(graph, ModelConfig(model="gcn", layers=16, hidden=4), TrainConfig(epochs=1),
                      ParallelConfig(mode="pipeline", workers=2, chunks=4))
    hits = [r for r in caplog.records if "stale halo reads" in r.getMessage()]
    assert len(hits) == 1 and "gcn-16" in hits[0].getMessage()
