"""What every reader of :mod:`gnnpipe.data.formats` shares.

Readers take the path of the file or folder they read (so users can point them at
their own data) and a :class:`~gnnpipe.data.options.LoadOptions`; they never cache (the
registry adds the cache). Conventions shared by all readers:

- ``symmetrize=True`` (default) returns the undirected graph (every edge in both
  directions, duplicates dropped, self-loops kept as the file has them); with
  ``symmetrize=False`` an edge ``a b`` (edge list) or a matrix entry ``(a, b)`` is the
  directed edge ``a -> b`` ("b aggregates from a").
- Formats without a stored split get the seeded per-class split of
  :func:`gnnpipe.data.splits.per_class_split` (options ``seed``, ``train_per_class``,
  ``val_per_class``; the rest of the labelled vertices are test). Formats with fixed
  splits take ``split=k``.
- Stored arrays are checked, never cast: edge ids and class ids must be integers,
  features numbers, stored masks bools. Text is parsed as integers where ids are meant,
  so ``1.5`` as an id is refused rather than truncated.
- Class ids are compacted in one place (:func:`finish`): negative ids mean "no label"
  (-1), and ids that skip values (BlogCatalog counting from 1, a lone class 1000000)
  are renumbered to 0..C-1 in order, with one INFO line.
- Every low-level read failure (missing, truncated or corrupt file) becomes one
  :class:`DataError` line naming the file (:func:`reading`).
"""

from __future__ import annotations

import contextlib
import csv
import logging
import re
import tarfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import scipy.sparse as sp
import torch

from gnnpipe.data.graph import Graph
from gnnpipe.data.options import LoadOptions
from gnnpipe.data.sparse import DEFAULT_SPARSE_THRESHOLD, choose_layout
from gnnpipe.data.splits import per_class_split
from gnnpipe.errors import DataError

__all__ = ["Format", "BASE", "SEEDED", "single_file", "reading", "require", "numeric_table", "int_array",
           "check_dtype", "stored_mask", "scipy_edges", "check_split_index", "compact_labels", "finish"]

logger = logging.getLogger(__name__)

#: Options every file format accepts.
BASE = frozenset({"name", "symmetrize"})
#: Options of the seeded per-class split (formats that store no split).
SEEDED = frozenset({"seed", "train_per_class", "val_per_class"})


@dataclass(frozen=True)
class Format:
    """One on-disk format: its reader, the files it reads (the cache key covers their
    size and mtime) and the options it takes.

    ``load(path, opts)`` returns a validated graph; ``files(path, opts)`` lists what it
    reads; ``accepts`` names the :class:`LoadOptions` it uses (the universal ``cache`` and
    ``normalize_features`` come on top); ``required`` those it cannot do without;
    ``doc`` says what ``root`` must be; ``title`` and ``split`` describe it in the
    dataset table of README.md.
    """

    name: str
    load: Callable[[Path, LoadOptions], Graph]
    files: Callable[[Path, LoadOptions], list[Path]]
    doc: str
    accepts: frozenset[str]
    title: str
    split: str
    required: frozenset[str] = frozenset()


def single_file(path: Path, opts: LoadOptions) -> list[Path]:
    """The file list of a format that reads ``path`` itself."""
    return [Path(path)]


# ------------------------------------------------------------------ reading
@contextlib.contextmanager
def reading(path: str | Path, what: str) -> Iterator[None]:
    """Turn any low-level read failure inside the block into one DataError line."""
    try:
        yield
    except DataError:
        raise
    except FileNotFoundError as exc:
        missing = exc.filename or path
        raise DataError(f"{missing}: expected {what}, found no such file") from None
    except (OSError, EOFError, ValueError, KeyError, IndexError, TypeError, zipfile.BadZipFile,
            tarfile.TarError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(
            f"{path}: expected {what}, found a truncated or corrupt file ({type(exc).__name__}: {exc})"
        ) from None


def require(path: Path, what: str) -> Path:
    """``path`` itself; a missing file raises DataError naming it."""
    if not path.exists():
        raise DataError(f"{path}: expected {what}, found no such file")
    return path


_INT_TOKEN = re.compile(rb"[+-]?\d+\Z")
#: True for the bytes that cannot occur in a whitespace-separated table of integers.
_NOT_INTEGER_BYTE = np.ones(256, dtype=bool)
_NOT_INTEGER_BYTE[np.frombuffer(b"0123456789+- \t\n\r\v\f", dtype=np.uint8)] = False


def _first_bad_token(text: bytes, integer: bool) -> str | None:
    """The first token of ``text`` that is not an integer (``integer``) or a number;
    None when every token is one."""
    for tok in text.split():
        if integer and not _INT_TOKEN.match(tok):
            return tok.decode(errors="replace")
        if not integer:
            try:
                float(tok)
            except ValueError:
                return tok.decode(errors="replace")
    return None


def numeric_table(data: bytes, dtype: Any, what: str, *, skip_header: bool = False) -> np.ndarray:
    """Parse a comma/whitespace separated numeric table into a 2-D array [rows, width].

    Vectorised: commas become spaces and numpy parses the whole buffer at once; the
    number count must equal rows x width of the first row, so a truncated row is
    detected. With an integer ``dtype`` a token such as ``1.5`` is refused (named in
    the error), never truncated. Neither depends on the numpy version: before 2.3
    ``np.fromstring`` parses ``1.5`` as the integer 1 and stops silently at a token
    it cannot read, so the bytes of an integer table are checked first (one
    vectorised lookup), and a short count names the first bad token when there is one.

    Shapes: -> [rows, width] of ``dtype`` ([0, 0] for empty text).
    """
    if skip_header:
        nl = data.find(b"\n")
        data = data[nl + 1:] if nl >= 0 else b""
    text = data.replace(b",", b" ").strip()
    if not text:
        return np.zeros((0, 0), dtype=dtype)
    nl = text.find(b"\n")
    width = len((text if nl < 0 else text[:nl]).split())
    rows = text.count(b"\n") + 1
    integer = np.dtype(dtype).kind in "iu"
    flat = None  # None: a token that is not a number (an integer) is named below
    if not (integer and _NOT_INTEGER_BYTE[np.frombuffer(text, dtype=np.uint8)].any()):
        try:
            with warnings.catch_warnings():
                # numpy < 2.3 warns and stops at the first token it cannot parse; the count check reports it.
                warnings.simplefilter("ignore", DeprecationWarning)
                flat = np.fromstring(text, dtype=dtype, sep=" ")
        except ValueError:  # numpy >= 2.3 at a token it cannot parse
            pass
    if flat is None or width == 0 or flat.size != width * rows:
        bad = _first_bad_token(text, integer)
        if bad is not None:
            raise DataError(f"{what}: expected a table of {'integers' if integer else 'numbers'}, found {bad!r}")
        found = "a table numpy cannot parse" if flat is None else f"{flat.size} numbers in all"
        raise DataError(f"{what}: expected {rows} rows of {width} numbers, found {found}")
    return flat.reshape(rows, width)


# ------------------------------------------------------------------ dtype checks
def check_dtype(dtype: np.dtype, what: str, expected: str, kinds: str) -> None:
    """Refuse an array whose numpy dtype kind is not one of ``kinds`` (e.g. ``"iu"``)."""
    if np.dtype(dtype).kind not in kinds:
        raise DataError(f"{what}: expected {expected}, found dtype {np.dtype(dtype)}")


def int_array(values: Iterable[Any], what: str) -> np.ndarray:
    """int64 array of Python/numpy integers (a pickled adjacency list, JSON id lists);
    a float, string or other element is refused, never truncated.

    Shapes: -> int64 [len(values)].
    """
    arr = np.array(list(values))
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    check_dtype(arr.dtype, what, "integer ids", "iu")
    return arr.astype(np.int64, copy=False).reshape(-1)


def stored_mask(mask: Any, what: str, *, zero_one_ok: bool) -> np.ndarray:
    """A mask as stored in a file, as bool. Bools always pass; with ``zero_one_ok``
    integers that are all 0 or 1 pass too (the Geom-GCN split files store uint8).

    Shapes: any -> bool, same shape.
    """
    m = np.asarray(mask)
    if m.dtype.kind == "b":
        return m
    if zero_one_ok and m.dtype.kind in "iu":
        if m.size and not np.isin(m, (0, 1)).all():
            raise DataError(f"{what}: expected a 0/1 mask, found values {np.unique(m)[:5].tolist()}")
        return m != 0
    raise DataError(f"{what}: expected a bool mask{' (or 0/1 integers)' if zero_one_ok else ''}, found dtype {m.dtype}")


def scipy_edges(adj: Any, what: str) -> np.ndarray:
    """[2, E] edge list (row -> column) of a square scipy matrix's non-zero entries.

    Shapes: adj [N, N] -> int64 [2, E].
    """
    if not sp.issparse(adj):
        raise DataError(f"{what}: expected a scipy sparse adjacency matrix, found {type(adj).__name__}")
    if adj.shape[0] != adj.shape[1]:
        raise DataError(f"{what}: expected a square adjacency matrix, found shape {adj.shape}")
    check_dtype(adj.dtype, what, "a numeric adjacency matrix", "biuf")
    coo = sp.coo_matrix(adj)
    keep = coo.data != 0
    return np.stack([coo.row[keep], coo.col[keep]]).astype(np.int64)


def check_split_index(split: Any, count: int, what: str) -> int:
    """``split`` as an index into ``count`` stored splits."""
    if isinstance(split, bool) or not isinstance(split, (int, np.integer)) or not 0 <= int(split) < count:
        raise DataError(f"{what}: split must be an integer in [0, {count - 1}], found {split!r}")
    return int(split)


# ------------------------------------------------------------------ the finisher
def compact_labels(labels: np.ndarray, source: str, num_classes: int | None) -> np.ndarray:
    """Negative ids become -1 (no label); when the format fixes no class count and the
    ids in use are not exactly 0..C-1, they are renumbered in order (one INFO line).

    Shapes: labels int64 [N] -> int64 [N].
    """
    y = np.where(labels >= 0, labels, -1)
    if num_classes is not None:
        return y
    known = y >= 0
    present = np.unique(y[known])
    if present.size and present[-1] != present.size - 1:
        logger.info("%s: renumbering %d class ids in [%d, %d] to 0..%d", source, present.size,
                    int(present[0]), int(present[-1]), present.size - 1)
        out = np.full_like(y, -1)
        out[known] = np.searchsorted(present, y[known])
        return out
    return y


def _index_or_bool_mask(mask: Any, n: int, which: str, source: str) -> np.ndarray:
    m = np.asarray(mask).reshape(-1)
    if m.dtype.kind == "b":
        if m.shape != (n,):
            raise DataError(f"{source}: expected a {which} mask of length N={n}, found length {m.shape[0]}")
        return m
    check_dtype(m.dtype, f"{source}", f"a bool {which} mask or integer {which} vertex ids", "iu")
    if m.size and (int(m.min()) < 0 or int(m.max()) >= n):
        raise DataError(f"{source}: expected {which} vertex ids in [0, {n}), found range [{m.min()}, {m.max()}]")
    out = np.zeros(n, dtype=bool)
    out[m] = True
    return out


def finish(
    edge_index: np.ndarray,
    features: Any,
    labels: Any,
    *,
    num_nodes: int,
    name: str,
    source: str,
    opts: LoadOptions,
    masks: tuple[Any, Any, Any] | None = None,
    num_classes: int | None = None,
) -> Graph:
    """Check dtypes, compact class ids, assemble, symmetrise (``opts.symmetrize``), split
    (the seeded per-class split of ``opts`` when ``masks`` is None) and validate.

    ``source`` names the input in errors; ``num_classes`` is the format's own class
    count, if it has one (Planetoid's one-hot width), else C = number of ids in use.

    Shapes: edge_index [2, E] (source, destination), integer; features [N, F] numeric,
    dense or scipy sparse (kept as a SparseFeatures when at most
    :data:`~gnnpipe.data.sparse.DEFAULT_SPARSE_THRESHOLD` of it is non-zero, else dense);
    labels [N] integer (negative = no label); masks: three bool
    [N] masks or integer vertex-id lists.
    """
    ei = np.asarray(edge_index)
    check_dtype(ei.dtype, source, "integer edge ids", "iu")
    check_dtype(features.dtype if hasattr(features, "dtype") else np.asarray(features).dtype, source,
                "numeric features", "biuf")
    feats = features if sp.issparse(features) else np.asarray(features)
    if feats.ndim != 2 or feats.shape[0] != num_nodes:
        raise DataError(f"{name}: features must have shape [N={num_nodes}, F], found {tuple(feats.shape)}")
    # The cached conversion keeps features sparse (CSR) when at most 10 % of them are
    # non-zero (never densifying a scipy matrix on the way); the registry applies the
    # caller's sparse_features / sparse_threshold after the cache.
    feats = choose_layout(feats, "auto", DEFAULT_SPARSE_THRESHOLD)
    y = np.asarray(labels).reshape(-1)
    check_dtype(y.dtype, source, "integer class ids", "iu")
    if y.shape[0] != num_nodes:
        raise DataError(f"{name}: labels must have N={num_nodes} entries, found {y.shape[0]}")
    y = compact_labels(y.astype(np.int64, copy=False), source, num_classes)
    graph = Graph.from_edge_index(torch.from_numpy(ei.astype(np.int64, copy=False)), feats, y,
                                  num_nodes=num_nodes, num_classes=num_classes, name=name)
    if opts.symmetrize:
        graph = graph.symmetrize()
    if masks is None:
        masks = per_class_split(graph.labels, graph.num_classes, train_per_class=opts.train_per_class,
                                val_per_class=opts.val_per_class, seed=opts.seed)
    else:
        masks = tuple(_index_or_bool_mask(m, num_nodes, w, source) for m, w in zip(masks, ("train", "val", "test")))
    return graph.with_masks(*masks).validate()
