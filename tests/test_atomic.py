"""gnnpipe.atomic: a file appears complete or not at all."""

from __future__ import annotations

import pytest

from gnnpipe.atomic import atomic_open


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


def test_text_mode_and_the_usual_file_mode(tmp_path):
    import os

    target = tmp_path / "record.json"
    with atomic_open(target, "w", encoding="utf-8") as f:
        f.write("{}\n")
    assert target.read_text() == "{}\n"
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask
