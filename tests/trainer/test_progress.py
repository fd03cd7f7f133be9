"""Progress: a log line every N epochs and at the last; the bar only when enabled;
logging carries the rank."""

from __future__ import annotations

import io

from gnnpipe.logs import setup_logging
from gnnpipe.trainer.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_lines_every_n_epochs_and_no_bar_off_a_terminal(restore_logging):
    logs = io.StringIO()
    setup_logging("INFO", rank=3, stream=logs)  # the logger's prefix; Progress logs as rank 0
    stream = io.StringIO()
    p = Progress(7, log_every=3, stream=stream)
    assert not p.enabled
    for e in range(1, 8):
        p.update(e, loss=1.0 / e, epoch_time_s=0.01, val_acc=0.5 if e % 2 == 0 else None)
    p.close()
    lines = logs.getvalue().splitlines()
    assert [ln.split("epoch ")[1].split("/")[0].strip() for ln in lines] == ["3", "6", "7"]
    assert all("[rank 3]" in ln for ln in lines)
    assert "val  50.0%" in lines[-1]  # the last known validation accuracy is shown
    assert stream.getvalue() == ""


def test_bar_on_a_terminal_with_info_visible(restore_logging):
    setup_logging("INFO", stream=io.StringIO())
    tty = _Tty()
    p = Progress(4, log_every=10, stream=tty)
    assert p.enabled
    for e in range(1, 5):
        p.update(e, loss=0.5, epoch_time_s=0.002)
    p.close()
    out = tty.getvalue()
    assert out.count("\r[") == 4 and "epoch 4/4" in out
    assert out.endswith("\r\x1b[K")  # the bar line is cleared before the summary


def test_bar_off_when_warnings_only_or_not_rank_0(restore_logging):
    setup_logging("WARNING", stream=io.StringIO())
    assert not Progress(3, stream=_Tty()).enabled
    setup_logging("INFO", stream=io.StringIO())
    assert not Progress(3, stream=_Tty(), rank=1).enabled


def test_only_rank_0_logs_the_epoch_lines(restore_logging):
    """Every rank holds the same all-reduced figures: the line is logged once per run,
    not once per worker."""
    logs = io.StringIO()
    setup_logging("INFO", rank=1, stream=logs)
    p = Progress(4, log_every=2, rank=1, stream=io.StringIO())
    for e in range(1, 5):
        p.update(e, loss=0.5, epoch_time_s=0.002)
    p.close()
    assert logs.getvalue() == ""
