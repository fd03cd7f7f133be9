"""Dataset registry: ``load_dataset(name, root=None, **options)`` and ``list_datasets()``.

``root`` (default ``$GNNPIPE_DATA_ROOT``) is a folder laid out like the shared dataset
collection; each name reads the path below, relative to ``root``. Converted graphs (and
synthetic graphs, keyed by their options) are cached (:mod:`gnnpipe.data.cache`); pass
``cache=False`` to bypass the cache.

Named datasets (graphs are returned symmetrised; ``symmetrize=False`` keeps the file's
direction):

====================  ==================================================  ================  =====================
name                  file(s) under root                                  format            split
====================  ==================================================  ================  =====================
cora                  planetoid/ind.cora.*                                Planetoid         public 140/500/1000
citeseer              planetoid/ind.citeseer.*                            Planetoid         public 120/500/1000
pubmed                planetoid/ind.pubmed.* or planetoid-pubmed-partial/ Planetoid         public 60/500/1000
gnnbench-cora         gnn-benchmark/cora.npz                              SparseGraph npz   seeded per class
gnnbench-citeseer     gnn-benchmark/citeseer.npz                          SparseGraph npz   seeded per class
cora_ml               ppnp/cora_ml.npz                                    SparseGraph npz   seeded per class
graphdata-cora_ml     graphdata/cora_ml.npz                               GraphData npz     seeded per class
amazon_photo          graphdata/amazon_photo.npz                          GraphData npz     seeded per class
coauthor_cs           graphdata/coauthor_cs.npz                           GraphData npz     seeded per class
citeseer_full         graphdata/citeseer_full.npz                         GraphData npz     seeded per class
dblp                  graphdata/dblp.npz                                  GraphData npz     seeded per class
acm                   graphdata/acm.npz                                   GraphData npz     seeded per class
uai                   graphdata/uai.npz                                   GraphData npz     seeded per class
blogcatalog           graphdata/blogcatalog.npz                           GraphData npz     seeded per class
flickr_lane           graphdata/flickr.npz (7,575-vertex LANE Flickr)     GraphData npz     seeded per class
minesweeper           heterophilous/minesweeper.npz                       heterophilous     10 fixed (split=k)
tolokers              heterophilous/tolokers.npz                          heterophilous     10 fixed (split=k)
actor                 heterophilous/actor.npz                             heterophilous     10 fixed (split=k)
cornell               heterophilous/cornell.npz                           heterophilous     10 fixed (split=k)
texas                 heterophilous/texas.npz                             heterophilous     10 fixed (split=k)
wisconsin             heterophilous/wisconsin.npz                         heterophilous     10 fixed (split=k)
geom-cornell          geom-gcn/new_data/cornell/ (+ geom-gcn/splits/)     Geom-GCN text     10 fixed (split=k)
geom-texas            geom-gcn/new_data/texas/                            Geom-GCN text     10 fixed (split=k)
geom-wisconsin        geom-gcn/new_data/wisconsin/                        Geom-GCN text     10 fixed (split=k)
geom-film             geom-gcn/new_data/film/                             Geom-GCN text     10 fixed (split=k)
facebook              musae/facebook_{edges.csv,.json,target.csv}         MUSAE             seeded per class
twitch_de             musae/DE_*                                          MUSAE             seeded per class
twitch_engb           musae/ENGB_*                                        MUSAE             seeded per class
linqs-cora            linqs/cora.tgz                                      LINQS tgz         seeded per class
linqs-citeseer        linqs/citeseer.tgz                                  LINQS tgz         seeded per class
polblogs              nettack/polblogs.npz (identity features)            SparseGraph npz   seeded per class
ogbn-arxiv            ogbn_arxiv/ (raw/, split/time/)                     OGB               split/time
ogbn-products         ogbn_products/ (raw/, split/sales_ranking/)         OGB               split/sales_ranking
synthetic             (generated, no root)                                contextual SBM    random fractions
====================  ==================================================  ================  =====================

``cora``/``citeseer``/``pubmed`` also take ``split=k`` (0..9): the Geom-GCN 60/20/20
split from ``geom-gcn/splits/`` (unlabelled vertices dropped from its masks).
"Seeded per class": 20 training and 30 validation vertices per class, the rest test
(options ``seed``, ``train_per_class``, ``val_per_class``). The raw Geom-GCN Cornell file
is byte-identical to Texas upstream; prefer ``cornell`` (heterophilous version).
``pubmed`` refuses with a DataError naming the missing ``ind.pubmed.allx`` when that file
is absent; ``structure_only=True`` loads its graph, labels and split with features [N, 0].

Users' own data: the format names ``planetoid`` (option ``name=``), ``sparsegraph``,
``graphdata``, ``heterophilous``, ``geom-gcn`` (option ``splits_dir=``), ``musae``
(option ``prefix=``), ``linqs`` and ``ogb`` take ``root`` as the file or folder itself,
e.g. ``load_dataset("ogb", root="/data/ogbn_arxiv")``; :func:`load_path` guesses the
format from the path.

The cache lives in ``$GNNPIPE_CACHE_DIR`` (default ``~/.cache/gnnpipe``); entries hold
dense features, so a bag-of-words dataset's entry is N x F x 4 bytes (Coauthor CS:
500 MB). ``python -m gnnpipe.data list`` / ``info NAME --root DIR`` prints the names or
one dataset's statistics.
"""

from __future__ import annotations

import inspect
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnpipe.data.cache import cached_load
from gnnpipe.data.graph import Graph
from gnnpipe.data.loaders import FORMATS, ogb_dir
from gnnpipe.data.synthetic import GENERATOR_VERSION, synthetic_graph
from gnnpipe.errors import ConfigError, DataError

__all__ = ["load_dataset", "list_datasets", "list_formats", "load_path", "DatasetSpec", "DATASETS"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetSpec:
    """A named dataset: the format that reads it, its path under root and fixed options."""

    name: str
    format: str
    path: str
    options: dict[str, Any] = field(default_factory=dict)


def _specs() -> dict[str, DatasetSpec]:
    s: list[DatasetSpec] = [
        DatasetSpec("cora", "planetoid", "planetoid", {"name": "cora", "splits_dir": "geom-gcn/splits"}),
        DatasetSpec("citeseer", "planetoid", "planetoid", {"name": "citeseer", "splits_dir": "geom-gcn/splits"}),
        DatasetSpec("pubmed", "planetoid", "planetoid", {"name": "pubmed", "splits_dir": "geom-gcn/splits"}),
        DatasetSpec("gnnbench-cora", "sparsegraph", "gnn-benchmark/cora.npz"),
        DatasetSpec("gnnbench-citeseer", "sparsegraph", "gnn-benchmark/citeseer.npz"),
        DatasetSpec("cora_ml", "sparsegraph", "ppnp/cora_ml.npz"),
        DatasetSpec("polblogs", "sparsegraph", "nettack/polblogs.npz"),
        DatasetSpec("graphdata-cora_ml", "graphdata", "graphdata/cora_ml.npz"),
        DatasetSpec("flickr_lane", "graphdata", "graphdata/flickr.npz"),
        DatasetSpec("linqs-cora", "linqs", "linqs/cora.tgz"),
        DatasetSpec("linqs-citeseer", "linqs", "linqs/citeseer.tgz"),
        DatasetSpec("facebook", "musae", "musae", {"prefix": "facebook"}),
        DatasetSpec("twitch_de", "musae", "musae", {"prefix": "DE"}),
        DatasetSpec("twitch_engb", "musae", "musae", {"prefix": "ENGB"}),
    ]
    for n in ("amazon_photo", "coauthor_cs", "citeseer_full", "dblp", "acm", "uai", "blogcatalog"):
        s.append(DatasetSpec(n, "graphdata", f"graphdata/{n}.npz"))
    for n in ("minesweeper", "tolokers", "actor", "cornell", "texas", "wisconsin"):
        s.append(DatasetSpec(n, "heterophilous", f"heterophilous/{n}.npz"))
    for n in ("cornell", "texas", "wisconsin", "film"):
        s.append(DatasetSpec(f"geom-{n}", "geom-gcn", f"geom-gcn/new_data/{n}", {"name": n, "splits_dir": "geom-gcn/splits"}))
    for n in ("ogbn-arxiv", "ogbn-products"):
        s.append(DatasetSpec(n, "ogb", str(ogb_dir("", n)), {"name": n}))
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


def _check_options(fmt: str, fn: Any, options: dict[str, Any], fixed: dict[str, Any]) -> None:
    params = inspect.signature(fn).parameters
    allowed = {k for k, p in params.items() if p.kind == p.KEYWORD_ONLY} - set(fixed)
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(f"options: format {fmt!r} accepts {sorted(allowed)}, found unknown {unknown}")


def _load_format(fmt: str, path: Path, options: dict[str, Any], *, fixed: dict[str, Any], cache: bool,
                 cache_name: str) -> Graph:
    f = FORMATS[fmt]
    _check_options(fmt, f.load, options, fixed)
    kwargs = {**fixed, **options}
    if not path.exists():
        raise DataError(f"{path}: expected the {fmt} data ({f.doc}), found no such path")
    sources = f.files(path, **kwargs)
    for s in sources:
        if not s.exists():
            raise DataError(f"{s}: expected the {fmt} file {s.name}, found it missing")
    key_opts = {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()}
    return cached_load(f"{cache_name}", key_opts, sources, lambda: f.load(path, **kwargs), use_cache=cache)


def load_dataset(name: str, /, root: str | os.PathLike | None = None, **options: Any) -> Graph:
    """Load a named dataset (see the module table) or a format from an explicit path.

    ``root`` defaults to ``$GNNPIPE_DATA_ROOT``; ``cache=False`` bypasses the cache; other
    options go to the reader (unknown ones raise :class:`ConfigError`). Returns a
    validated graph. Unknown names raise :class:`DataError` listing the known names.
    ``normalize_features=True`` (any dataset) row-normalises the features after loading
    (:meth:`Graph.row_normalize_features`); the cache keeps the file's own values.
    """
    normalize = options.pop("normalize_features", False)
    if not isinstance(normalize, bool):
        raise ConfigError(f"options: normalize_features expects true or false, found {normalize!r}")
    graph = _load_named(name, root, options)
    return graph.row_normalize_features() if normalize else graph


def _load_named(name: str, root: str | os.PathLike | None, options: dict[str, Any]) -> Graph:
    key = str(name).strip().lower()
    cache = bool(options.pop("cache", True))
    if key == "synthetic":
        sig = _SYNTHETIC_SIGNATURE
        try:
            bound = sig.bind(**options)
        except TypeError:
            raise ConfigError(f"options: synthetic accepts {sorted(sig.parameters)}, found {sorted(options)}") from None
        bound.apply_defaults()
        # Keyed by every resolved option and the generator's version (no source files).
        key_opts = {**bound.arguments, "generator_version": GENERATOR_VERSION}
        return cached_load("synthetic", key_opts, [], lambda: synthetic_graph(**options), use_cache=cache)
    if key in FORMATS:
        if root is None:
            raise DataError(f"root: format {key!r} expects root= to be the {FORMATS[key].doc}, found none")
        path = Path(root).expanduser()
        return _load_format(key, path, options, fixed={}, cache=cache, cache_name=key)
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
    graph = _load_format(spec.format, path, options, fixed=fixed, cache=cache, cache_name=spec.name)
    return graph if graph.name == spec.name else graph.replace(name=spec.name)


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
