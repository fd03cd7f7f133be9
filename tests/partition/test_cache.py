"""The partition disk cache: miss -> build + write, hit -> no METIS, damage -> rebuild."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pymetis
import pytest
import torch

from gnnpipe.partition import chunk_graph, partition_cache_dir, partition_graph, partition_key


class _CountingMetis:
    def __init__(self, monkeypatch):
        self.calls = 0
        self._real = pymetis.part_graph
        monkeypatch.setattr(pymetis, "part_graph", self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self._real(*args, **kwargs)


def _entries() -> list[Path]:
    folder = partition_cache_dir()
    return sorted(folder.glob("*.gpart")) if folder.is_dir() else []


def test_cache_lives_under_env_folder():
    assert partition_cache_dir() == Path(os.environ["GNNPIPE_CACHE_DIR"]) / "partitions"


def test_miss_builds_and_writes_then_hit_skips_metis(make_graph, monkeypatch):
    metis = _CountingMetis(monkeypatch)
    g = make_graph(150, 600, seed=1)
    first = partition_graph(g, 4, seed=2)
    assert metis.calls == 1 and len(_entries()) == 1
    second = partition_graph(g, 4, seed=2)
    assert metis.calls == 1
    assert torch.equal(first.parts, second.parts) and torch.equal(first.perm, second.perm)
    assert (second.method, second.seed, second.num_parts) == ("metis", 2, 4)
    # chunk_graph goes through the same cache.
    cg = chunk_graph(g, 4, seed=2)
    assert metis.calls == 1 and torch.equal(cg.partition.parts, first.parts)
    # No temporary files left behind.
    assert [p.name for p in partition_cache_dir().iterdir()] == [e.name for e in _entries()]


def test_parameters_and_structure_change_the_key(make_graph, monkeypatch):
    metis = _CountingMetis(monkeypatch)
    g = make_graph(150, 600, seed=1)
    partition_graph(g, 4, seed=0)
    partition_graph(g, 4, seed=1)
    partition_graph(g, 5, seed=0)
    partition_graph(g, 4, seed=0, vertex_weights="degree")
    other = make_graph(150, 600, seed=9)
    partition_graph(other, 4, seed=0)
    assert metis.calls == 5 and len(_entries()) == 5
    # Features are not part of the key: a partition does not depend on them.
    g2 = g.replace(features=torch.randn_like(g.features))
    assert partition_key(g2, 4, "metis", 0, None) == partition_key(g, 4, "metis", 0, None)
    partition_graph(g2, 4, seed=0)
    assert metis.calls == 5


def test_cache_off_and_random_never_touch_disk(make_graph, monkeypatch):
    metis = _CountingMetis(monkeypatch)
    g = make_graph(100, 300, seed=2)
    partition_graph(g, 3, cache=False)
    partition_graph(g, 3, cache=False)
    partition_graph(g, 3, method="random")
    assert metis.calls == 2 and _entries() == []


def test_explicit_cache_dir(make_graph, tmp_path):
    g = make_graph(100, 300, seed=2)
    partition_graph(g, 3, cache_dir=tmp_path)
    assert len(list((tmp_path / "partitions").glob("*.gpart"))) == 1 and _entries() == []


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_payload_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-40] ^= 0x01  # inside the parts payload, before the checksum
    path.write_bytes(bytes(data))


def _flip_header_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[20] ^= 0x20
    path.write_bytes(bytes(data))


def _edit_num_parts(path: Path) -> None:
    """A well-formed header edit: only the checksum can tell."""
    data = path.read_bytes()
    assert data.count(b'"num_parts": 4') == 1
    path.write_bytes(data.replace(b'"num_parts": 4', b'"num_parts": 5'))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [_truncate, _flip_payload_byte, _flip_header_byte, _edit_num_parts, _empty])
def test_damaged_entry_is_rebuilt_with_warning(make_graph, monkeypatch, caplog, damage):
    metis = _CountingMetis(monkeypatch)
    g = make_graph(150, 600, seed=3)
    good = partition_graph(g, 4)
    (entry,) = _entries()
    damage(entry)
    with caplog.at_level(logging.WARNING, logger="gnnpipe.partition.cache"):
        again = partition_graph(g, 4)
    assert metis.calls == 2
    assert torch.equal(again.parts, good.parts)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "corrupt partition cache entry" in warnings[0].getMessage()
    # The rebuilt entry is valid again: next call is a hit without warnings.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gnnpipe.partition.cache"):
        partition_graph(g, 4)
    assert metis.calls == 2 and not caplog.records


def test_entry_of_another_key_is_not_used(make_graph, monkeypatch, caplog):
    metis = _CountingMetis(monkeypatch)
    g = make_graph(150, 600, seed=4)
    a = partition_graph(g, 4, seed=0)
    (entry_a,) = _entries()
    b = partition_graph(g, 4, seed=5)
    (entry_b,) = [e for e in _entries() if e != entry_a]
    # Put seed 0's (internally valid) file under seed 5's name.
    entry_b.write_bytes(entry_a.read_bytes())
    with caplog.at_level(logging.WARNING, logger="gnnpipe.partition.cache"):
        again = partition_graph(g, 4, seed=5)
    assert metis.calls == 3
    assert torch.equal(again.parts, b.parts) and again.seed == 5
    assert any("another graph or parameter set" in r.getMessage() for r in caplog.records)
    assert a.seed == 0


def test_opening_an_entry_removes_stale_temporaries_of_it(make_graph, monkeypatch):
    metis = _CountingMetis(monkeypatch)
    g = make_graph(100, 300, seed=6)
    partition_graph(g, 3)
    (entry,) = _entries()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname())
    stale = entry.with_name(f".{entry.name}.{host}.{dead.pid}.0123ab.tmp")
    stale.write_bytes(b"half an entry")
    partition_graph(g, 3)
    assert metis.calls == 1 and not stale.exists()


def test_unwritable_cache_folder_only_warns(make_graph, monkeypatch, caplog, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    g = make_graph(100, 300, seed=5)
    with caplog.at_level(logging.WARNING, logger="gnnpipe.partition.cache"):
        part = partition_graph(g, 3, cache_dir=blocker)
    assert part.num_parts == 3
    assert any("could not write" in r.getMessage() for r in caplog.records)
