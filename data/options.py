"""The keyword options of :func:`gnnpipe.data.load_dataset`, as one validated value.

Why one type: every reader takes the same block of options (``name``, ``symmetrize``,
the seeded split's ``seed`` / ``train_per_class`` / ``val_per_class`` ...), and a value
of the wrong type used to fail deep inside numpy (``seed=1.5``), or not at all
(``normalize_features=3``). :class:`LoadOptions` checks every value's type and range
once, where a load starts, and raises one :class:`DataError` line naming the option.
Which options a format accepts is the format's own list (``Format.accepts``); an
option name no format of the request accepts is a :class:`ConfigError` raised by the
registry, before this type is built.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gnnpipe.data.sparse import DEFAULT_SPARSE_THRESHOLD
from gnnpipe.errors import ConfigError, DataError

__all__ = ["LoadOptions", "UNIVERSAL_OPTIONS", "option_names", "parse_option_words"]


class _Refused(Exception):
    """A value that does not fit its rule (internal: becomes one DataError line)."""


def _boolean(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise _Refused


def _integer(lo: int) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < lo:
            raise _Refused
        return int(v)

    return check


def _text(v: Any) -> str:
    if isinstance(v, str) and v.strip():
        return v
    raise _Refused


def _path(v: Any) -> Path:
    if isinstance(v, (str, os.PathLike)) and str(v):
        return Path(v).expanduser()
    raise _Refused


def _choice(*allowed: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if isinstance(v, str) and v in allowed:
            return v
        raise _Refused

    return check


def _sparse_mode(v: Any) -> bool | str:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("auto", "true", "false"):
        return {"auto": "auto", "true": True, "false": False}[v.strip().lower()]
    raise _Refused


def _fraction(v: Any) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise _Refused
    if not 0.0 <= float(v) <= 1.0:
        raise _Refused
    return float(v)


def _split(v: Any) -> int | str:
    return "public" if isinstance(v, str) and v == "public" else _integer(0)(v)


def _optional(rule: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else rule(v)


def _opt(default: Any, rule: Callable[[Any], Any], expected: str) -> Any:
    """A dataclass field whose value must pass ``rule`` (which returns it normalised)."""
    return field(default=default, metadata={"rule": rule, "expected": expected})


@dataclass(frozen=True)
class LoadOptions:
    """Every option a dataset load takes, type- and range-checked on construction.

    The defaults are the readers' defaults; ``None`` means "the format decides" (the
    graph's name from the file name, ``split`` 0 or ``"public"``, OGB's split folder
    and inverse edges from its master table).
    """

    # every dataset, synthetic included (applied by the registry, not by a reader)
    cache: bool = _opt(True, _boolean, "true or false")
    normalize_features: bool = _opt(False, _boolean, "true or false")
    # feature layout (gnnpipe.data.sparse): CSR when at most sparse_threshold is non-zero
    sparse_features: bool | str = _opt("auto", _sparse_mode, "'auto', true or false")
    sparse_threshold: float = _opt(DEFAULT_SPARSE_THRESHOLD, _fraction, "a number in [0, 1]")
    # every file format
    name: str | None = _opt(None, _optional(_text), "a non-empty string")
    symmetrize: bool = _opt(True, _boolean, "true or false")
    # the seeded per-class split of formats that store no split
    seed: int = _opt(0, _integer(0), "an integer >= 0")
    train_per_class: int = _opt(20, _integer(1), "an integer >= 1")
    val_per_class: int = _opt(30, _integer(0), "an integer >= 0")
    # formats with stored splits (the index range is checked against the file)
    split: int | str | None = _opt(None, _optional(_split), "an integer >= 0 (or 'public' for planetoid)")
    splits_dir: Path | None = _opt(None, _optional(_path), "a folder path")
    # one format each
    structure_only: bool = _opt(False, _boolean, "true or false")  # planetoid
    num_val: int = _opt(500, _integer(0), "an integer >= 0")  # planetoid
    missing_features: str = _opt("identity", _choice("identity", "ones"), "'identity' or 'ones'")  # sparsegraph
    prefix: str | None = _opt(None, _optional(_text), "a non-empty string")  # musae
    split_type: str | None = _opt(None, _optional(_text), "a non-empty string")  # ogb
    add_inverse_edge: bool | None = _opt(None, _optional(_boolean), "true, false or none")  # ogb

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            try:
                object.__setattr__(self, f.name, f.metadata["rule"](value))
            except _Refused:
                raise DataError(f"option {f.name}: expected {f.metadata['expected']}, found {value!r}") from None

    def key(self, names: frozenset[str]) -> dict[str, Any]:
        """The JSON-able values of ``names`` (paths as strings), for a cache key."""
        return {n: str(v) if isinstance(v, Path) else v for n in sorted(names) for v in [getattr(self, n)]}


#: Options that every dataset accepts (the registry applies them after loading).
UNIVERSAL_OPTIONS: frozenset[str] = frozenset({"cache", "normalize_features", "sparse_features",
                                                "sparse_threshold"})


def option_names() -> frozenset[str]:
    """Every option name :class:`LoadOptions` knows."""
    return frozenset(f.name for f in fields(LoadOptions))


def _option_value(text: str) -> Any:
    """One option value as a command line writes it: int, float, true/false,
    none/null, else the string (its type is checked by :class:`LoadOptions`)."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_option_words(words: list[str], flag: str = "--data-option") -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` (the words of repeated ``flag`` arguments) as the
    keyword options of :func:`gnnpipe.data.load_dataset`; a word without ``=`` or
    without a key is one :class:`ConfigError` line naming ``flag``."""
    out: dict[str, Any] = {}
    for word in words:
        key, sep, text = word.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag}: expected KEY=VALUE, found {word!r}")
        out[key.strip()] = _option_value(text.strip())
    return out
