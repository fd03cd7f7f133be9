"""A benchmark suite as data: a TOML grid expanded into runs, each named by a hash.

A suite file (``bench/suites/NAME.toml``) has three parts::

    [suite]                      # what it is (shown by ``python -m bench list``)
    description = "one line: what the suite measures"
    estimate_minutes = 2.5       # measured estimate on the development machine
    notes = "how the estimate was made, why the layouts are what they are"

    [defaults]                   # settings every grid block starts from
    dataset = "synthetic"
    data_options = { num_nodes = 1000 }
    epochs = 20

    [[grid]]                     # one or more blocks; each is a cartesian product
    name = "modes"               # optional label of the block
    mode = ["single", "graph", "pipeline", "hybrid"]
    layout = [{ workers = 2, chunks = 4 }]
    seed = [0, 1]

Every setting (:data:`SETTINGS`: the ``python -m gnnpipe.train`` flags a suite may
vary) is a scalar or a list; a list is an axis of the grid. ``data_options`` is a
table of loader options (``--data-option k=v``) or a list of such tables.
``layout`` (workers, ways, chunks, stage_split) and ``techniques`` (shuffle,
snapshot_period, unbiased_scale, history_init, stage_dtype, dropout_masks, cross_epoch_chunks) are a table or a
list of tables whose
entries are laid over the point. A block's keys replace the defaults' keys whole.
``published`` / ``target`` (floats, test accuracy) tag a block's runs for the
report; they are not settings.

A setting that does not apply to a run's mode (``workers`` in single mode, ``chunks``
in graph mode, the pipeline techniques outside pipeline and hybrid) is left out of
that run, and runs that thereby become identical are one run. A run is its *point*,
the dict of the settings it passes, and its name is the short hash of that point:
the same settings give the same name on any machine (the data root is not part of
it), so results can be resumed and compared. Everything here is a pure function of
the file; nothing starts a process.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SUITES_DIR = Path(__file__).resolve().parent / "suites"
MODES = ("single", "graph", "pipeline", "hybrid")
DISTRIBUTED = ("graph", "pipeline", "hybrid")
PIPELINED = ("pipeline", "hybrid")


@dataclass(frozen=True)
class Setting:
    """One ``python -m gnnpipe.train`` flag a suite can set: its kind (the TOML type
    it must have) and the modes it applies to."""

    flag: str
    kind: str  # "int", "float", "str", "bool" (a --flag / --no-flag pair), "options"
    modes: tuple[str, ...] = MODES


#: The settings, in the order their flags appear in a run's argv. Keys are the TOML
#: keys; they follow the config dataclasses' field names (``lambda`` is ``--lambda``).
SETTINGS: dict[str, Setting] = {
    "dataset": Setting("--dataset", "str"),
    "data_options": Setting("--data-option", "options"),
    "model": Setting("--model", "str"),
    "layers": Setting("--layers", "int"),
    "hidden": Setting("--hidden", "int"),
    "dropout": Setting("--dropout", "float"),
    "alpha": Setting("--alpha", "float"),
    "lambda": Setting("--lambda", "float"),
    "input_proj": Setting("--input-proj", "bool"),
    "classifier": Setting("--classifier", "bool"),
    "epochs": Setting("--epochs", "int"),
    "lr": Setting("--lr", "float"),
    "weight_decay": Setting("--weight-decay", "float"),
    "layer_weight_decay": Setting("--layer-weight-decay", "float"),
    "eval_every": Setting("--eval-every", "int"),
    "patience": Setting("--patience", "int"),
    "monitor": Setting("--monitor", "str"),
    "dtype": Setting("--dtype", "str"),
    "mode": Setting("--mode", "str"),
    "workers": Setting("--workers", "int", DISTRIBUTED),
    "ways": Setting("--ways", "int", ("hybrid",)),
    "chunks": Setting("--chunks", "int", PIPELINED),
    "stage_split": Setting("--stage-split", "str", PIPELINED),
    "partition": Setting("--partition", "str", DISTRIBUTED),
    "kernel": Setting("--kernel", "str"),
    "device": Setting("--device", "str"),
    "backend": Setting("--backend", "str", DISTRIBUTED),
    "shuffle": Setting("--shuffle", "bool", PIPELINED),
    "snapshot_period": Setting("--snapshot-period", "int", PIPELINED),
    "unbiased_scale": Setting("--unbiased-scale", "bool", PIPELINED),
    "history_init": Setting("--history-init", "str", PIPELINED),
    "stage_dtype": Setting("--stage-dtype", "str", PIPELINED),
    "dropout_masks": Setting("--dropout-masks", "str", PIPELINED),
    "cross_epoch_chunks": Setting("--cross-epoch-chunks", "int", ("pipeline",)),
    "host_huge_pages": Setting("--host-huge-pages", "bool"),
    "seed": Setting("--seed", "int"),
    "log_level": Setting("--log-level", "str"),
    "log_every": Setting("--log-every", "int"),
}
#: Keys of the tables that the ``layout`` / ``techniques`` axes lay over a point.
GROUPS: dict[str, tuple[str, ...]] = {
    "layout": ("workers", "ways", "chunks", "stage_split"),
    "techniques": ("shuffle", "snapshot_period", "unbiased_scale", "history_init", "stage_dtype",
                   "dropout_masks", "cross_epoch_chunks"),
}
#: Keys of a grid block that tag its runs (for the report) without being settings.
TAGS = {"published": "float", "target": "float"}
SUITE_KEYS = {"description": "str", "estimate_minutes": "float", "notes": "str"}
#: Keys that identify a run for people (always in its label).
LABEL_KEYS = ("dataset", "model", "mode")


class SuiteError(ValueError):
    """A suite file that cannot be expanded: the message is one line naming the file,
    the key, what was expected and what was found."""

    def __init__(self, path: Path | str, key: str, expected: str, found: Any) -> None:
        shown = found if isinstance(found, str) and found.startswith("<") else repr(found)
        super().__init__(f"{path}: {key}: expected {expected}, found {shown}")


@dataclass(frozen=True)
class RunSpec:
    """One run of a suite: the settings it passes (``point``), the grid block it came
    from and the block's tags (``published`` / ``target``)."""

    point: dict[str, Any]
    grid: str
    tags: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return run_name(self.point)

    def label(self, suite: "Suite") -> str:
        return label(self.point, suite.varied, self.grid if suite.grid_names else None)


@dataclass(frozen=True)
class Suite:
    """An expanded suite: its runs in file order, duplicates removed."""

    name: str
    path: Path
    description: str
    estimate_minutes: float | None
    notes: str
    runs: tuple[RunSpec, ...]

    @cached_property
    def varied(self) -> tuple[str, ...]:
        """Settings (and data options) whose value differs between the runs of a grid
        block, seed aside: what tells a block's runs apart (the block's name tells the
        blocks apart)."""
        blocks: dict[str, list[dict[str, Any]]] = {}
        for r in self.runs:
            blocks.setdefault(r.grid, []).append(r.point)
        found = {k for points in blocks.values() for k in varied_keys(points)}
        return tuple(k for k in varied_keys(r.point for r in self.runs) if k in found)

    @cached_property
    def grid_names(self) -> tuple[str, ...]:
        """The block names worth showing: none when one block, or when every block is
        named after its mode (then the mode says it)."""
        names = tuple(dict.fromkeys(r.grid for r in self.runs))
        return () if len(names) < 2 or set(names) <= set(MODES) else names


# ------------------------------------------------------------------------- checks
def _type_name(value: Any) -> Any:
    """What to show for a wrong value: a scalar itself (shown with repr), a
    ``<...>`` word for a boolean, table or list."""
    if isinstance(value, bool):
        return f"<{str(value).lower()}>"
    if isinstance(value, dict):
        return "<a table>"
    if isinstance(value, list):
        return "<a list>"
    return value


def _check_scalar(path: Path, key: str, kind: str, value: Any) -> Any:
    """``value`` as the kind wants it (ints become floats where floats are wanted)."""
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
    }[kind]
    if not ok:
        expected = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false"}[kind]
        raise SuiteError(path, key, expected, _type_name(value))
    if kind == "float":
        return float(value)
    return value


def _check_options(path: Path, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SuiteError(path, key, "a table of loader options", _type_name(value))
    for k, v in value.items():
        if not isinstance(v, (str, int, float, bool)):
            raise SuiteError(path, f"{key}.{k}", "a string, number or boolean", _type_name(v))
    return dict(value)


def _check_value(path: Path, at: str, key: str, value: Any) -> Any:
    """One value (not an axis) of setting ``key``; ``at`` is where it is in the file."""
    setting = SETTINGS[key]
    if setting.kind == "options":
        return _check_options(path, at, value)
    value = _check_scalar(path, at, setting.kind, value)
    if key == "mode" and value not in MODES:
        raise SuiteError(path, at, f"one of {', '.join(MODES)}", value)
    return value


def _axis(path: Path, key: str, value: Any) -> list[Any]:
    """The values of one axis: a list is an axis, anything else one value."""
    if isinstance(value, list):
        if not value:
            raise SuiteError(path, key, "a value or a non-empty list", "<empty list>")
        return value
    return [value]


def _check_group(path: Path, at: str, key: str, value: Any) -> list[dict[str, Any]]:
    """A ``layout`` / ``techniques`` axis: a list of checked tables."""
    allowed = GROUPS[key]
    out = []
    for i, entry in enumerate(_axis(path, at, value)):
        where = f"{at}[{i}]" if isinstance(value, list) else at
        if not isinstance(entry, dict):
            raise SuiteError(path, where, f"a table of {', '.join(allowed)}", _type_name(entry))
        for k, v in entry.items():
            if k not in allowed:
                raise SuiteError(path, f"{where}.{k}", f"one of {', '.join(allowed)}", k)
        out.append({k: _check_value(path, f"{where}.{k}", k, v) for k, v in entry.items()})
    return out


def _check_block(path: Path, where: str, block: Any, allow: Iterable[str]) -> dict[str, list[Any]]:
    """A ``[defaults]`` or ``[[grid]]`` table as axes: key -> list of checked values."""
    if not isinstance(block, dict):
        raise SuiteError(path, where, "a table", _type_name(block))
    allowed = set(allow)
    axes: dict[str, list[Any]] = {}
    for key, value in block.items():
        at = f"{where}.{key}"
        if key not in allowed:
            raise SuiteError(path, at, "a setting (see bench/suite.py SETTINGS), layout or techniques", key)
        if key in GROUPS:
            axes[key] = _check_group(path, at, key, value)
        elif key in TAGS or key == "name":
            kind = TAGS.get(key, "str")
            axes[key] = [_check_scalar(path, at, kind, value)]
        else:
            axes[key] = [_check_value(path, f"{at}[{i}]" if isinstance(value, list) else at, key, v)
                         for i, v in enumerate(_axis(path, at, value))]
    return axes


# ---------------------------------------------------------------------- expansion
def normalize(point: dict[str, Any]) -> dict[str, Any]:
    """The point in canonical key order, without the settings its mode ignores."""
    mode = point["mode"]
    return {k: point[k] for k in SETTINGS if k in point and mode in SETTINGS[k].modes}


def expand(path: Path, data: dict[str, Any]) -> list[RunSpec]:
    """The runs of a parsed suite file, in file order, duplicates removed."""
    defaults = _check_block(path, "defaults", data.get("defaults", {}), list(SETTINGS) + list(GROUPS))
    grids = data.get("grid")
    if not isinstance(grids, list) or not grids:
        raise SuiteError(path, "grid", "one or more [[grid]] tables",
                         "<missing>" if grids is None else _type_name(grids))
    runs: dict[str, RunSpec] = {}
    for i, block in enumerate(grids):
        where = f"grid[{i}]"
        axes = dict(defaults)
        axes.update(_check_block(path, where, block, list(SETTINGS) + list(GROUPS) + list(TAGS) + ["name"]))
        name = axes.pop("name", [where])[0]
        tags = {k: axes.pop(k)[0] for k in TAGS if k in axes}
        if "mode" not in axes:
            raise SuiteError(path, f"{where}.mode", f"one of {', '.join(MODES)} (here or in [defaults])",
                             "<missing>")
        # seed outermost (every setting at the first seed first), then canonical order
        keys = sorted(axes, key=lambda k: (k != "seed", (list(SETTINGS) + list(GROUPS)).index(k)))
        for combo in itertools.product(*(axes[k] for k in keys)):
            point: dict[str, Any] = {}
            for key, value in zip(keys, combo):
                if key not in GROUPS:
                    point[key] = value
            for key, value in zip(keys, combo):
                if key in GROUPS:  # laid over the plain settings
                    point.update(value)
            spec = RunSpec(normalize(point), name, tags)
            runs.setdefault(spec.name, spec)
    return list(runs.values())


def load_suite(path: Path | str) -> Suite:
    """Read and expand one suite file; a bad file raises :class:`SuiteError`."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise SuiteError(path, "<file>", "a readable TOML file", f"<{exc.strerror}>") from None
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(path, "<syntax>", "valid TOML", f"<{exc}>") from None
    for key in data:
        if key not in ("suite", "defaults", "grid"):
            raise SuiteError(path, key, "one of [suite], [defaults], [[grid]]", key)
    head = data.get("suite", {})
    if not isinstance(head, dict):
        raise SuiteError(path, "suite", "a table", _type_name(head))
    for key, value in head.items():
        if key not in SUITE_KEYS:
            raise SuiteError(path, f"suite.{key}", f"one of {', '.join(SUITE_KEYS)}", key)
        _check_scalar(path, f"suite.{key}", SUITE_KEYS[key], value)
    if "description" not in head:
        raise SuiteError(path, "suite.description", "a one-line description", "<missing>")
    runs = expand(path, data)
    estimate = head.get("estimate_minutes")
    return Suite(name=path.stem, path=path, description=head["description"],
                 estimate_minutes=None if estimate is None else float(estimate),
                 notes=head.get("notes", ""), runs=tuple(runs))


def suite_path(name_or_path: str, suites_dir: Path = SUITES_DIR) -> Path:
    """``smoke`` -> ``bench/suites/smoke.toml``; a path to a .toml file stays itself."""
    if name_or_path.endswith(".toml"):
        return Path(name_or_path)
    return suites_dir / f"{name_or_path}.toml"


def list_suites(suites_dir: Path = SUITES_DIR) -> list[Path]:
    return sorted(suites_dir.glob("*.toml"))


# ----------------------------------------------------------- names, argv, labels
def run_name(point: dict[str, Any]) -> str:
    """Short hash of a point: same settings, same name (key order does not matter)."""
    text = json.dumps(point, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def argv(point: dict[str, Any], data_root: str | None = None) -> list[str]:
    """The ``python -m gnnpipe.train`` arguments of a point (``--json-out`` aside).

    ``--data-root`` is added for every dataset but ``synthetic`` when ``data_root``
    is given; it is where this machine keeps the files, not part of the run's name.
    """
    out: list[str] = []
    for key, value in point.items():
        setting = SETTINGS[key]
        if setting.kind == "options":
            for k, v in value.items():
                out += [setting.flag, f"{k}={_text(v)}"]
        elif setting.kind == "bool":
            out.append(setting.flag if value else "--no-" + setting.flag[2:])
        else:
            out += [setting.flag, _text(value)]
        if key == "dataset" and value != "synthetic" and data_root is not None:
            out += ["--data-root", str(data_root)]
    return out


def tokens(point: dict[str, Any]) -> list[str]:
    """``key=value`` words of a point; data options appear as their own keys."""
    out = []
    for key, value in point.items():
        if isinstance(value, dict):
            out += [f"{k}={_text(v)}" for k, v in value.items()]
        else:
            out.append(f"{key}={_text(value)}")
    return out


def varied_keys(points: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """Token keys with more than one value between runs, seed aside, in canonical
    order. A setting counts among the runs of the modes it applies to, where leaving
    it out (the trainer's default) is a value too; a data option among all runs."""
    points = list(points)
    out = []
    for key, setting in SETTINGS.items():
        if key == "seed":
            continue
        if setting.kind == "options":
            names = dict.fromkeys(k for p in points for k in p.get(key, {}))
            out += [k for k in names if len({_text(p.get(key, {}).get(k, "<default>")) for p in points}) > 1]
        elif len({_text(p.get(key, "<default>")) for p in points if p["mode"] in setting.modes}) > 1:
            out.append(key)
    return tuple(out)


def label(point: dict[str, Any], varied: Iterable[str], grid: str | None = None) -> str:
    """A short human name: the grid block's name (when given), dataset, model, mode,
    the varied settings, the seed."""
    words = [f"{grid}:"] if grid else []
    words += [_text(point[k]) for k in LABEL_KEYS if k in point]
    wanted = set(varied) - set(LABEL_KEYS)
    words += [t for t in tokens(point) if t.partition("=")[0] in wanted]
    if "seed" in point:
        words.append(f"seed={point['seed']}")
    return " ".join(words)


def matches(spec: RunSpec, pattern: str | None) -> bool:
    """``--only``: every whitespace-separated term must match one ``key=value`` word
    of the run (a shell glob, e.g. ``mode=pipe*``), its grid name (``grid=NAME``) or
    be a prefix of its hash."""
    if not pattern:
        return True
    from fnmatch import fnmatchcase

    words = tokens(spec.point) + [f"grid={spec.grid}"]
    return all(spec.name.startswith(term) or any(fnmatchcase(w, term) for w in words)
               for term in pattern.split())
