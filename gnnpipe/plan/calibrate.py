"""A short measurement of this machine: the :class:`HardwareProfile` of one worker.

A few seconds in all (up to a minute more for a graph above 40,000 vertices,
measured again at its size: :func:`calibrate`; 58-79 s in all for the 200,000-vertex
systems graph here): a dense matmul, one aggregation of a chunk through
:class:`gnnpipe.kernels.ChunkOps`, a row gather, one real layer of each model kind
(whose time beyond its matmul and aggregation is the layer's per-row elementwise
cost), the input projection (dense, and CSR when the features are sparse), a tiny
layer call (the fixed cost of one call), and the link between two processes
(:mod:`gnnpipe.plan.twins`: a gloo ping-pong, exchanges made between kernels as the
workers make them, and the contention; skipped when the link is given). Each kernel
runs forward + backward; the fastest of a few repeats is kept
(:func:`gnnpipe.plan.timing.min_time_s`): the plan is for an otherwise idle machine,
and a repeat is only ever slowed by what else runs, never sped up (the advice of
Python's ``timeit``). Memory: the saved-for-backward values of one layer of
each kind are counted exactly with ``torch.autograd.graph.saved_tensors_hooks``;
``runtime_bytes`` is this process's resident size with torch loaded, plus the worker
overhead fitted in :data:`WORKER_OVERHEAD_BYTES`.
"""

from __future__ import annotations

import logging
import os
import statistics
from typing import Any, Callable, Sequence

import torch

from gnnpipe.plan.inputs import HardwareProfile
from gnnpipe.plan.timing import alternating_min_s, median_time_s, min_time_s, proc_kib_bytes
from gnnpipe.plan.twins import link_figures

__all__ = ["calibrate", "calibrate_for", "median_time_s", "min_time_s", "WORKER_OVERHEAD_BYTES"]

logger = logging.getLogger(__name__)

#: A training worker's resident memory beyond a bare ``import torch, gnnpipe`` process
#: (gloo, its threads, the allocator's slack, Python objects of the run), CPU only.
#: Fitted against the peaks of bench/results/modes-dense and memory_50k (see
#: :mod:`gnnpipe.plan.costs`).
WORKER_OVERHEAD_BYTES = 150 * 2**20
#: A bare worker's resident size (torch and gnnpipe imported) when the link, and with
#: it the twin processes that measure it, is given instead of measured.
DEFAULT_RSS_BYTES = 380 * 2**20

KINDS = ("gcn", "sage", "gcnii", "resgcn+")
#: Layers timed in a row per kind (their mean is one layer's cost).
STACK = 4

#: The largest graph the rates are measured on first (vertices; fewer when the graph to
#: plan for is smaller).
SMALL_ROWS = 20000
#: The second measurement's graph: the graph's own size up to this many vertices
#: (80 MB a [N, 100] float tensor, past the last-level cache of the machines at hand);
#: larger graphs take its rates.
LARGE_ROWS = 200000
#: The second measurement is made where the graph has at least this many times the
#: rows of the first.
LARGE_MIN_FACTOR = 2.0
#: Timed repeats of each kernel and layer at the second size (:func:`_large_point`).
LARGE_REPEATS = 3
#: Layers in the stack the second measurement times besides one alone (its ``stack``
#: ratio). Past the cache a layer run among others, as a model runs it, costs more
#: than one alone: on CPU each of its outputs and saved values over glibc's 32 MiB
#: mmap threshold is a fresh mapping, faulted in on first touch, and a stack keeps them
#: all while it runs (ad hoc, a GCN layer's forward + backward over a 200,000-vertex
#: synthetic graph at one thread, 2026-12-07, fastest of 2, the stack of 16 timed once:
#: 0.88 / 0.77 / 1.05 / 1.05 / 1.27 s a layer in stacks of 1 / 2 / 4 / 8 / 16 layers; 0.85 / 0.73 / 0.78 / 0.73 s at 1 / 2 / 4 / 8
#: where the heap keeps freed pages, ``train.host_heap_mib``; over 20,000 vertices
#: 0.048-0.053 s at 1 to 8). Priced by one layer alone, the plan had single and graph
#: mode, whose layers run over all rows, at 0.50-0.74 of their measured epochs on the
#: 200k systems graph (``bench/results/plan_check_200k_at_17a9b66.json``,
#: ``..._huge_pages.json``).
LARGE_STACK = 4
_RATE_KEYS = {"matmul": "matmul_s_per_flop", "aggregate": "aggregate_s_per_edge_row", "gather": "gather_s_per_byte",
              "dropout": "dropout_s_per_value", "mask_apply": "mask_apply_s_per_value"}


def _plan(num_nodes: int, avg_degree: float, seed: int = 0) -> Any:
    from gnnpipe.data.synthetic import synthetic_graph
    from gnnpipe.partition import whole_graph_plan

    g = synthetic_graph(num_nodes=num_nodes, num_features=8, avg_degree=avg_degree, seed=seed).remove_self_loops()
    return whole_graph_plan(g)


def _layer_step(kind: str, hidden: int, ops: Any, n: int, dev: torch.device, *,
                stack_depth: int = STACK) -> tuple[Callable[[], None], float]:
    """(one forward + backward of a stack of ``stack_depth`` ``kind`` layers on ``ops``'s
    chunk, run as a model runs them; values one layer saves for backward per (row x
    width))."""
    from gnnpipe.models import build_model

    model = build_model({"model": kind, "layers": stack_depth + 2, "hidden": hidden, "dropout": 0.5}, 8, 4).to(dev)
    stack = list(model.layers[1:stack_depth + 1])
    x = torch.randn(n, hidden, device=dev, requires_grad=True)
    h0 = torch.randn(n, hidden, device=dev, requires_grad=True) if stack[0].needs_h0 else None
    g = torch.randn(n, hidden, device=dev)

    def step() -> None:
        h = x
        for layer in stack:
            h = layer(h, ops, h0)
        h.backward(g)

    return step, _saved_bytes(stack[0], x, ops, h0) / (4.0 * n * hidden)


def _layer_figures(kind: str, hidden: int, ops: Any, n: int, dev: torch.device, *, stack_depth: int = STACK,
                   repeats: int = 3) -> tuple[float, float]:
    """(seconds of one forward + backward of one ``kind`` layer on ``ops``'s chunk, as
    the mean over a stack of ``stack_depth`` layers run as a model runs them, the
    fastest of ``repeats``; values saved for backward per (row x width) of one layer)."""
    step, saved = _layer_step(kind, hidden, ops, n, dev, stack_depth=stack_depth)
    return min_time_s(step, repeats) / stack_depth, saved


def _saved_bytes(layer: Any, x: torch.Tensor, ops: Any, h0: torch.Tensor | None) -> int:
    """Bytes of the storages autograd keeps for the backward of one call of ``layer``
    (its input ``x`` and ``h0`` excluded: the caller holds those; so are its
    parameters and tensors of a parameter's shape, such as a weight with dropout's
    ``1 / (1 - p)`` folded in: they are not per row)."""
    seen: dict[int, int] = {}
    params = {p.data_ptr() for p in layer.parameters()}
    param_shapes = {tuple(p.shape) for p in layer.parameters()}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if (t.numel() > 1 and ptr not in (x.data_ptr(), getattr(h0, "data_ptr", int)()) and ptr not in params
                and tuple(t.shape) not in param_shapes):
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = layer(x, ops, h0)
    del out
    return sum(seen.values())


def _halo_ops(dev: torch.device) -> Any:
    """The operators of a chunk with halo rows: chunk 0 of two of a synthetic graph."""
    from gnnpipe.data.synthetic import synthetic_graph
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.partition import chunk_graph

    g = synthetic_graph(num_nodes=2000, num_features=8, avg_degree=8.0, seed=2).remove_self_loops()
    return ChunkOps.build(chunk_graph(g, 2, method="metis", seed=0, cache=False).plans[0], device=dev)


def _saved_halo_values(kind: str, hidden: int, saved_own: float, ops: Any, dev: torch.device) -> float:
    """Values one layer of ``kind`` keeps per (halo row x width) beside
    ``saved_own`` per own row, counted on ``ops``'s chunk (:func:`_halo_ops`): a layer
    applies its input dropout to its halo rows too, and keeps that mask (a GCN's 1 byte
    a value, 0.25 of a float); a layer that keeps its input or a view of it
    (GraphSAGE's own rows are a view of the dropped input, ResGCN+'s norm saves it)
    keeps its halo rows as well."""
    from gnnpipe.models import build_model

    plan = ops.plan
    model = build_model({"model": kind, "layers": 3, "hidden": hidden, "dropout": 0.5}, 8, 4).to(dev)
    layer = model.layers[1]
    x = torch.randn(plan.num_local, hidden, device=dev, requires_grad=True)
    h0 = torch.randn(plan.num_own, hidden, device=dev, requires_grad=True) if layer.needs_h0 else None
    extra = _saved_bytes(layer, x, ops, h0) - 4.0 * saved_own * plan.num_own * hidden
    return max(extra, 0.0) / (4.0 * max(plan.num_halo, 1) * hidden)


def _kernel_rates(ops: Any, h: int, kinds: Sequence[str], dev: torch.device, *, repeats: int = 7,
                  stack_depth: int = STACK) -> tuple[dict[str, Any], dict[str, float], dict[str, float]]:
    """The size-dependent rates of one worker's kernels measured on ``ops``'s whole
    graph (at the threads set by the caller): ``({profile field: rate, "rows": {kind:
    a layer's elementwise rest per (row x width)}}, {kind: seconds of one layer},
    {kind: values a layer saves for backward per (row x width)})``.
    Each kernel runs forward + backward, the fastest of ``repeats`` (a layer: of
    ``min(repeats, 3)``, over a stack of ``stack_depth``)."""
    from gnnpipe.models.layers import dropout
    from gnnpipe.models.masks import MaskRows

    n, e = ops.plan.num_own, int(ops.plan.indices.numel())
    a = torch.randn(n, h, device=dev, requires_grad=True)
    w = torch.randn(h, h, device=dev, requires_grad=True)
    g = torch.randn(n, h, device=dev)
    idx = torch.randint(0, n, (n,), device=dev)
    buf = torch.randn(n, h, device=dev)
    keep = torch.rand(n, h, device=dev) >= 0.5  # a stage's rows of its layer's mask, as it applies them
    rates: dict[str, Any] = {
        "matmul_s_per_flop": min_time_s(lambda: (a @ w).backward(g), repeats) / (2.0 * n * h * h),
        "aggregate_s_per_edge_row": min_time_s(lambda: ops.aggregate(a, "gcn").backward(g), repeats) / (e * h),
        "gather_s_per_byte": min_time_s(lambda: buf.index_add_(0, idx, buf[idx]), repeats) / (2.0 * n * h * 4),
        # As the layers call it: the mask alone, its 1 / (1 - p) folded into their weights.
        "dropout_s_per_value": min_time_s(lambda: dropout(a, 0.5, True, scaled=False).backward(g), repeats) / (n * h),
        "mask_apply_s_per_value": min_time_s(
            lambda: dropout(a, 0.5, True, MaskRows(keep, idx), scaled=False).backward(g), repeats) / (n * h),
    }
    rows, one_thread, saved = {}, {}, {}
    for kind in kinds:
        t, saved[kind] = _layer_figures(kind, h, ops, n, dev, stack_depth=stack_depth, repeats=min(repeats, 3))
        one_thread[kind] = t
        mm = (2 if kind in ("sage", "resgcn+") else 1) * 2.0 * n * h * h * rates["matmul_s_per_flop"]
        agg = e * h * rates["aggregate_s_per_edge_row"]
        drop = n * h * rates["dropout_s_per_value"]  # the layers' input dropout (p = 0.5 here)
        rows[kind] = max(t - mm - agg - drop, 0.05 * t) / (n * h)
    rates["rows"] = rows
    return rates, one_thread, saved


def calibrate_for(stats: Any, model: str, hidden: int, *, workers: int, graph: Any = None,
                  link: tuple[float, float] | None = None, device: str = "cpu") -> HardwareProfile:
    """:func:`calibrate` for a run planned on ``stats`` (a :class:`GraphStats`): the
    graph's width, feature density, mean degree and size, the model's kind (a GCN's
    kernels for an MLP's), and ``graph`` itself where the caller has it (the second
    measurement's graph). What the plan CLI, ``--mode auto`` and ``bench/plan_check.py``
    calibrate with."""
    return calibrate(hidden=int(hidden), num_features=stats.num_features, feature_density=stats.feature_density,
                     mean_degree=stats.num_edges / max(stats.num_nodes, 1), num_nodes=int(stats.num_nodes),
                     workers=int(workers), link=link, kinds=(model,) if model != "mlp" else ("gcn",),
                     device=device, graph=graph)


def _large_point(large_n: int, degree: float, h: int, kinds: Sequence[str], dev: torch.device, threads: int,
                 cores: int, small: dict[str, Any], small_speedup: float, graph: Any = None) -> dict[str, Any]:
    """The second measurement, on ``graph`` (the run's own, in its own order) where one
    is given, else on a synthetic graph of ``large_n`` vertices: each size-dependent
    rate there over ``small``'s (the first measurement's), as
    :attr:`HardwareProfile.large_rate_ratio`, and two ratios of the first kind's layer:
    ``stack``, the layer in a stack of :data:`LARGE_STACK` (per layer) against one
    alone, both at one worker's threads (the fresh memory a model's layers make, see
    there; the small graph's layers are timed in stacks already), and
    ``single_speedup``, the stack at one thread against all cores, over
    ``small_speedup`` (the stack's: two threads share its faults less well than the
    kernels, ad hoc on the 200,000-vertex graph 1.7-1.8x on one layer, 1.3-1.7x on a
    stack of 8). The kernels and the layer alone are timed once per kind, not in a
    stack (a GCN layer's forward + backward over 200,000 rows takes about a second
    here), the fastest of :data:`LARGE_REPEATS` after a warm-up. The three layer
    timings alternate, so that a slow spell of the machine lands on all, and each
    ratio is of those timings alone (not of the kernels' one-thread timing, taken
    earlier): timed one after the other, the fastest of 2 each, the 200k graph's
    speedup ratio was 1.08 in one calibration and 0.57 in the next
    (``plan_check_200k_rounds_single_pipeline.json``)."""
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.partition import whole_graph_plan

    ops = ChunkOps.build(_plan(large_n, degree) if graph is None else whole_graph_plan(graph.remove_self_loops()),
                         device=dev)
    torch.set_num_threads(threads)
    rates, _one_thread, _saved = _kernel_rates(ops, h, kinds, dev, repeats=LARGE_REPEATS, stack_depth=1)
    ratio = {key: rates[name] / small[name] for key, name in _RATE_KEYS.items() if small[name] > 0}
    ratio["row"] = statistics.median(rates["rows"][k] / small["rows"][k] for k in kinds)
    step = _layer_step(kinds[0], h, ops, ops.plan.num_own, dev, stack_depth=1)[0]
    stack = _layer_step(kinds[0], h, ops, ops.plan.num_own, dev, stack_depth=LARGE_STACK)[0]
    one_s, stack_s, stack_all_s = alternating_min_s([(lambda: torch.set_num_threads(threads), step),
                                                     (lambda: torch.set_num_threads(threads), stack),
                                                     (lambda: torch.set_num_threads(cores), stack)], LARGE_REPEATS)
    ratio["single_speedup"] = stack_s / stack_all_s / small_speedup
    ratio["stack"] = stack_s / LARGE_STACK / one_s
    torch.set_num_threads(threads)
    return {"large_rows": ops.plan.num_own, "large_rate_ratio": ratio}


def calibrate(*, hidden: int = 100, num_features: int = 512, feature_density: float = 1.0,
              mean_degree: float = 16.0, num_nodes: int = 20000, workers: int = 2,
              link: tuple[float, float] | None = None, device_memory_bytes: int | None = None,
              device: str = "cpu", kinds: tuple[str, ...] = KINDS, graph: Any = None) -> HardwareProfile:
    """Measure this machine (a few seconds) at one worker's share of the cores.

    ``mean_degree`` and ``num_nodes``: in-edges per vertex (E / N) and vertices of the
    graph to plan for; the layers are timed on a synthetic graph of that degree
    (clamped to 2..100) and of N vertices clamped to 2,000..20,000, because the cost
    of an aggregation per edge falls as rows get longer (measured: a model calibrated
    at degree 16 overpredicted BlogCatalog, degree 66, by up to 1.8x), and the
    kernels' rates depend on the size too: calibrated on 20,000 vertices, the plan
    overpredicted graph and pipeline mode on Amazon Photo (7,650 vertices) and
    BlogCatalog (5,196) by 1.27-1.36x, at their own sizes by 0.97-1.08x
    (``bench/results/plan_check.json`` at commits 61f7050 and bd5019e). A graph with at
    least :data:`LARGE_MIN_FACTOR` times those rows is measured a second time, on
    ``min(N, LARGE_ROWS)`` vertices (:func:`_large_point`, a few seconds more): past
    the cache the rates rise (over 200,000 rows an aggregation cost 3.4x its rate over
    20,000 here, a dropout 5.4x), and without it the plan put single, graph, pipeline
    and hybrid mode on the 200k systems graph at 0.24, 0.31, 0.66 and 0.48 of their
    measured epochs, with it (on a synthetic graph) at 0.67, 0.74, 1.00 and 0.76
    (``bench/results/plan_check_200k.json``; the same calibration), and with it on the
    graph itself at 0.78, 0.89, 1.23 and 0.87 (``plan_check_200k_own_graph.json``). ``link``:
    (bytes/s, latency s) to use instead of measuring it. ``graph``: the run's own graph,
    where the caller has it: the second measurement times its kernels on it, in its own
    order (the 200k systems graph's whole-graph aggregation cost 1.37x the rate of the
    synthetic graph of its size, ``bench/results/chunk_rates.json``). Rates are per
    forward unit, forward + backward timed (module docstring). The profile's source
    says whether this process's large allocations had huge pages
    (:func:`gnnpipe.huge_pages.huge_pages_state`): a caller asks for them before its
    first large allocation, as a run does."""
    from gnnpipe.huge_pages import huge_pages_state
    from gnnpipe.kernels import ChunkOps
    from gnnpipe.models.model import InputProjection

    dev = torch.device(device)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = max(1, cores // max(int(workers), 1))
    before = torch.get_num_threads()
    h = int(hidden)
    degree = min(max(float(mean_degree), 2.0), 100.0)
    ops = ChunkOps.build(_plan(int(min(max(int(num_nodes), 2000), SMALL_ROWS)), degree), device=dev)
    n = ops.plan.num_own
    large_n = min(int(num_nodes), LARGE_ROWS)
    own_graph = graph if graph is not None and graph.num_nodes <= LARGE_ROWS else None  # else a synthetic one
    tiny_ops = ChunkOps.build(_plan(64, 4.0, seed=1), device=dev)
    figures: dict[str, Any] = {}
    try:
        torch.set_num_threads(threads)
        rates, one_thread, saved = _kernel_rates(ops, h, kinds, dev)
        figures.update({k: v for k, v in rates.items() if k != "rows"})
        halo_ops = _halo_ops(dev)
        saved_halo = {kind: _saved_halo_values(kind, h, saved[kind], halo_ops, dev) for kind in kinds}
        small = [_layer_figures(k, h, tiny_ops, 64, dev)[0] for k in kinds]
        figures["call_overhead_s"] = statistics.median(small)
        f, m = int(num_features), 4096
        proj = InputProjection(f, h, dropout=0.5).to(dev)
        x = torch.randn(m, f, device=dev)
        gm = torch.randn(m, h, device=dev)
        figures["encode_s_per_flop"] = min_time_s(lambda: proj(x).backward(gm), 3) / (2.0 * m * f * h)
        from gnnpipe.data.sparse import SparseFeatures

        dens = min(max(float(feature_density), 1e-3), 1.0)
        xs = SparseFeatures.from_dense((torch.rand(m, f) < dens).float()).to(dev)
        figures["sparse_encode_s_per_nnz_col"] = min_time_s(
            lambda: proj(xs).backward(gm), 3) / (max(xs.nnz, 1) * h)
        torch.set_num_threads(cores)
        all_cores = statistics.median(_layer_figures(k, h, ops, n, dev)[0] for k in kinds[:2])
        speedup = statistics.median(one_thread[k] for k in kinds[:2]) / all_cores
        if large_n >= LARGE_MIN_FACTOR * n:
            figures.update(_large_point(large_n, degree, h, kinds, dev, threads, cores, rates, speedup, own_graph))
            figures["rate_rows"] = n
    finally:
        torch.set_num_threads(before)
    bw, lat, contention, rss, exchange_bw, exchange_lat = ((*link, 1.0, DEFAULT_RSS_BYTES, 0.0, 0.0)
                                                           if link is not None else link_figures())
    runtime = rss + WORKER_OVERHEAD_BYTES
    total = device_memory_bytes
    if total is None:
        total = (torch.cuda.get_device_properties(dev).total_memory if dev.type == "cuda"
                 else proc_kib_bytes("/proc/meminfo", "MemTotal", 16 * 2**30))
    sizes = ""
    if "large_rows" in figures:
        sizes = f"; rates at {n:,} and {figures['large_rows']:,} rows"
        sizes += ", the second on the graph itself" if own_graph is not None else ""
    profile = HardwareProfile(
        device=dev.type, threads=threads, device_memory_bytes=int(total), link_bytes_per_s=float(bw),
        exchange_bytes_per_s=float(exchange_bw), exchange_latency_s=float(exchange_lat),
        link_latency_s=float(lat), runtime_bytes=int(runtime) if dev.type == "cpu" else 0,
        single_speedup=float(speedup), contention=float(max(contention, 1.0)), shared_memory=dev.type == "cpu",
        layer_row_s_per_value=rates["rows"], saved_values_per_row=saved,
        saved_halo_values_per_row=saved_halo,
        source=f"measured ({device}, {threads} thread(s), load {os.getloadavg()[0]:.2f}{sizes}; "
               f"host huge pages {'on' if huge_pages_state()['effective'] else 'off'})", **figures)
    logger.info("calibrated: %s", profile)
    return profile
