"""The calibration's twin processes: two fresh worker-like processes over gloo that
measure what one process alone cannot, the link between workers and what sharing the
node costs them (:func:`link_figures`).

A ping-pong gives the link's latency and one-way rate; exchanges made the way graph
mode's halo exchange and the hybrid's per-step exchange make them, right after a kernel
with both ranks sending at once (:func:`_lockstep_exchange_s`), give an exchange's fixed
cost and each direction's rate; one stage layer's work (:func:`stage_layer_kernel`)
timed on one process alone and on both at once gives the contention. A twin that dies
is named at once; twins that report nothing end the calibration after
:data:`TWIN_TIMEOUT_S`.
"""

from __future__ import annotations

import os
import queue
import statistics
import tempfile
import time
from typing import Any, Callable, Sequence

import torch

from gnnpipe.plan.timing import min_time_s, proc_kib_bytes

__all__ = ["link_figures", "stage_layer_kernel", "EXCHANGE_SMALL_BYTES", "TWIN_TIMEOUT_S"]

#: The smaller message of the two the exchange cost is measured at (:func:`link_figures`).
EXCHANGE_SMALL_BYTES = 64 << 10
#: How long the link's twin processes may take to report (they take a few seconds).
TWIN_TIMEOUT_S = 120.0


def link_figures(bytes_big: int = 4 << 20) -> tuple[float, float, float, int, float, float]:
    """Measured in two fresh processes (workers' twins): ``(link bytes/s, latency s,
    contention, a bare worker's resident bytes, each direction's bytes/s of an
    exchange, an exchange's fixed seconds)``: a gloo ping-pong; exchanges as the
    workers make them (:func:`_lockstep_exchange_s`) at :data:`EXCHANGE_SMALL_BYTES`
    and ``bytes_big``, whose difference gives the rate and the small one, less its
    bytes at that rate, the fixed cost; then one stage layer's work
    (:func:`_stage_layer`) timed on one process alone and on both at once
    (``contention`` = both / alone: what sharing the node's cores and memory bandwidth
    costs each worker)."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        q = ctx.Queue()
        procs = [ctx.Process(target=_ping, args=(r, os.path.join(tmp, "store"), bytes_big, q)) for r in (0, 1)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + TWIN_TIMEOUT_S
        try:
            while True:
                try:
                    result = q.get(timeout=0.5)
                    break
                except queue.Empty:
                    # A twin that died cannot send; do not wait out the deadline for it.
                    dead = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
                    if dead:
                        raise RuntimeError(f"calibration: link twin rank {dead[0][0]} exited with code "
                                           f"{dead[0][1]} before reporting") from None
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"calibration: the link twins reported nothing within "
                                           f"{TWIN_TIMEOUT_S:.0f} s") from None
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
    return result


def stage_layer_kernel(plans: Sequence[Any], num_nodes: int, hidden: int = 100) -> Callable[[], None]:
    """One stage layer's work over the chunks ``plans`` of a graph of ``num_nodes``
    vertices, as a stage runs it: each chunk's local rows gathered from a buffer of
    every row with the dropout applied in place (:func:`gather_rows`), aggregated and
    multiplied, then the backward (CPU). What the calibration measures contention on
    (:func:`_stage_layer`) and ``bench/contention.py`` times on real graphs."""
    from gnnpipe.engine.stage_autograd import gather_rows
    from gnnpipe.kernels import ChunkOps

    ops = [(ChunkOps.build(p), torch.as_tensor(p.local_global_nid)) for p in plans]
    gen = torch.Generator().manual_seed(0)
    buf, w = torch.randn(num_nodes, hidden, generator=gen), torch.randn(hidden, hidden, generator=gen)

    def layer() -> None:
        for o, ids in ops:
            h, _sink = gather_rows(buf, ids, drop=(0.5, None))
            y = o.aggregate(h, "gcn") @ w
            y.backward(torch.ones_like(y))

    return layer


def _stage_layer(num_nodes: int = 4000, chunks: int = 4) -> Callable[[], None]:
    """:func:`stage_layer_kernel` over a METIS chunking of a synthetic graph. The
    contention is measured on it, not on a dense kernel: a matmul with a row gather had
    put it at 1.196 (``bench/results/plan_check.json`` of commit f4d7e59; 1.06-1.15 in
    ad hoc calibrations), the real stage layer of Amazon Photo and BlogCatalog measured
    1.02 and 1.00 (``bench/results/contention.json``), and the planner multiplies every
    chunked mode's compute by it."""
    from gnnpipe.data.synthetic import synthetic_graph
    from gnnpipe.partition import chunk_graph

    g = synthetic_graph(num_nodes=num_nodes, num_features=8, avg_degree=16.0, seed=3).remove_self_loops()
    return stage_layer_kernel(chunk_graph(g, chunks, method="metis", seed=0, cache=False).plans, num_nodes)


def _lockstep_exchange_s(rank: int, nbytes: int, reps: int, blocks: int = 5) -> float:
    """Seconds one rank of two spends in an exchange of ``nbytes`` each way (both send
    at once) made right after a kernel, as graph mode's halo exchange and the hybrid's
    per-step exchange are made: the mean over ``reps`` exchanges, the median of
    ``blocks`` such means. Between compute a rank pays its peer's lateness and the
    wake-up of the peer's transport, which a ping-pong or an exchange made right after
    a barrier does not: on this project's 2-core machine (gloo, one thread each) the
    dense graphs' calibrations of ``bench/results/plan_check_rounds_dense.json`` put
    the fixed cost at 0.37-1.09 ms against a ping-pong's latency of 0.04-0.21 ms, and
    graph mode's halo exchanges on BlogCatalog (about 1 MiB each) waited 1.0-1.8 ms each
    (``plan_check_rerun_66efe8c.json``, ``..._bcab3b4.json``: an epoch's wait over its
    62 exchanges, computed). The kernel between is a [4000, 100] x [100, 100] matmul
    (about 1 ms at one thread here), a chunk layer's scale. Called on both ranks of an
    initialised gloo group."""
    import torch.distributed as dist

    send = torch.zeros(max(nbytes // 4, 1))
    back = torch.empty_like(send)
    a, w = torch.randn(4000, 100), torch.randn(100, 100)
    means = []
    for _ in range(blocks):
        dist.barrier()
        spent = 0.0
        for _ in range(reps):
            a @ w
            t0 = time.perf_counter()
            ops = [dist.P2POp(dist.isend, send, 1 - rank), dist.P2POp(dist.irecv, back, 1 - rank)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            spent += time.perf_counter() - t0
        means.append(spent / reps)
    return statistics.median(means)


def _ping(rank: int, store: str, nbytes: int, q: Any) -> None:  # pragma: no cover - child process
    import torch.distributed as dist

    import gnnpipe.engine.stage  # noqa: F401 - a worker's imports, for its resident size

    rss = proc_kib_bytes("/proc/self/status", "VmRSS", 400 * 2**20)  # 400 MiB where unknown
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    small, big = torch.zeros(1), torch.zeros(nbytes // 4)

    def pingpong(t: torch.Tensor, reps: int) -> float:
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            if rank == 0:
                dist.send(t, 1)
                dist.recv(t, 1)
            else:
                dist.recv(t, 0)
                dist.send(t, 0)
        return (time.perf_counter() - t0) / (2 * reps)

    pingpong(big, 2)
    lat = pingpong(small, 50)
    one_way = pingpong(big, 8)
    link_rate = nbytes / max(one_way - lat, 1e-9)
    ex_small = _lockstep_exchange_s(rank, EXCHANGE_SMALL_BYTES, 30)
    ex_big = _lockstep_exchange_s(rank, nbytes, 8)
    # Two ranks sending to each other at once are no faster each way than one sending
    # alone, and an exchange costs at least a ping-pong's latency (noise aside).
    ex_rate = min((nbytes - EXCHANGE_SMALL_BYTES) / max(ex_big - ex_small, 1e-9), link_rate)
    ex_fixed = max(ex_small - EXCHANGE_SMALL_BYTES / ex_rate, lat)
    kernel = _stage_layer()

    dist.barrier()
    alone = min_time_s(kernel, 9) if rank == 0 else 0.0
    dist.barrier()
    both = min_time_s(kernel, 9)
    if rank == 0:
        q.put((link_rate, lat, both / max(alone, 1e-9), rss, ex_rate, ex_fixed))
    dist.barrier()
    dist.destroy_process_group()
