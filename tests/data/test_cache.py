"""The converted-graph cache: hits, misses, invalidation and corrupt entries."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import socket
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

from gnnpipe.data import Graph, load_dataset
from gnnpipe.data import formats
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


def _payload_start(raw: bytes) -> tuple[dict, int]:
    """The header and the file offset of the payload (layout of gnnpipe.data.container)."""
    _, _, hlen = struct.unpack_from("<8sIQ", raw, 0)
    return json.loads(raw[20:20 + hlen]), 20 + hlen


def _swap_two_label_words(raw: bytes) -> bytes:
    header, start = _payload_start(raw)
    off = start + header["fields"]["labels"]["offset"]
    labels = np.frombuffer(raw[off:off + header["fields"]["labels"]["nbytes"]], dtype="<i8")
    i, j = off, off + 8 * int(np.flatnonzero(labels != labels[0])[0])  # two words that differ
    b = bytearray(raw)
    b[i:i + 8], b[j:j + 8] = raw[j:j + 8], raw[i:i + 8]
    return bytes(b)


def _edit_num_classes(raw: bytes) -> bytes:
    header, _ = _payload_start(raw)
    old = f'"num_classes": {header["num_classes"]}'.encode()
    assert raw.count(old) == 1
    return raw.replace(old, f'"num_classes": {header["num_classes"] + 1}'.encode())


DAMAGE = {
    "truncate": lambda raw: raw[: len(raw) - 100],
    "flip": lambda raw: raw[:-80] + bytes([raw[-80] ^ 0xFF]) + raw[-79:],  # inside the payload (masks)
    "garbage": lambda raw: b"not a graph" * 10,
    "empty": lambda raw: b"",
    "num_classes edited": _edit_num_classes,
    "label words swapped": _swap_two_label_words,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_corrupt_entry_is_rebuilt_with_one_warning_never_used(tmp_path, caplog, damage):
    src = tmp_path / "src.txt"
    src.write_text("v1")
    good = _graph()
    build = _Builder(good)
    cached_load("toy", {}, [src], build)
    (entry,) = _entries()
    entry.write_bytes(DAMAGE[damage](entry.read_bytes()))
    with pytest.raises(DataError, match=str(entry.name)):
        read_graph(entry)
    with caplog.at_level(logging.WARNING, logger="gnnpipe.data.cache"):
        again = cached_load("toy", {}, [src], build)
    assert build.calls == 2 and _same(again, good)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "corrupt cache entry" in warnings[0].getMessage()
    assert _same(read_graph(entry), good)  # the entry was rewritten


def _written(g: Graph) -> bytes:
    path = cache_dir() / "w.graph"
    write_graph(g, path)
    return path.read_bytes()


def test_swapped_words_keep_the_old_word_sum():
    """Why a word sum was not enough: the damage above leaves it unchanged."""
    raw = _swap_two_label_words(_written(_graph()))
    ref = _written(_graph())
    _, start = _payload_start(raw)
    words = lambda b: int(np.frombuffer(b[start:len(b) - 32], dtype="<u8").sum(dtype=np.uint64))  # noqa: E731
    assert raw != ref and words(raw) == words(ref)


def test_opening_an_entry_removes_stale_temporaries_of_it(tmp_path):
    src = tmp_path / "src.txt"
    src.write_text("v1")
    build = _Builder(_graph())
    cached_load("toy", {}, [src], build)
    (entry,) = _entries()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname())
    stale = entry.with_name(f".{entry.name}.{host}.{dead.pid}.abcdef.tmp")
    live = entry.with_name(f".{entry.name}.{host}.{os.getpid()}.abcdef.tmp")
    stale.write_bytes(b"half an entry")
    live.write_bytes(b"being written")
    cached_load("toy", {}, [src], build)
    assert build.calls == 1 and not stale.exists() and live.exists()


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

    monkeypatch.setitem(formats.FORMATS, "ogb", dataclasses.replace(formats.FORMATS["ogb"], load=refuse))
    second = load_dataset("ogbn-arxiv", root=tmp_path)
    assert _same(first, second)
    with pytest.raises(AssertionError, match="reader ran"):
        load_dataset("ogbn-arxiv", root=tmp_path, cache=False)


def test_cache_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNPIPE_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("GNNPIPE_CACHE_DIR")
    assert cache_dir() == __import__("pathlib").Path.home() / ".cache" / "gnnpipe"
