"""Loader options: every value of the wrong type or range is one DataError line naming the
option, raised before any file is read; option names stay ConfigErrors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnnpipe.data import load_dataset
from gnnpipe.data.formats import FORMATS
from gnnpipe.data.options import UNIVERSAL_OPTIONS, LoadOptions, option_names
from gnnpipe.errors import ConfigError, DataError

#: One wrong value per option (type or range); the test below fails when an option is
#: added to LoadOptions without a case here.
BAD = {
    "cache": "no",
    "normalize_features": 3,
    "name": 7,
    "symmetrize": "yes",
    "seed": 1.5,
    "train_per_class": "x",
    "val_per_class": -1,
    "split": 2.0,
    "splits_dir": 5,
    "structure_only": 1,
    "num_val": True,
    "missing_features": "zeros",
    "prefix": ["DE"],
    "split_type": 3,
    "add_inverse_edge": "false",
    "sparse_features": "sometimes",
    "sparse_threshold": 1.5,
}
#: A valid value of each option a format requires.
REQUIRED = {"name": "tiny", "prefix": "toy"}


def _one_line_naming(exc: pytest.ExceptionInfo, option: str) -> None:
    msg = str(exc.value)
    assert msg.startswith(f"option {option}: expected ") and "\n" not in msg and repr(BAD[option]) in msg


def test_every_option_has_a_bad_value_case():
    assert set(BAD) == option_names()


@pytest.mark.parametrize("option", sorted(BAD))
def test_wrong_value_is_one_line_data_error_naming_the_option(option):
    with pytest.raises(DataError) as info:
        LoadOptions(**{option: BAD[option]})
    _one_line_naming(info, option)


@pytest.mark.parametrize("fmt, option", sorted((f, o) for f, spec in FORMATS.items()
                                               for o in spec.accepts | UNIVERSAL_OPTIONS))
def test_every_format_refuses_every_wrong_option_before_reading(tmp_path, fmt, option):
    """The root does not exist: the option error must come first, from the entry."""
    required = {k: REQUIRED[k] for k in FORMATS[fmt].required if k != option}
    with pytest.raises(DataError) as info:
        load_dataset(fmt, root=tmp_path / "absent", **required, **{option: BAD[option]})
    _one_line_naming(info, option)


@pytest.mark.parametrize("option, value", [("train_per_class", "x"), ("normalize_features", 3), ("seed", 1.5)])
def test_named_dataset_refuses_wrong_option(tmp_path, option, value):
    with pytest.raises(DataError, match=f"option {option}: expected"):
        load_dataset("gnnbench-cora", root=tmp_path, **{option: value})


#: One wrong value per option of the synthetic generator (the test below fails when the
#: generator gains an option without a case here).
BAD_SYNTHETIC = {
    "num_nodes": "x", "num_features": 2.5, "num_classes": True, "avg_degree": "4", "homophily": "high",
    "degree_exponent": None, "feature_signal": "x", "feature_noise": True, "train_frac": "0.1", "val_frac": None,
    "seed": 1.5, "name": 7,
}


def test_every_synthetic_option_has_a_bad_value_case():
    import inspect

    from gnnpipe.data import synthetic_graph

    assert set(BAD_SYNTHETIC) == set(inspect.signature(synthetic_graph).parameters)


@pytest.mark.parametrize("option, value", [*BAD_SYNTHETIC.items(), ("normalize_features", 3), ("cache", "no"),
                                           ("sparse_threshold", "x")])
def test_synthetic_refuses_wrong_option_before_the_cache(option, value, caplog):
    """Refused where the load starts: no "cache miss" is logged, no cache entry made."""
    from gnnpipe.data.cache import cache_dir

    with caplog.at_level("INFO", logger="gnnpipe"), pytest.raises(DataError, match=option) as info:
        load_dataset("synthetic", **{"num_nodes": 200, option: value})
    assert "\n" not in str(info.value) and repr(value) in str(info.value)
    assert caplog.records == [] and not any(cache_dir().glob("*"))


def test_valid_values_are_normalised():
    opts = LoadOptions(seed=np.int64(3), symmetrize=np.bool_(False), splits_dir="~/splits", split="public")
    assert opts.seed == 3 and type(opts.seed) is int
    assert opts.symmetrize is False
    assert opts.splits_dir == Path("~/splits").expanduser() and opts.split == "public"
    assert opts.key(frozenset({"seed", "splits_dir"})) == {"seed": 3, "splits_dir": str(Path("~/splits").expanduser())}


def test_option_names_stay_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="bogus"):
        load_dataset("heterophilous", root=tmp_path, bogus=1)
    with pytest.raises(ConfigError, match="seed"):  # a real option, but not one this format takes
        load_dataset("heterophilous", root=tmp_path, seed=1)
    with pytest.raises(ConfigError, match="requires \\['prefix'\\]"):
        load_dataset("musae", root=tmp_path)
