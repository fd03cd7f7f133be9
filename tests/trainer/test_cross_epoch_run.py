"""Cross-epoch overlap through the entry, with real gloo workers: a run that stops
early (or at its last epoch) leaves no transfer unmatched and ends cleanly, and the
record says the setting and each stage's own time split."""

from __future__ import annotations

import pytest

from gnnpipe import api
from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig, TrainConfig
from gnnpipe.trainer.record import check_record
from tests.trainer.helpers import easy_graph

pytestmark = pytest.mark.dist


def test_a_run_that_stops_early_after_a_turn_that_began_the_next_epoch_ends_cleanly():
    # Every epoch but the last begins the next one at its turn (no checkpoints), so the
    # epoch after the early stop was begun and must be settled, not left half sent.
    graph = easy_graph(num_nodes=300, noise=2.0)
    cfg = RunConfig(model=ModelConfig(model="gcnii", layers=4, hidden=8, dropout=0.2),
                    train=TrainConfig(epochs=200, eval_every=1, patience=1, lr=0.05, monitor="val_acc"),
                    parallel=ParallelConfig(mode="pipeline", workers=2, chunks=6, cross_epoch_chunks=2))
    rec = api.run(cfg, graph)
    check_record(rec)
    assert rec["summary"]["stopped_early"] and len(rec["epochs"]) < 200
    assert rec["config"]["parallel"]["cross_epoch_chunks"] == 2
    assert rec["best"]["test_acc"] > 0.5  # three classes: it trained
    # Each stage's own split adds up to its own epoch; `time` is the longest epoch's.
    for e in rec["epochs"]:
        ranks = e["time_per_rank"]
        assert [r["rank"] for r in ranks] == [0, 1]
        for r in ranks:
            assert r["compute_s"] + r["comm_wait_s"] + r["bubble_s"] == pytest.approx(r["epoch_s"], rel=1e-9)
        slowest = max(ranks, key=lambda r: r["epoch_s"])
        assert e["epoch_time_s"] == slowest["epoch_s"]
        assert e["time"] == {k: slowest[k] for k in ("compute_s", "comm_wait_s", "bubble_s")}
