"""The converted-graph cache: hits, misses, invalidation and corrupt entries."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import torch

from gnnpipe.data import Graph, load_dataset
from gnnpipe.data import loaders
from gnnpipe.data.cache import cache_dir, cached_load, read_graph, write_graph
from gnnpipe.errors import DataError

FIELDS = ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask")


def _graph(seed: int = 0, f: int = 3) -> Graph:
    rng = np.random.default_rng(seed)
    n = 40
    ei = rng.integers(0, n, size=(2, 150))
    x = rng.standard_normal((n, f)).astype(np.float32)
    x[:, :1] = 0.0  # partly sparse
    return Graph.from_edge_index(ei, x, rng.integers(0, 4, n), train_mask=np.arange(n) < 8,
                                 test_mask=np.arange(n) >= 30, name=f"g{seed}").validate()


def _same(a: Graph, b: Graph) -> bool:
    return all(torch.equal(getattr(a, k), getattr(b, k)) for k in FIELDS) and (a.num_classes, a.name) == (b.num_classes, b.name)


class _Builder:
    def __init__(self, graph: Graph) -> None:
        self.graph, self.calls = graph, 0

    def __call__(self) -> Graph:
        self.calls += 1
        return self.graph


def _entries() -> list:
    return sorted(p for p in cache_dir().iterdir() if p.suffix == ".graph")


def test_miss_then_hit(tmp_path):
    src = tmp_path / "src.txt"
    src.write_text("v1")
    build = _Builder(_graph())
    a = cached_load("toy", {"k": 1}, [src], build)
    b = cached_load("toy", {"k": 1}, [src], build)
    assert build.calls == 1 and _same(a, b) and _same(a, build.graph)
    assert len(_entries()) == 1
    assert not [p for p in cache_dir().iterdir() if p.suffix == ".tmp"]  # atomic write left no temp file


def test_options_source_change_and_version_invalidate(tmp_path, monkeypatch):
    src = tmp_path / "src.txt"
    src.write_text("v1")
    build = _Builder(_graph())
    cached_load("toy", {"k": 1}, [src], build)
    cached_load("toy", {"k": 2}, [src], build)
    assert build.calls == 2
    src.write_text("v2, longer")  # size and mtime change
    os.utime(src, ns=(1, 1))
    cached_load("toy", {"k": 1}, [src], build)
    assert build.calls == 3
    from gnnpipe.data import cache

    monkeypatch.setattr(cache, "FORMAT_VERSION", cache.FORMAT_VERSION + 1)
    cached_load("toy", {"k": 1}, [src], build)
    assert build.calls == 4


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_entry_is_rebuilt_with_warning_never_used(tmp_path, caplog, damage):
    src = tmp_path / "src.txt"
    src.write_text("v1")
    good = _graph()
    build = _Builder(good)
    cached_load("toy", {}, [src], build)
    (entry,) = _entries()
    raw = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(raw[: len(raw) - 100])
    elif damage == "flip":
        b = bytearray(raw)
        b[-80] ^= 0xFF  # inside the payload (features / masks)
        entry.write_bytes(bytes(b))
    elif damage == "garbage":
        entry.write_bytes(b"not a graph" * 10)
    else:
        entry.write_bytes(b"")
    with pytest.raises(DataError, match=str(entry.name)):
        read_graph(entry)
    with caplog.at_level(logging.WARNING, logger="gnnpipe.data.cache"):
        again = cached_load("toy", {}, [src], build)
    assert build.calls == 2 and _same(again, good)
    assert any("corrupt cache entry" in r.getMessage() for r in caplog.records)
    assert _same(read_graph(entry), good)  # the entry was rewritten


def test_write_read_round_trip_dense_and_empty(tmp_path):
    for g in (_graph(1), _graph(2, f=0)):
        write_graph(g, tmp_path / "x.graph")
        assert _same(read_graph(tmp_path / "x.graph"), g)


def test_second_load_dataset_is_served_from_cache(tmp_path, monkeypatch, ogb):
    ogb.write(tmp_path)
    first = load_dataset("ogbn-arxiv", root=tmp_path)
    assert len(_entries()) == 1

    def refuse(*args, **kwargs):
        raise AssertionError("the reader ran although the cache holds the graph")

    fmt = loaders.FORMATS["ogb"]
    monkeypatch.setitem(loaders.FORMATS, "ogb", loaders.Format(fmt.name, refuse, fmt.files, fmt.doc))
    second = load_dataset("ogbn-arxiv", root=tmp_path)
    assert _same(first, second)
    with pytest.raises(AssertionError, match="reader ran"):
        load_dataset("ogbn-arxiv", root=tmp_path, cache=False)


def test_cache_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNPIPE_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("GNNPIPE_CACHE_DIR")
    assert cache_dir() == __import__("pathlib").Path.home() / ".cache" / "gnnpipe"
