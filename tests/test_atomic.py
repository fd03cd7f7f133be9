"""gnnpipe.atomic: a file appears complete or not at all, with the usual mode, and the
temporaries of killed writers do not pile up."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import pytest

from gnnpipe import atomic
from gnnpipe.atomic import STALE_AFTER_S, atomic_open, remove_stale_temporaries

HOST = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname())


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _temp(target, pid: int, host: str = HOST, token: str = "0123abcd"):
    t = target.with_name(f".{target.name}.{host}.{pid}.{token}.tmp")
    t.write_bytes(b"half written")
    return t


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "sub" / "entry.bin"
    with atomic_open(target, "wb") as f:
        f.write(b"old contents")
    with pytest.raises(RuntimeError):
        with atomic_open(target, "wb") as f:
            f.write(b"half of the new")
            raise RuntimeError("writer died")
    assert target.read_bytes() == b"old contents"
    assert sorted(p.name for p in target.parent.iterdir()) == ["entry.bin"]


def test_the_temporary_names_its_owner(tmp_path):
    target = tmp_path / "entry.bin"
    with atomic_open(target, "wb") as f:
        (tmp,) = [p.name for p in tmp_path.iterdir()]
        f.write(b"x")
    assert re.fullmatch(rf"\.entry\.bin\.{HOST}\.{os.getpid()}\.[0-9a-f]+\.tmp", tmp)


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_mode_is_0666_less_the_umask_and_the_umask_is_never_touched(tmp_path, monkeypatch, umask):
    real_umask = os.umask
    saved = real_umask(umask)
    try:
        def refuse(*args):
            raise AssertionError("atomic_open changed the process umask")

        monkeypatch.setattr(os, "umask", refuse)
        target = tmp_path / "record.json"
        with atomic_open(target, "w", encoding="utf-8") as f:
            f.write("{}\n")
    finally:
        monkeypatch.undo()
        real_umask(saved)
    assert target.read_text() == "{}\n"
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_dead_writers_temporary_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "entry.bin"
    stale = _temp(target, _dead_pid())
    with atomic_open(target, "wb") as f:
        f.write(b"new")
    assert not stale.exists() and target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.bin"]


def test_a_live_writers_temporary_is_left_alone(tmp_path):
    target = tmp_path / "entry.bin"
    mine = _temp(target, os.getpid())
    parent = _temp(target, os.getppid(), token="ffff")
    with atomic_open(target, "wb") as f:
        f.write(b"new")
    assert mine.exists() and parent.exists()


def test_old_temporaries_go_whoever_wrote_them_young_ones_of_other_hosts_stay(tmp_path):
    target = tmp_path / "entry.bin"
    young_elsewhere = _temp(target, 1, host="other-host")
    old_elsewhere = _temp(target, 1, host="other-host", token="aaaa")
    old_mine = _temp(target, os.getpid(), token="bbbb")
    past = time.time() - STALE_AFTER_S - 60
    for p in (old_elsewhere, old_mine):
        os.utime(p, (past, past))
    removed = remove_stale_temporaries(target)
    assert sorted(removed) == sorted([old_elsewhere, old_mine])
    assert young_elsewhere.exists()


def test_temporaries_of_other_targets_are_not_touched(tmp_path):
    target = tmp_path / "a"
    other = _temp(tmp_path / "a.b", _dead_pid())  # ".a.b.<host>..." also starts with ".a."
    unrelated = tmp_path / ".a.not-a-temporary.tmp"
    unrelated.write_bytes(b"")
    assert remove_stale_temporaries(target) == [] and other.exists() and unrelated.exists()
    assert remove_stale_temporaries(tmp_path / "a.b") == [other]


def test_missing_folder_has_nothing_to_remove(tmp_path):
    assert remove_stale_temporaries(tmp_path / "no" / "such" / "entry") == []
    assert atomic._pid_alive(os.getpid())
