"""A stage's chunk forward and backward never read the device.

On a GPU, a value read back from the device (``float(t)``, ``bool(t.any())``, a bool
mask index, whose result size the host must learn) waits for every kernel queued
before it, so the host stops queueing work while the GPU drains: once per read, and a
stage runs its forward and backward for every chunk of every epoch. The decisions a
stage takes per chunk (which halo rows are stale, which transposed entries to keep,
which rows train) are made from host integers instead, and the loss is summed on the
device and read once per epoch.

On the CPU nothing can observe a synchronisation, so the test observes the operations
that cause one: a dispatch mode records every such operator run inside
``Stage.forward`` and ``Stage.backward`` of real gloo workers (after a first epoch,
which builds what is built once), for pipeline and hybrid layouts, chunk and row
dropout masks, stale reads held constant, and the cross-epoch history.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.engine._dist_util import run_workers
from tests.engine.test_pipeline import OFF, ON, build_model, chunked_for, make_config

#: Operators whose result the host must read (a value, or the size of the result).
READS = {"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique", "_unique2",
         "unique_consecutive", "unique_dim", "equal", "is_nonzero", "allclose"}


def _reads(func: Any, args: tuple, kwargs: dict) -> str | None:
    """The name of the device read ``func(*args, **kwargs)`` makes, or None."""
    name = func.__name__.split(".")[0]
    if name in READS:
        return func.__name__
    if name in ("index", "index_put", "index_put_", "_index_put_impl_"):
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        if any(t is not None and t.dtype == torch.bool for t in indices):
            return f"{func.__name__} (bool index)"
    # Repeats given as a tensor: the result's size is their sum, unless output_size says it.
    if func.__name__ == "repeat_interleave.Tensor" and kwargs.get("output_size") is None:
        return f"{func.__name__} (no output_size)"
    return None


class _RecordReads(TorchDispatchMode):
    def __init__(self, seen: Counter) -> None:
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        read = _reads(func, args, kwargs)
        if read is not None:
            self.seen[read] += 1
        return func(*args, **kwargs)


def reads_worker(rank: int, world: int, case: dict[str, Any]) -> dict[str, Any]:
    """Three epochs; the device reads inside the stage's chunk forward and backward in
    epochs 2 and 3, and how many chunk calls those were."""
    from gnnpipe.engine.comm import Comm
    from gnnpipe.engine.runners import RUNNERS
    from tests.engine._context import make_context

    comm = Comm(rank, world)
    cfg = make_config(case)
    cfg = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel,
                                                                cross_epoch_chunks=case.get("k", 0)))
    chunked = chunked_for(case)
    runner = RUNNERS[case["mode"]](make_context(rank, cfg, chunked, comm, build_model(cfg, chunked.graph)))
    stage = runner.stage
    seen: Counter = Counter()
    calls = {"n": 0, "on": False}

    def recorded(method: Any) -> Any:
        def call(*args: Any) -> Any:
            if not calls["on"]:
                return method(*args)
            calls["n"] += 1
            with _RecordReads(seen):
                return method(*args)
        return call

    stage.forward, stage.backward = recorded(stage.forward), recorded(stage.backward)
    runner.prepare()
    for epoch in (1, 2, 3):
        calls["on"] = epoch > 1
        runner.train_epoch(epoch, continues=epoch < 3)
    return {"reads": dict(seen), "calls": calls["n"]}


CASES = [
    dict(mode="pipeline", workers=2, chunks=5, model="gcnii", dropout=0.5, **ON),
    dict(mode="pipeline", workers=2, chunks=5, model="sage", dropout=0.5, dropout_masks="row", **OFF),
    dict(mode="pipeline", workers=2, chunks=5, model="resgcn+", dropout=0.5, **ON),
    dict(mode="pipeline", workers=2, chunks=5, model="gcn", dropout=0.5, k=2, **ON),  # cross-epoch history
    dict(mode="hybrid", workers=2, ways=2, chunks=5, model="gcn", dropout=0.5, **ON),
]


@pytest.fixture(scope="module")
def results() -> list[list[dict[str, Any]]]:
    return [run_workers(reads_worker, 2, case, timeout=300) for case in CASES]


@pytest.mark.parametrize("i", range(len(CASES)), ids=lambda i: "{mode}-{model}-{chunks}".format(**CASES[i])
                         + ("-k" if CASES[i].get("k") else "") + ("-row" if CASES[i].get("dropout_masks") else ""))
def test_a_stages_chunk_forward_and_backward_read_nothing_from_the_device(results, i):
    for rank, r in enumerate(results[i]):
        assert r["calls"] > 0, f"rank {rank} ran no chunk while recording"
        assert r["reads"] == {}, f"rank {rank}: device reads in a chunk's forward/backward: {r['reads']}"


def test_the_recorder_sees_the_reads_it_looks_for():
    """The check above can fail: each kind of read it names is recorded."""
    seen: Counter = Counter()
    t = torch.tensor([1.0, 0.0, 2.0])
    with _RecordReads(seen):
        float(t.sum())
        bool((t > 0).any())
        t[t > 0]
        t.nonzero()
        torch.repeat_interleave(torch.tensor([1, 2]), torch.tensor([2, 1]))
        torch.repeat_interleave(torch.tensor([1, 2]), torch.tensor([2, 1]), output_size=3)  # no read
        t.index_select(0, torch.tensor([0, 2]))  # no read
    assert seen["_local_scalar_dense.default"] == 2
    assert seen["index.Tensor (bool index)"] == 1
    assert seen["nonzero.default"] == 1
    assert seen["repeat_interleave.Tensor (no output_size)"] == 1
    assert sum(seen.values()) == 5
