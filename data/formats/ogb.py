"""OGB node-property datasets in the layout the ``ogb`` package leaves on disk (gzip csv)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np

from gnnpipe.data.formats._common import BASE, Format, finish, numeric_table, reading, require
from gnnpipe.data.graph import Graph
from gnnpipe.data.options import LoadOptions
from gnnpipe.errors import DataError

__all__ = ["load_ogb", "ogb_files", "ogb_dir", "read_gz_table", "OGB_META", "FORMAT"]

#: Per-dataset facts from ogb/nodeproppred/master.csv: (split folder, add_inverse_edge).
OGB_META: dict[str, tuple[str, bool]] = {
    "ogbn-arxiv": ("time", False),
    "ogbn-products": ("sales_ranking", True),
    "ogbn-mag": ("time", False),
}
_SPLITS = ("train", "valid", "test")


def ogb_dir(root: str | Path, name: str) -> Path:
    """``<root>/<name with - replaced by _>``, the folder the ``ogb`` package creates."""
    return Path(root) / name.replace("-", "_")


def _split_type(folder: Path, opts: LoadOptions) -> str:
    """``split_type``, else the dataset's own (master.csv), else the only folder under split/."""
    if opts.split_type is not None:
        return opts.split_type
    meta = OGB_META.get(opts.name or folder.name.replace("_", "-"))
    if meta is not None and (folder / "split" / meta[0]).is_dir():
        return meta[0]
    kinds = sorted(p.name for p in (folder / "split").iterdir() if p.is_dir()) if (folder / "split").is_dir() else []
    if len(kinds) != 1:
        raise DataError(f"{folder / 'split'}: expected exactly one split folder (or the option split_type), found {kinds}")
    return kinds[0]


def ogb_files(folder: Path, opts: LoadOptions) -> list[Path]:
    """raw/*.csv.gz (node-feat only when present) and the three split files."""
    folder = Path(folder)
    raw = folder / "raw"
    files = [raw / f for f in ("edge.csv.gz", "num-node-list.csv.gz", "num-edge-list.csv.gz", "node-label.csv.gz")]
    if (raw / "node-feat.csv.gz").exists():
        files.append(raw / "node-feat.csv.gz")
    kind = _split_type(folder, opts)
    return files + [folder / "split" / kind / f"{s}.csv.gz" for s in _SPLITS]


def read_gz_table(path: Path, dtype: Any, *, block_bytes: int = 64 << 20) -> np.ndarray:
    """A gzip csv as a 2-D array, parsed in blocks of whole lines (~``block_bytes`` of
    text each), so that peak memory is the result plus one block, not the whole text
    several times over (ogbn-products' files are GBs of text).

    Shapes: -> [rows, width].
    """
    require(path, "an OGB gzip csv")
    parts: list[np.ndarray] = []
    with reading(path, "a gzip-compressed csv"):
        with gzip.open(path, "rb") as fh:
            rest = b""
            while True:
                chunk = fh.read(block_bytes)
                data = rest + chunk
                if not chunk:
                    rest = b""
                else:
                    cut = data.rfind(b"\n") + 1
                    data, rest = data[:cut], data[cut:]
                if data.strip():
                    parts.append(numeric_table(data, dtype, str(path)))
                if not chunk:
                    break
    if not parts:
        return np.zeros((0, 0), dtype=dtype)
    widths = {p.shape[1] for p in parts}
    if len(widths) != 1:
        raise DataError(f"{path}: expected rows of one width, found widths {sorted(widths)}")
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _labels(path: Path, n: int) -> np.ndarray:
    """Class ids of node-label.csv.gz (read as float so that an empty / nan row means
    no label, -1); a fractional id is refused. Shapes: -> int64 [N]."""
    lab = read_gz_table(path, np.float64)
    if lab.shape[0] != n or (n and lab.shape[1] != 1):
        raise DataError(f"{path}: expected N={n} rows of one label, found shape {lab.shape}")
    lab = lab.reshape(-1)
    known = np.isfinite(lab)
    bad = known & (lab != np.round(lab))
    if bad.any():
        raise DataError(f"{path}: expected integer class ids (nan = none), found {lab[bad][0]!r}")
    return np.where(known, lab, -1).astype(np.int64)


def load_ogb(folder: Path, opts: LoadOptions) -> Graph:
    """An OGB node-property dataset in the layout the ``ogb`` package leaves on disk::

        <folder>/raw/edge.csv.gz            E rows "src,dst" (one direction per undirected pair)
        <folder>/raw/num-node-list.csv.gz   one row: N
        <folder>/raw/num-edge-list.csv.gz   one row: E
        <folder>/raw/node-feat.csv.gz       N rows of F floats (optional)
        <folder>/raw/node-label.csv.gz      N rows: class id (empty / nan = no label)
        <folder>/split/<split_type>/{train,valid,test}.csv.gz   vertex ids, one per row

    ``folder`` is ``<root>/ogbn_arxiv`` etc. ``split_type`` defaults to the dataset's
    (``time`` for arxiv, ``sales_ranking`` for products) or the only folder under split/.
    ``add_inverse_edge`` (default from master.csv, False otherwise) only matters with
    ``symmetrize=False``.
    """
    folder = Path(folder)
    name = opts.name or folder.name.replace("_", "-")
    meta = OGB_META.get(name)
    add_inverse = opts.add_inverse_edge if opts.add_inverse_edge is not None else bool(meta and meta[1])
    raw = folder / "raw"
    n_list = read_gz_table(raw / "num-node-list.csv.gz", np.int64).reshape(-1)
    e_list = read_gz_table(raw / "num-edge-list.csv.gz", np.int64).reshape(-1)
    if n_list.size != 1 or e_list.size != 1:
        raise DataError(f"{raw}: expected a single graph (one row in num-node-list/num-edge-list), found {n_list.size}")
    n, e = int(n_list[0]), int(e_list[0])
    edges = read_gz_table(raw / "edge.csv.gz", np.int64)
    if edges.shape[0] != e or (e and edges.shape[1] != 2):
        raise DataError(f"{raw / 'edge.csv.gz'}: expected {e} rows of 2 ids (num-edge-list), found shape {edges.shape}")
    if (raw / "node-feat.csv.gz").exists():
        feats = read_gz_table(raw / "node-feat.csv.gz", np.float32)
        if feats.shape[0] != n:
            raise DataError(f"{raw / 'node-feat.csv.gz'}: expected N={n} rows, found {feats.shape[0]}")
    else:
        feats = np.zeros((n, 0), dtype=np.float32)
    labels = _labels(raw / "node-label.csv.gz", n)
    kind = _split_type(folder, opts)
    masks = []
    for s in _SPLITS:
        f = folder / "split" / kind / f"{s}.csv.gz"
        idx = read_gz_table(f, np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise DataError(f"{f}: expected vertex ids in [0, {n}), found range [{idx.min()}, {idx.max()}]")
        masks.append(idx)
    ei = edges.reshape(-1, 2).T
    if add_inverse and not opts.symmetrize:
        ei = np.concatenate([ei, ei[::-1]], axis=1)
    return finish(ei, feats, labels, num_nodes=n, name=name, source=str(folder), opts=opts, masks=tuple(masks))


FORMAT = Format(
    "ogb", load_ogb, ogb_files, "OGB dataset folder with raw/ and split/",
    accepts=BASE | {"split_type", "add_inverse_edge"}, title="OGB", split="split/<split_type>",
)
