"""Dataset registry: ``load_dataset(name, root=None, **options)`` and ``list_datasets()``.

``root`` (default ``$GNNPIPE_DATA_ROOT``) is a folder laid out like the shared dataset
collection; each name reads the path its :class:`DatasetSpec` gives, relative to
``root``. The table of names, files, formats and splits is README.md's "Datasets"
section, generated from :data:`DATASETS` by :func:`dataset_table_markdown`
(``python -m gnnpipe.data table``). Graphs are returned symmetrised
(``symmetrize=False`` keeps the file's direction).

Options: every name takes ``cache`` (False bypasses the converted-graph cache,
:mod:`gnnpipe.data.cache`), ``normalize_features`` (row-normalise after loading; the
cache keeps the file's own values), ``sparse_features`` (``"auto"`` (default): features
with at most ``sparse_threshold`` (default 0.1) non-zero are a CSR
:class:`~gnnpipe.data.sparse.SparseFeatures`, others dense; ``True``/``False`` force
sparse/dense) and ``sparse_threshold``; each format takes the options its
:class:`~gnnpipe.data.formats.Format` lists. An option name the format does not take, or
a required one left out, is a :class:`ConfigError`; a value of the wrong type or range
is a :class:`DataError` naming the option (:class:`~gnnpipe.data.options.LoadOptions`).

``cora``/``citeseer``/``pubmed`` also take ``split=k`` (0..9): the Geom-GCN 60/20/20
split from ``geom-gcn/splits/`` (unlabelled vertices dropped from its masks).
"Seeded per class": 20 training and 30 validation vertices per class, the rest test
(options ``seed``, ``train_per_class``, ``val_per_class``). The raw Geom-GCN Cornell file
is byte-identical to Texas upstream; prefer ``cornell`` (heterophilous version).
``pubmed`` refuses with a DataError naming the missing ``ind.pubmed.allx`` when that file
is absent; ``structure_only=True`` loads its graph, labels and split with features [N, 0].

Users' own data: the format names (:func:`list_formats`) take ``root`` as the file or
folder itself, e.g. ``load_dataset("ogb", root="/data/ogbn_arxiv")``; :func:`load_path`
guesses the format from the path.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnpipe.data.cache import cached_load
from gnnpipe.data.formats import FORMATS, Format
from gnnpipe.data.formats.ogb import OGB_META, ogb_dir
from gnnpipe.data.graph import Graph
from gnnpipe.data.options import UNIVERSAL_OPTIONS, LoadOptions
from gnnpipe.data.synthetic import GENERATOR_VERSION, check_synthetic_options, synthetic_graph
from gnnpipe.errors import ConfigError, DataError

__all__ = ["load_dataset", "load_from_config", "list_datasets", "list_formats", "load_path",
           "dataset_table_markdown", "DatasetSpec", "DATASETS"]

logger = logging.getLogger(__name__)

_GEOM_SPLITS = "geom-gcn/splits"


@dataclass(frozen=True)
class DatasetSpec:
    """A named dataset: the format that reads it, its path under root and fixed options.

    ``files``, ``note`` and ``split`` are what the README table shows (empty ``files``:
    the path; empty ``split``: the format's own description).
    """

    name: str
    format: str
    path: str
    options: dict[str, Any] = field(default_factory=dict)
    files: str = ""
    note: str = ""
    split: str = ""


def _specs() -> dict[str, DatasetSpec]:
    s: list[DatasetSpec] = []
    for n, sizes in (("cora", "140/500/1000"), ("citeseer", "120/500/1000"), ("pubmed", "60/500/1000")):
        s.append(DatasetSpec(n, "planetoid", "planetoid", {"name": n, "splits_dir": _GEOM_SPLITS},
                             files=f"planetoid/ind.{n}.*", split=f"public {sizes} (or split=k)",
                             note="or `planetoid-pubmed-partial/`" if n == "pubmed" else ""))
    for n, path in (("gnnbench-cora", "gnn-benchmark/cora.npz"), ("gnnbench-citeseer", "gnn-benchmark/citeseer.npz"),
                    ("cora_ml", "ppnp/cora_ml.npz")):
        s.append(DatasetSpec(n, "sparsegraph", path))
    s.append(DatasetSpec("graphdata-cora_ml", "graphdata", "graphdata/cora_ml.npz"))
    for n in ("amazon_photo", "coauthor_cs", "citeseer_full", "dblp", "acm", "uai", "blogcatalog"):
        s.append(DatasetSpec(n, "graphdata", f"graphdata/{n}.npz"))
    s.append(DatasetSpec("flickr_lane", "graphdata", "graphdata/flickr.npz", note="(7,575-vertex LANE Flickr)"))
    for n in ("minesweeper", "tolokers", "actor", "cornell", "texas", "wisconsin"):
        s.append(DatasetSpec(n, "heterophilous", f"heterophilous/{n}.npz"))
    for n in ("cornell", "texas", "wisconsin", "film"):
        s.append(DatasetSpec(f"geom-{n}", "geom-gcn", f"geom-gcn/new_data/{n}", {"name": n, "splits_dir": _GEOM_SPLITS},
                             files=f"geom-gcn/new_data/{n}/", note=f"(+ `{_GEOM_SPLITS}/`)",
                             split="10 fixed (split=k)"))
    for n, prefix in (("facebook", "facebook"), ("twitch_de", "DE"), ("twitch_engb", "ENGB")):
        s.append(DatasetSpec(n, "musae", "musae", {"prefix": prefix},
                             files=f"musae/{prefix}_edges.csv, {prefix}.json, {prefix}_target.csv"))
    for n in ("cora", "citeseer"):
        s.append(DatasetSpec(f"linqs-{n}", "linqs", f"linqs/{n}.tgz"))
    s.append(DatasetSpec("polblogs", "sparsegraph", "nettack/polblogs.npz", note="(identity features)"))
    for n in ("ogbn-arxiv", "ogbn-products"):
        kind = OGB_META[n][0]
        folder = str(ogb_dir("", n))
        s.append(DatasetSpec(n, "ogb", folder, {"name": n}, files=f"{folder}/", note=f"(`raw/`, `split/{kind}/`)",
                             split=f"split/{kind}"))
    return {d.name: d for d in s}


_SYNTHETIC_SIGNATURE = inspect.signature(synthetic_graph)

#: Every named dataset (``synthetic`` is handled separately: it has no files).
DATASETS: dict[str, DatasetSpec] = _specs()


def list_datasets() -> list[str]:
    """The dataset names :func:`load_dataset` knows, sorted (format names not included)."""
    return sorted([*DATASETS, "synthetic"])


def list_formats() -> list[str]:
    """The format names that take ``root`` as the file or folder itself."""
    return sorted(FORMATS)


def dataset_table_markdown() -> str:
    """The Markdown table of README.md's "Datasets" section: one row per name of
    :func:`list_datasets`, in registry order, ``synthetic`` last. README's copy is
    checked against it by tests/data/test_readme_table.py."""
    rows = ["| name | file(s) under root | format | split |", "| --- | --- | --- | --- |"]
    for spec in DATASETS.values():
        fmt = FORMATS[spec.format]
        files = f"`{spec.files or spec.path}`" + (f" {spec.note}" if spec.note else "")
        rows.append(f"| `{spec.name}` | {files} | {fmt.title} | {spec.split or fmt.split} |")
    rows.append("| `synthetic` | (generated, no root) | contextual SBM | random fractions |")
    return "\n".join(rows) + "\n"


def _default_root(root: str | os.PathLike | None) -> Path:
    if root is None:
        env = os.environ.get("GNNPIPE_DATA_ROOT")
        if not env:
            raise DataError("root: expected a dataset folder via root= or $GNNPIPE_DATA_ROOT, found neither set")
        root = env
    path = Path(root).expanduser()
    if not path.exists():
        raise DataError(f"{path}: expected a dataset root folder, found no such path")
    return path


def _options(fmt: Format, options: dict[str, Any], fixed: dict[str, Any]) -> LoadOptions:
    """The validated options of one load: names checked against the format (ConfigError),
    values by :class:`LoadOptions` (DataError)."""
    allowed = (fmt.accepts | UNIVERSAL_OPTIONS) - set(fixed)
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(f"options: format {fmt.name!r} accepts {sorted(allowed)}, found unknown {unknown}")
    merged = {**fixed, **options}
    missing = sorted(k for k in fmt.required if merged.get(k) is None)
    if missing:
        raise ConfigError(f"options: format {fmt.name!r} requires {missing}, found them not given")
    return LoadOptions(**merged)


def _load_format(fmt: Format, path: Path, opts: LoadOptions, cache_name: str) -> Graph:
    if not path.exists():
        raise DataError(f"{path}: expected the {fmt.name} data ({fmt.doc}), found no such path")
    sources = fmt.files(path, opts)
    for s in sources:
        if not s.exists():
            raise DataError(f"{s}: expected the {fmt.name} file {s.name}, found it missing")
    return cached_load(cache_name, opts.key(fmt.accepts), sources, lambda: fmt.load(path, opts),
                       use_cache=opts.cache)


def _load_synthetic(options: dict[str, Any], use_cache: bool) -> Graph:
    sig = _SYNTHETIC_SIGNATURE
    try:
        bound = sig.bind(**options)
    except TypeError:
        unknown = sorted(set(options) - set(sig.parameters))
        raise ConfigError(f"options: synthetic accepts {sorted(sig.parameters)}, found unknown {unknown}") from None
    bound.apply_defaults()
    check_synthetic_options(**bound.arguments)  # before the cache: a bad value is never a "cache miss"
    # Keyed by every resolved option and the generator's version (no source files).
    key_opts = {**bound.arguments, "generator_version": GENERATOR_VERSION}
    return cached_load("synthetic", key_opts, [], lambda: synthetic_graph(**options), use_cache=use_cache)


def load_dataset(name: str, /, root: str | os.PathLike | None = None, **options: Any) -> Graph:
    """Load a named dataset (see :func:`dataset_table_markdown`) or a format from an explicit path.

    ``root`` defaults to ``$GNNPIPE_DATA_ROOT``; ``cache=False`` bypasses the cache;
    ``normalize_features=True`` (any dataset) row-normalises the features after loading
    (:meth:`Graph.row_normalize_features`); ``sparse_features`` (``"auto"``, True, False)
    and ``sparse_threshold`` choose the feature layout (:meth:`Graph.with_feature_layout`);
    other options go to the reader. Returns a
    validated graph. Unknown names raise :class:`DataError` listing the known names;
    option errors are described in the module docstring.
    """
    key = str(name).strip().lower()
    if key == "synthetic":
        opts = LoadOptions(**{k: options.pop(k) for k in UNIVERSAL_OPTIONS & options.keys()})
        graph = _load_synthetic(options, opts.cache)
    elif key in FORMATS:
        fmt = FORMATS[key]
        if root is None:
            raise DataError(f"root: format {key!r} expects root= to be the {fmt.doc}, found none")
        opts = _options(fmt, options, {})
        graph = _load_format(fmt, Path(root).expanduser(), opts, key)
    else:
        spec = DATASETS.get(key)
        if spec is None:
            raise DataError(
                f"dataset name: expected one of {list_datasets()} (or a format {list_formats()}), found {name!r}"
            )
        base = _default_root(root)
        fixed = dict(spec.options)
        if "splits_dir" in fixed:
            fixed["splits_dir"] = base / fixed["splits_dir"]
        path = base / spec.path
        if spec.name == "pubmed" and not (path / "ind.pubmed.x").exists() and (base / "planetoid-pubmed-partial").is_dir():
            path = base / "planetoid-pubmed-partial"
        fmt = FORMATS[spec.format]
        opts = _options(fmt, options, fixed)
        graph = _load_format(fmt, path, opts, spec.name)
        graph = graph if graph.name == spec.name else graph.replace(name=spec.name)
    graph = graph.with_feature_layout(opts.sparse_features, opts.sparse_threshold)
    return graph.row_normalize_features() if opts.normalize_features else graph


def load_from_config(data_config: Any) -> Graph:
    """The graph that a :class:`gnnpipe.config.DataConfig` names:
    ``load_dataset(cfg.dataset, root=cfg.resolved_root(), **cfg.options)``.

    Duck-typed (anything with ``dataset``, ``options`` and ``resolved_root()``), so that
    the data layer never imports the config layer above it.
    """
    dataset = getattr(data_config, "dataset", None)
    options = getattr(data_config, "options", None)
    resolve = getattr(data_config, "resolved_root", None)
    if not isinstance(dataset, str) or not isinstance(options, Mapping) or not callable(resolve):
        raise DataError(f"data_config: expected a DataConfig (dataset, options, resolved_root()), found "
                        f"{type(data_config).__name__}")
    return load_dataset(dataset, root=resolve(), **options)


def load_path(path: str | os.PathLike, /, format: str | None = None, **options: Any) -> Graph:
    """Load users' own data from a file or folder, guessing the format when not given.

    Guesses: ``*.tgz``/``*.tar.gz`` -> linqs; a folder with ``raw/edge.csv.gz`` -> ogb; a
    folder with ``out1_graph_edges.txt`` -> geom-gcn; a folder with ``ind.*.graph`` ->
    planetoid (``name`` from the file); ``*.npz`` by its keys (``edges`` ->
    heterophilous, ``adj_matrix`` -> graphdata, otherwise sparsegraph).
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{p}: expected a dataset file or folder, found no such path")
    if format is None:
        format = _guess_format(p, options)
    return load_dataset(format, root=p, **options)


def _guess_format(p: Path, options: dict[str, Any]) -> str:
    import zipfile

    if p.is_dir():
        if (p / "raw" / "edge.csv.gz").exists():
            return "ogb"
        if (p / "out1_graph_edges.txt").exists():
            return "geom-gcn"
        graphs = sorted(p.glob("ind.*.graph"))
        if graphs:
            options.setdefault("name", graphs[0].name.split(".")[1])
            return "planetoid"
        edges = sorted(p.glob("*_edges.csv"))
        if edges:
            options.setdefault("prefix", edges[0].name[: -len("_edges.csv")])
            return "musae"
    elif p.name.endswith((".tgz", ".tar.gz")):
        return "linqs"
    elif p.suffix == ".npz":
        try:
            with zipfile.ZipFile(p) as zf:
                keys = {n[:-4] for n in zf.namelist()}
        except (zipfile.BadZipFile, OSError) as exc:
            raise DataError(f"{p}: expected a readable .npz archive, found a corrupt file ({exc})") from None
        if "edges" in keys:
            return "heterophilous"
        if "adj_matrix" in keys:
            return "graphdata"
        return "sparsegraph"
    raise DataError(f"{p}: expected a file or folder in one of the formats {list_formats()}, found none recognised")
