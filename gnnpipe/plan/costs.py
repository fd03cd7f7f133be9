"""The cost model: predicted epoch time and peak memory of one worker of a layout.

Time (seconds, one training epoch, evaluation excluded), from the work each worker
does and a :class:`~gnnpipe.plan.inputs.HardwareProfile`:

* a layer on a chunk: its dense matmul(s) (``2 n d_in d_out`` FLOPs), one
  aggregation (``edges x d_in``), its elementwise rest (``n x d_out``, per model
  kind), the dropout of its input over every row it reads (``(own + halo) x d_in``:
  on a dense graph the halo rows are most of the cost; each reader draws a mask for
  them, except with ``--dropout-masks row``, where a stage applies its rows of one mask
  per layer, drawn once over the way's rows: all N in pipeline mode), one call's fixed
  cost; in the chunked modes also the gather of
  its ``own + halo`` input rows and the scatter of their gradients; in the pipelined
  modes the backward's transposed product leaves out the entries of the halo rows a
  chunk reads stale, where the layer aggregates its input rows unchanged by a weight
  (``ModelShape.held_reads``; :meth:`gnnpipe.kernels.ChunkOps.with_constant_rows`):
  half of a chunk's halo entries in expectation under pipeline mode's random order
  (hybrid: ``(c - 1) / 2c`` of them for ``c`` chunks a way, the share of another
  way's chunks, whose positions are independent; a lower bound for the way's own),
  each saving half an entry's aggregation rate (the forward product and the
  transposed one taken as equal);
* each rate at the size of the kernel that pays it (``HardwareProfile.size_factor``:
  measured on a second, larger graph where the graph to plan for is large; past the
  cache a kernel's rows stream from memory), and a layer's whole cost by the
  ``stack`` ratio at the rows it computes (a layer run among others against one
  alone, at the second size: past the cache its outputs are fresh memory;
  :data:`gnnpipe.plan.calibrate.LARGE_STACK`);
* ``single``: encode + L layers + classifier + Adam step, over all rows, at all cores
  (``single_speedup``, also at the graph's size);
* the chunked modes' compute is scaled by ``contention`` (the measured slow-down of
  each of the node's workers computing at once);
* ``graph``: the slowest worker's own rows (its encode also covers its halo rows,
  X being replicated), plus the halo exchange of layers 2..L forward and backward
  (``latency x peers + bytes / bandwidth`` each, at the fixed cost and rate of an
  exchange between kernels: both sides sending at once, each paying the other's
  lateness) and the weight all-reduce (ring);
* ``pipeline``/``hybrid``: per stage the sum over its way's chunks, stage 0's with the
  encode (projected group by group as chunks first read the rows:
  :mod:`gnnpipe.engine.encode_groups`; sparse features whole, before the first
  chunk); the epoch is the longest of the stages' paths: a stage's total + one chunk
  of each other stage (fill and drain: the ``(S-1)/(C+S-1)`` share when balanced),
  for stages after the first also the encode
  of the first chunk's rows (forward before anything flows, backward after the last
  chunk: nothing else can run then); + the fill/drain transfers and a latency per
  chunk receive; hybrid adds the per-step halo exchange between ways and the
  all-reduce over the ways. ``bubble = epoch - compute - comm``.
* ``pipeline`` with ``--cross-epoch-chunks K`` (:mod:`gnnpipe.engine.cross_epoch`):
  the stages before the last ran the first K chunks' forward at the previous turn, so
  ``min(K, S-1) / (S-1)`` of the fill is hidden; stage 0 encodes a second time (with
  the stashed weights, at the turn), taken as half an encode (forward only: the input
  needs no gradient) on its compute and the epoch.

Memory (bytes, the largest worker): the runtime (``runtime_bytes``), the graph's CSR
and features (every worker holds them), the chunk operators it owns, parameters with
their gradient and Adam state, and activations: single and graph mode keep what
autograd saves for L layers (``saved_values_per_row``, counted exactly by the
calibration) per own row, plus what they keep per halo row
(``saved_halo_values_per_row``: the dropout mask of the halo rows, or the rows
themselves where a layer keeps its input; graph mode's parts and every chunk of a
stage read halo rows); a stage keeps ``B_l`` (and the snapshot when R > 1) over its
way's rows and ``G_l`` over the rows a read can give a gradient for each buffered
layer (pipeline: the chunking's boundary rows but the smallest chunk's,
``CutStats.boundary``, the per-epoch slots' capacity, and none where every chunk's
saved slots hold it: ``G_l`` then borrows one, ``grad_buffers.lendable``, except with
the cross-epoch overlap; hybrid: its way's share of the
boundary plus the rows it reads from other ways; with C = W one buffer for all layers,
and ``B_l`` over the block only, the other ways' rows in one buffer too), ``h0``
(GCNII) and its gradient, and the saved values of every chunk between its forward and
its backward; plus :data:`TRANSIENT_ROWS` rows of width H in flight.

What it leaves out: the allocator's fragmentation and caching (CUDA) and the
interpreter's growth (CPU, folded into the calibrated constants), evaluation's
buffers (evaluation runs after the step and is not in the epoch time), contention
between workers for shared cores or memory bandwidth beyond the measured rates,
partition imbalance of the stage splits (every chunk of a way is taken at its own
size), overlap of transfers with compute (transfers are counted in full), and
message sizes below the latency (one latency each).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gnnpipe.engine.grad_buffers import lendable
from gnnpipe.engine.layout import stage_layer_ranges
from gnnpipe.plan.inputs import GraphStats, HardwareProfile

__all__ = ["ModelShape", "TimeParts", "predict_time", "predict_memory", "TRANSIENT_ROWS", "layer_costs"]

#: Rows of width H (times the rows a worker computes at once) alive besides the saved
#: activations at the peak: the output gradient, the input gradient and the
#: temporaries of one layer's backward. Fitted against bench/results memory records.
TRANSIENT_ROWS = 4.0
_E = 4  # bytes per float32 value
#: Bytes of the optimizer state per parameter: value, gradient, Adam's two moments.
_PARAM_BYTES = 4 * _E


@dataclass(frozen=True)
class ModelShape:
    """The figures of a model the costs need.

    Shapes: ``dims`` L+1 widths (``dims[l-1]`` the input of layer l);
    ``layer_params[l-1]`` parameters of layer l; ``held_reads[l-1]`` whether layer l
    aggregates its input rows unchanged by a weight
    (:attr:`gnnpipe.models.layers.GNNLayer.aggregates_input_rows`: a stage's stale
    reads then need no transposed product; empty: no layer).
    """

    kind: str
    dims: tuple[int, ...]
    hidden: int
    num_features: int
    num_classes: int
    input_proj: bool
    classifier: bool
    needs_h0: bool
    h0_dim: int
    layer_params: tuple[int, ...]
    encode_params: int
    decode_params: int
    dropout: float = 0.0
    held_reads: tuple[bool, ...] = ()
    model: Any = field(default=None, compare=False, repr=False)

    @property
    def layers(self) -> int:
        return len(self.dims) - 1

    @property
    def num_params(self) -> int:
        return sum(self.layer_params) + self.encode_params + self.decode_params

    @classmethod
    def of(cls, model_config: Any, num_features: int, num_classes: int) -> "ModelShape":
        """Built from the real model (:func:`gnnpipe.models.build_model`), so widths
        and parameter counts are the run's own."""
        from gnnpipe.models import build_model

        m = build_model(model_config, int(num_features), int(num_classes))
        count = lambda mod: sum(p.numel() for p in mod.parameters())  # noqa: E731
        return cls(kind=str(m.model_name), dims=tuple(int(d) for d in m.layer_dims),
                   hidden=int(getattr(model_config, "hidden", 64)), num_features=int(num_features),
                   num_classes=int(num_classes), input_proj=m.encode.linear is not None,
                   classifier=getattr(m.decode, "linear", None) is not None, needs_h0=bool(m.needs_h0),
                   h0_dim=int(m.h0_dim), layer_params=tuple(count(layer) for layer in m.layers),
                   encode_params=count(m.encode), decode_params=count(m.decode),
                   dropout=float(getattr(model_config, "dropout", 0.0) or 0.0),
                   held_reads=tuple(bool(layer.aggregates_input_rows) for layer in m.layers), model=m)


@dataclass(frozen=True)
class TimeParts:
    """Predicted seconds of one epoch: ``epoch_s = compute_s + comm_s + bubble_s``."""

    epoch_s: float
    compute_s: float
    comm_s: float
    bubble_s: float


# -------------------------------------------------------------------- kernels
def _layer_s(p: HardwareProfile, m: ModelShape, l: int, own: float, edges: float, local: float,
             chunked: bool, shared_mask: bool = False, stale_edges: float = 0.0) -> float:
    """One forward + backward of layer ``l`` (1-based) on ``own`` rows reading
    ``local`` rows over ``edges`` in-edges; ``shared_mask``: the dropout mask is given
    (a stage's, drawn once per layer: :func:`_mask_draw_s`), not drawn here;
    ``stale_edges``: in-edges whose transposed product the backward leaves out (half
    of their aggregation rate each)."""
    d_in, d_out = m.dims[l - 1], m.dims[l]
    mats = 2 if m.kind in ("sage", "resgcn+") else (0 if m.kind == "mlp" else 1)
    # Each rate at the rows its kernel works on (HardwareProfile.size_factor): the
    # aggregation's at the rows it reads at random (the gathered own + halo rows),
    # the others' at the rows the call computes. On the 200k systems graph's C = 8
    # chunks (25,000 own, 82,000 local rows; bench/results/chunk_rates.json) an
    # aggregation cost 0.99-1.01x the rate of a whole graph of its local rows and
    # 1.90-1.96x that of its own rows; the gather with dropout 1.01-1.02x its own rows'.
    t = max(mats, 1) * 2.0 * own * d_in * d_out * p.matmul_s_per_flop * p.size_factor("matmul", own)
    if m.kind != "mlp":
        t += (edges - 0.5 * stale_edges) * d_in * p.aggregate_s_per_edge_row * p.size_factor("aggregate", local)
    t += own * d_out * p.row_cost(m.kind) * p.size_factor("row", own) + p.call_overhead_s
    if m.dropout > 0:
        t += local * d_in * (_mask_apply(p) * p.size_factor("mask_apply", own) if shared_mask
                             else p.dropout_s_per_value * p.size_factor("dropout", own))
    if chunked:
        t += local * d_in * _E * p.gather_s_per_byte * p.size_factor("gather", own)
    # A layer among a model's others, at the rows it computes: past the cache its
    # outputs and saved values are fresh memory that one layer timed alone reuses
    # (gnnpipe.plan.calibrate.LARGE_STACK).
    return t * p.size_factor("stack", own)


def _stale_edges(m: ModelShape, l: int, cut: Any, part: int, chunks_per_way: int, ways: int) -> float:
    """Expected in-edges of chunk ``part`` whose transposed product layer ``l`` of a
    stage leaves out: its halo entries read stale (module docstring), where the layer
    holds its reads (``held_reads``; layer 1 reads the encode, which is never stale)."""
    if l < 2 or not m.held_reads or not m.held_reads[l - 1]:
        return 0.0
    share = 0.5 if ways == 1 else (chunks_per_way - 1) / (2.0 * chunks_per_way)
    return share * cut.halo_entries(part)


def _mask_apply(p: HardwareProfile) -> float:
    return p.mask_apply_s_per_value or p.dropout_s_per_value


def _mask_draw_s(p: HardwareProfile, m: ModelShape, l: int, n: float) -> float:
    """A stage's draw of layer ``l``'s dropout mask over ``n`` rows, once per epoch."""
    if m.dropout <= 0:
        return 0.0
    return n * m.dims[l - 1] * max(p.dropout_s_per_value * p.size_factor("dropout", n)
                                   - _mask_apply(p) * p.size_factor("mask_apply", n), 0.0)


def _encode_s(p: HardwareProfile, m: ModelShape, g: GraphStats, rows: float) -> float:
    if not m.input_proj:
        return 0.0
    if g.sparse_features:
        return rows * g.num_features * g.feature_density * m.hidden * p.sparse_encode_s_per_nnz_col
    return 2.0 * rows * g.num_features * m.hidden * p.encode_s_per_flop


def _decode_s(p: HardwareProfile, m: ModelShape, rows: float) -> float:
    t = rows * m.num_classes * p.row_cost(m.kind) * p.size_factor("row", rows)
    if m.classifier:
        t += 2.0 * rows * m.dims[-1] * m.num_classes * p.matmul_s_per_flop * p.size_factor("matmul", rows)
    return t


def _step_s(p: HardwareProfile, params: int) -> float:
    return 12.0 * params * _E * p.gather_s_per_byte


def _msg_s(p: HardwareProfile, nbytes: float, both_ways: bool = False) -> float:
    """One message of ``nbytes``; ``both_ways``: while the peer sends as many back (an exchange)."""
    if both_ways:
        return p.exchange_latency() + nbytes / p.exchange_rate()
    return p.link_latency_s + nbytes / p.link_bytes_per_s


def _allreduce_s(p: HardwareProfile, ranks: int, params: int) -> float:
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) * p.link_latency_s + 2.0 * (ranks - 1) / ranks * params * _E / p.link_bytes_per_s


def _ranges(split: tuple[int, ...]) -> list[tuple[int, int]]:
    """1-based inclusive layer range of each stage (:func:`stage_layer_ranges`'s
    0-based ``[a, b)`` as layers ``a + 1 .. b``)."""
    return [(a + 1, b) for a, b in stage_layer_ranges(split)]


def _stage_params(m: ModelShape, split: tuple[int, ...], s: int) -> int:
    a, b = _ranges(split)[s]
    n = sum(m.layer_params[a - 1:b])
    return n + (m.encode_params if s == 0 else 0) + (m.decode_params if s == len(split) - 1 else 0)


# ---------------------------------------------------------------------- time
def layer_costs(p: HardwareProfile, m: ModelShape, g: GraphStats, chunks: int,
                row_masks: bool = False) -> tuple[list[float], float, float]:
    """``(seconds of each layer over all C chunks, the stage-0 encode, the last
    stage's classifier and loss over all chunks)`` of one way (W = 1): what a
    cost-balanced stage split evens out."""
    cut = g.cut(chunks)
    parts = [(k, cut.part_rows[k], cut.part_in_edges[k], cut.part_rows[k] + cut.halo_rows[k])
             for k in range(cut.num_parts)]
    per_layer = [sum(_layer_s(p, m, l, own, e, loc, True, row_masks, _stale_edges(m, l, cut, k, chunks, 1))
                     for k, own, e, loc in parts)
                 + (_mask_draw_s(p, m, l, g.num_nodes) if row_masks else 0.0) for l in range(1, m.layers + 1)]
    return per_layer, _encode_s(p, m, g, g.num_nodes), sum(_decode_s(p, m, own) for _k, own, _e, _l in parts)


def predict_time(p: HardwareProfile, m: ModelShape, g: GraphStats, *, mode: str, workers: int, ways: int,
                 stages: int, chunks: int, split: tuple[int, ...], way_halo_rows: float = 0.0,
                 row_masks: bool = False, cross_epoch_chunks: int = 0) -> TimeParts:
    """Predicted :class:`TimeParts` of one epoch of the layout (module docstring).
    ``way_halo_rows``: hybrid's ``M_W`` (rows sent between ways per layer);
    ``row_masks``: the pipelined modes draw one dropout mask per row and layer;
    ``cross_epoch_chunks``: pipeline mode's K (0: the synchronous schedule)."""
    n, e, L = g.num_nodes, g.num_edges, m.layers
    if mode == "single":
        c = (_encode_s(p, m, g, n) + sum(_layer_s(p, m, l, n, e, n, False) for l in range(1, L + 1))
             + _decode_s(p, m, n) + _step_s(p, m.num_params)) / max(
                 p.single_speedup * p.size_factor("single_speedup", n), 1.0)
        return TimeParts(c, c, 0.0, 0.0)
    if mode == "graph":
        cut = g.cut(workers)
        comp, comm = [], []
        for q in range(workers):
            own, ed, halo = cut.part_rows[q], cut.part_in_edges[q], cut.halo_rows[q]
            t = _encode_s(p, m, g, own + halo) + _decode_s(p, m, own) + _step_s(p, m.num_params)
            t += sum(_layer_s(p, m, l, own, ed, own + halo, l >= 2) for l in range(1, L + 1))
            comp.append(t * p.contention)
            peers = workers - 1
            comm.append(sum(2 * (peers * p.exchange_latency() + halo * m.dims[l - 1] * _E / p.exchange_rate())
                            for l in range(2, L + 1)) + _allreduce_s(p, workers, m.num_params))
        c, w = max(comp), max(comm)
        return TimeParts(c + w, c, w, 0.0)
    cut = g.cut(chunks)
    from gnnpipe.engine.schedule import way_blocks

    blocks = way_blocks(chunks, ways)
    ranges = _ranges(split)
    worst_epoch, worst = 0.0, (0.0, 0.0)
    for blk in blocks:
        way_rows = sum(cut.part_rows[k] for k in blk)
        # The rows a way holds: its block and the rows its chunks read (all N in pipeline mode).
        held_rows = n if ways == 1 else way_rows + way_halo_rows / ways
        totals = []
        for s, (a, b) in enumerate(ranges):
            t = sum(_mask_draw_s(p, m, l, held_rows) for l in range(a, b + 1)) if row_masks else 0.0
            for k in blk:
                own, ed, loc = cut.part_rows[k], cut.part_in_edges[k], cut.part_rows[k] + cut.halo_rows[k]
                t += sum(_layer_s(p, m, l, own, ed, loc, True, row_masks,
                                  _stale_edges(m, l, cut, k, len(blk), ways)) for l in range(a, b + 1))
                if s == stages - 1:
                    t += _decode_s(p, m, own)
            totals.append((t + _step_s(p, _stage_params(m, split, s))) * p.contention)
        enc = _encode_s(p, m, g, held_rows) * p.contention
        nk = len(blk)
        # The share of the encode before the first chunk can flow (and after the last
        # one's backward): the rows of the way's first chunk, on average over the chunks;
        # all of it with sparse features (encoded whole: engine.encode_groups).
        first = 1.0 if g.sparse_features else min(
            1.0, sum(cut.part_rows[k] + cut.halo_rows[k] for k in blk) / nk / max(held_rows, 1.0))
        hide = 1.0
        if mode == "pipeline" and cross_epoch_chunks > 0 and stages > 1:
            hide = 1.0 - min(cross_epoch_chunks, stages - 1) / (stages - 1)
            enc *= 1.5  # the second encode, forward only
        # Critical paths: stage 0's work (the whole encode among its chunks) plus one
        # chunk of each other stage; or another stage's work plus the first encode
        # group and one chunk of each other stage (fill and drain).
        work = [totals[0] + enc] + totals[1:]
        path = max((first * enc if s else 0.0) + work[s] + hide * sum(totals[q] / nk for q in range(stages) if q != s)
                   for s in range(stages))
        comm = 0.0
        if stages > 1:
            width = m.dims[ranges[0][1]] + (m.h0_dim if m.needs_h0 else 0)
            comm += 2 * (stages - 1) * _msg_s(p, way_rows / nk * width * _E) + 2 * nk * p.link_latency_s
        if ways > 1:
            per_step = sum(2 * _msg_s(p, way_halo_rows / ways / nk * m.dims[l - 1] * _E, both_ways=True)
                           for s, (a, b) in enumerate(ranges) for l in range(max(a, 2), b + 1))
            comm += nk * per_step / stages + max(_allreduce_s(p, ways, _stage_params(m, split, s))
                                                 for s in range(stages))
        comm += p.link_latency_s  # the loss all-reduce
        epoch = path + comm
        compute = max(work)
        if epoch > worst_epoch:
            worst_epoch, worst = epoch, (compute, comm)
    compute, comm = worst
    return TimeParts(worst_epoch, compute, comm, max(worst_epoch - compute - comm, 0.0))


# -------------------------------------------------------------------- memory
def _feature_bytes(g: GraphStats, rows: float) -> float:
    if g.sparse_features:
        return 12.0 * rows * g.num_features * g.feature_density + 8.0 * rows
    return float(_E) * rows * g.num_features


def _common_bytes(p: HardwareProfile, g: GraphStats) -> float:
    """The runtime, plus, where workers compute in host memory (CPU: ``shared_memory``),
    the whole graph and its features, which every worker process holds. On a device
    only the rows it works on are there (counted with its chunks and encode)."""
    if not p.shared_memory:
        return float(p.runtime_bytes)
    return p.runtime_bytes + 8.0 * (g.num_nodes + 1) + 16.0 * g.num_edges + _feature_bytes(g, g.num_nodes)


def _ops_bytes(edges: float, rows: float) -> float:
    return 24.0 * edges + 16.0 * rows


def _encode_bytes(p: HardwareProfile, m: ModelShape, g: GraphStats, rows: float) -> float:
    """The features of the rows a worker encodes (on a device) and the encode's own
    buffers: the dropped-out copy of X with its mask, h0 and its gradient."""
    out = 0.0 if p.shared_memory else _feature_bytes(g, rows)
    if not m.input_proj:
        return out
    values = rows * g.num_features * (g.feature_density if g.sparse_features else 1.0)
    return out + values * (_E + 1) + 2.0 * rows * m.hidden * _E


def predict_memory(p: HardwareProfile, m: ModelShape, g: GraphStats, *, mode: str, workers: int, ways: int,
                   stages: int, chunks: int, split: tuple[int, ...], way_halo_rows: float = 0.0,
                   snapshot_period: int = 23, cross_epoch_chunks: int = 0) -> int:
    """Predicted peak bytes of the largest worker of the layout (module docstring);
    ``cross_epoch_chunks``: pipeline mode's K (its ``G_l`` are then buffers of their own)."""
    n, L, H = g.num_nodes, m.layers, m.hidden
    saved = p.saved(m.kind)
    base = _common_bytes(p, g)
    if mode in ("single", "graph"):
        if mode == "single":
            own, local, edges = float(n), float(n), float(g.num_edges)
        else:
            cut = g.cut(workers)
            q = max(range(workers), key=lambda i: cut.part_rows[i] + cut.halo_rows[i])
            own, local, edges = cut.part_rows[q], cut.part_rows[q] + cut.halo_rows[q], cut.part_in_edges[q]
        # Per layer: what it keeps per own row, and per halo row (graph mode's layers
        # read halo rows: their dropout mask, or the rows themselves for some kinds).
        halo_saved = p.saved_halo(m.kind) * (local - own)
        acts = sum((saved * own * m.dims[l] + halo_saved * m.dims[l - 1]) * _E for l in range(1, L + 1))
        peak = (base + _ops_bytes(edges, local) + _PARAM_BYTES * m.num_params + _encode_bytes(p, m, g, local)
                + acts + TRANSIENT_ROWS * local * H * _E)
        return int(peak)
    cut = g.cut(chunks)
    copies = 1 + (1 if snapshot_period > 1 else 0)  # B_l and the snapshot; G_l below
    own_rows = n / ways
    rows = n if ways == 1 else own_rows + way_halo_rows / ways
    if ways == 1:  # row_space.EpochGradPlan's capacity
        grad_rows = cut.boundary - (min(cut.boundary_rows) if cut.boundary_rows else 0) + 1
        widths = [m.dims[l - 1] for l in range(2, L + 1)]
        if cross_epoch_chunks == 0 and widths and lendable(int(min(cut.part_rows)), int(grad_rows), min(widths), _E):
            grad_rows = 0  # lent: every G_l fits in a slot of the first chunk back
    else:
        grad_rows = cut.boundary / ways + way_halo_rows / ways
    big = max(cut.part_rows[k] + cut.halo_rows[k] for k in range(cut.num_parts))
    # Every chunk of a way keeps its layers' saved values of its halo rows too, from its
    # forward to its backward (its dropout masks cover them: 3.4x the own rows at C = 8
    # on the 200k systems graph).
    halo_saved = p.saved_halo(m.kind) * cut.M / ways
    ops = _ops_bytes(g.num_edges / ways, rows)
    best = 0.0
    for s, (a, b) in enumerate(_ranges(split)):
        buffered = range(max(a, 2), b + 1)
        widest = max((m.dims[l - 1] for l in buffered), default=0)
        if ways > 1 and chunks == ways:
            # One chunk per way: B_l keeps the block, the rows of other ways share one
            # buffer, and so do the layers' G_l.
            bufs = sum(copies * own_rows * m.dims[l - 1] * _E for l in buffered)
            bufs += (rows - own_rows + grad_rows) * widest * _E
        else:
            bufs = sum((copies * rows + grad_rows) * m.dims[l - 1] * _E for l in buffered)
        acts = sum((saved * own_rows * m.dims[l] + halo_saved * m.dims[l - 1]) * _E for l in range(a, b + 1))
        h0 = 2.0 * rows * m.h0_dim * _E if m.needs_h0 else 0.0
        extra = _encode_bytes(p, m, g, rows) if s == 0 else 0.0
        if s == stages - 1:
            extra += 2.0 * rows * m.num_classes * _E
        peak = (base + ops + _PARAM_BYTES * _stage_params(m, split, s) + bufs + acts + h0 + extra
                + TRANSIENT_ROWS * big * H * _E)
        best = max(best, peak)
    return int(best)
