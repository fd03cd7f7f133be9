"""The registry's generated README table and load_from_config."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gnnpipe.data import list_datasets, load_dataset, load_from_config
from gnnpipe.data.registry import dataset_table_markdown
from gnnpipe.errors import DataError

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_table() -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- datasets:begin[^>]*-->\n(.*?)<!-- datasets:end -->", text, re.S)
    assert m, "README.md lacks the <!-- datasets:begin --> ... <!-- datasets:end --> markers"
    return m.group(1)


def test_readme_table_is_the_generated_one():
    """Regenerate with `python -m gnnpipe.data table` when the registry changes."""
    assert _readme_table() == dataset_table_markdown()


def test_generated_table_has_one_row_per_dataset():
    rows = dataset_table_markdown().splitlines()[2:]
    names = [re.match(r"\| `([^`]+)` \|", r).group(1) for r in rows]
    assert sorted(names) == list_datasets() and len(names) == len(set(names))
    assert all(r.count(" | ") == 3 for r in rows)


def test_load_from_config_is_load_dataset_of_its_fields(tmp_path, ogb):
    ogb.write(tmp_path)
    cfg = SimpleNamespace(dataset="ogbn-arxiv", options={"symmetrize": False}, resolved_root=lambda: str(tmp_path))
    got = load_from_config(cfg)
    want = load_dataset("ogbn-arxiv", root=tmp_path, symmetrize=False)
    assert torch.equal(got.indices, want.indices) and torch.equal(got.indptr, want.indptr) and got.name == "ogbn-arxiv"


def test_load_from_config_takes_a_real_data_config():
    from gnnpipe.config import DataConfig

    cfg = DataConfig(dataset="synthetic", options={"num_nodes": 300, "seed": 4})
    assert torch.equal(load_from_config(cfg).features, load_dataset("synthetic", num_nodes=300, seed=4).features)


@pytest.mark.parametrize("bad", [None, "cora", SimpleNamespace(dataset="cora", options=[], resolved_root=lambda: None)])
def test_load_from_config_refuses_what_is_no_data_config(bad):
    with pytest.raises(DataError, match="data_config: expected a DataConfig"):
        load_from_config(bad)
