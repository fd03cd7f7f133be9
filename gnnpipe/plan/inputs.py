"""The planner's inputs, as frozen data: what the graph is (:class:`GraphStats`) and
what the machine is (:class:`HardwareProfile`).

A :class:`GraphStats` comes either from a graph at hand (:func:`graph_stats`: the
partition figures of every part count the planner asks about are EXACT, computed
from the same METIS partition a run would use) or from statistics alone
(:func:`stats_only`: N, E, F, classes and an edge-cut fraction; the halo of a part
count is then ESTIMATED, see :func:`estimate_cut`).

Units: counts are vertices or stored directed edges; bytes are bytes; rates are
seconds per unit of work (forward + backward of the kernel, per unit of forward work).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable

from gnnpipe.errors import ConfigError

__all__ = ["CutStats", "GraphStats", "HardwareProfile", "estimate_cut", "graph_stats", "stats_only",
           "read_profile", "write_profile"]


@dataclass(frozen=True)
class CutStats:
    """Partition figures of ``num_parts`` contiguous parts (a chunking or a way split).

    Shapes: per-part tuples have ``num_parts`` entries. ``halo_rows[p]`` = distinct
    vertices outside part p read by p (DESIGN.md 2's halo); ``M = sum(halo_rows)``;
    ``boundary_rows[p]`` = vertices of part p read by at least one other part (the
    rows of p that a stage's gradient buffers hold; empty: not known, and
    :attr:`boundary` falls back to ``M``, its upper bound); ``halo_in_edges[p]`` = the
    in-edges of part p whose source is outside p (a chunk's halo entries; empty: not
    known, taken as none); ``exact`` is True when computed from the partition a run
    would use.
    """

    num_parts: int
    part_rows: tuple[int, ...]
    part_in_edges: tuple[int, ...]
    halo_rows: tuple[int, ...]
    exact: bool
    boundary_rows: tuple[int, ...] = ()
    halo_in_edges: tuple[int, ...] = ()

    def halo_entries(self, part: int) -> int:
        """``halo_in_edges[part]``, 0 where not known."""
        return int(self.halo_in_edges[part]) if self.halo_in_edges else 0

    @property
    def M(self) -> int:  # noqa: N802 - DESIGN.md's name
        return int(sum(self.halo_rows))

    @property
    def boundary(self) -> int:
        """Distinct vertices read by a part other than their own: the union of the
        parts' halos (``M`` counts a vertex once per reading part)."""
        return int(sum(self.boundary_rows)) if self.boundary_rows else self.M


@dataclass(frozen=True)
class GraphStats:
    """What the planner needs to know about a graph.

    Attributes:
        name: for the table.
        num_nodes: N; num_edges: E (stored directed edges, self-loops removed);
        num_features: F; num_classes; feature_density: non-zero fraction of X (1.0
            for dense features); sparse_features: True when X is stored as CSR.
        edge_cut_fraction: fraction of stored edges a k-way split cuts, for
            estimated parts (None when every part count is exact).
        cuts: exact partition figures by part count (empty for statistics alone).
        graph: the graph itself when at hand (not compared, not serialised).
        cut_of: a function ``k -> CutStats`` computing exact figures on demand.
        chunked_of: ``k -> ChunkedGraph`` of the run's own partition (memoised).
    """

    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    feature_density: float = 1.0
    sparse_features: bool = False
    edge_cut_fraction: float | None = None
    cuts: dict[int, CutStats] = field(default_factory=dict, compare=False)
    graph: Any = field(default=None, compare=False, repr=False)
    cut_of: Callable[[int], CutStats] | None = field(default=None, compare=False, repr=False)
    chunked_of: Callable[[int], Any] | None = field(default=None, compare=False, repr=False)

    @property
    def exact(self) -> bool:
        return self.cut_of is not None

    def cut(self, num_parts: int) -> CutStats:
        """Figures of a ``num_parts``-way split: exact when the graph is at hand (and
        memoised), else :func:`estimate_cut`."""
        if num_parts not in self.cuts:
            self.cuts[num_parts] = (self.cut_of(num_parts) if self.cut_of is not None
                                    else estimate_cut(self, num_parts))
        return self.cuts[num_parts]

    def way_halo_rows(self, chunks: int, ways: int) -> int:
        """Hybrid's ``M_W``: rows the W way-blocks of a C-chunk split send each other per
        layer; exact (:func:`gnnpipe.engine.hybrid.way_pair_count`) with the graph at
        hand, else the halo of an estimated W-way split."""
        if ways <= 1:
            return 0
        if self.chunked_of is not None:
            from gnnpipe.engine.hybrid import way_pair_count

            return way_pair_count(self.chunked_of(chunks), ways)
        return estimate_cut(self, ways).M

    def release(self) -> None:
        """Drop the memoised partitions (their graphs are copies of this one)."""
        if self.chunked_of is not None:
            getattr(self.chunked_of, "memo", {}).clear()

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "num_nodes": self.num_nodes, "num_edges": self.num_edges,
                "num_features": self.num_features, "num_classes": self.num_classes,
                "feature_density": self.feature_density, "sparse_features": self.sparse_features,
                "edge_cut_fraction": self.edge_cut_fraction, "exact_partitions": self.exact}


def estimate_cut(stats: GraphStats, num_parts: int) -> CutStats:
    """Halo figures of a balanced ``num_parts``-way split from statistics alone.

    How: every part gets N/k rows and E/k in-edges; a fraction ``f`` of them is cut
    (``edge_cut_fraction``, capped at a random split's ``1 - 1/k``; None means a
    random split). The ``m = f E / k`` cut in-edges of a part draw their sources from
    the ``n = N (1 - 1/k)`` outside vertices; the expected number of distinct
    sources (balls into bins) is ``n (1 - exp(-m / n))``: that is the part's halo.
    It assumes sources spread evenly over the outside (true for a random split, an
    overestimate for METIS, whose cut edges cluster on boundary vertices).
    """
    k = int(num_parts)
    n, e = int(stats.num_nodes), int(stats.num_edges)
    if k <= 1:
        return CutStats(1, (n,), (e,), (0,), exact=False)
    random_f = 1.0 - 1.0 / k
    f = random_f if stats.edge_cut_fraction is None else min(float(stats.edge_cut_fraction), random_f)
    outside = n * (1.0 - 1.0 / k)
    cut_in = f * e / k
    halo = outside * (1.0 - math.exp(-cut_in / outside)) if outside > 0 else 0.0
    rows, edges = -(-n // k), -(-e // k)
    # A vertex is in each of the other k - 1 parts' halos with probability halo / outside.
    boundary = n / k * (1.0 - (1.0 - halo / outside) ** (k - 1)) if outside > 0 else 0.0
    return CutStats(k, (rows,) * k, (edges,) * k, (int(round(halo)),) * k, exact=False,
                    boundary_rows=(int(round(boundary)),) * k, halo_in_edges=(int(round(cut_in)),) * k)


def stats_only(*, num_nodes: int, num_edges: int, num_features: int, num_classes: int,
               edge_cut_fraction: float | None = None, feature_density: float = 1.0,
               name: str = "statistics") -> GraphStats:
    """A :class:`GraphStats` without a graph; ConfigError (one line) for a bad figure."""
    for what, v, lo in (("num_nodes", num_nodes, 1), ("num_edges", num_edges, 0),
                        ("num_features", num_features, 1), ("num_classes", num_classes, 1)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ConfigError(f"{what}: expected an integer >= {lo}, found {v!r}")
    if edge_cut_fraction is not None and not 0.0 <= float(edge_cut_fraction) <= 1.0:
        raise ConfigError(f"edge_cut_fraction: expected a value in [0, 1], found {edge_cut_fraction!r}")
    if not 0.0 < float(feature_density) <= 1.0:
        raise ConfigError(f"feature_density: expected a value in (0, 1], found {feature_density!r}")
    return GraphStats(name=name, num_nodes=num_nodes, num_edges=num_edges, num_features=num_features,
                      num_classes=num_classes, feature_density=float(feature_density),
                      sparse_features=float(feature_density) < 1.0,
                      edge_cut_fraction=None if edge_cut_fraction is None else float(edge_cut_fraction))


def graph_stats(graph: Any, *, method: str = "metis", seed: int = 0) -> GraphStats:
    """Exact statistics of ``graph`` (self-loops removed, as a run removes them): every
    part count's figures come from :func:`gnnpipe.partition.chunk_graph` with the
    run's method and seed (and its partition cache), so they are the run's own."""
    from gnnpipe.data.sparse import SparseFeatures

    g = graph.remove_self_loops()
    x = g.features
    sparse = isinstance(x, SparseFeatures)
    density = float(x.density) if sparse else 1.0

    memo: dict[int, Any] = {}

    def chunked_of(k: int) -> Any:
        from gnnpipe.partition import chunk_graph

        if k not in memo:
            memo[k] = chunk_graph(g, k, method=method, seed=seed)
        return memo[k]

    chunked_of.memo = memo  # type: ignore[attr-defined]

    def cut_of(k: int) -> CutStats:
        if k <= 1:
            return CutStats(1, (g.num_nodes,), (g.num_edges,), (0,), exact=True)
        from gnnpipe.engine.row_space import boundary_rows

        chunked = chunked_of(k)
        s = chunked.stats
        # A plan's entries in columns past its own rows read halo rows.
        halo_in = tuple(int((plan.indices >= plan.num_own).sum()) for plan in chunked.plans)
        return CutStats(k, tuple(s.part_sizes), tuple(s.part_in_edges), tuple(s.halo_sizes), exact=True,
                        boundary_rows=boundary_rows(chunked.plans, g.num_nodes), halo_in_edges=halo_in)

    return GraphStats(name=g.name or "graph", num_nodes=g.num_nodes, num_edges=g.num_edges,
                      num_features=int(x.shape[1]), num_classes=int(g.num_classes),
                      feature_density=density, sparse_features=sparse, graph=g, cut_of=cut_of,
                      chunked_of=chunked_of)


@dataclass(frozen=True)
class HardwareProfile:
    """What one worker's device does per unit of work, and its link.

    Rates are seconds per unit of FORWARD work for forward + backward together, at
    ``threads`` intra-op threads (one worker's share of the cores); ``single_speedup``
    is how much faster the same work runs with all of a node's cores (single mode;
    below 1 on a node whose cores are busy with other work); ``contention`` how much
    slower each worker's compute runs when the workers of a node run at once.

    Attributes (units in the names): ``matmul_s_per_flop`` dense [n, H] x [H, H];
    ``aggregate_s_per_edge_row`` one ChunkOps aggregation per (edge x width);
    ``row_s_per_value`` the rest of a layer (activation, residuals) per (row x
    width) of its output, by model kind in ``layer_row_s_per_value``;
    ``dropout_s_per_value`` a layer's input dropout, forward + backward, per (row x
    width) of its input, drawing its mask (single and graph mode, whose halo rows
    draw too); ``mask_apply_s_per_value`` the same with the mask given (a pipeline
    stage draws one mask per layer over all N rows and every chunk applies its own
    and halo rows of it, :mod:`gnnpipe.models.masks`; 0: not measured, taken as
    ``dropout_s_per_value``); ``gather_s_per_byte``
    copying rows (``B_l[local_ids]``, concatenations); ``encode_s_per_flop`` the dense
    input projection with its dropout; ``sparse_encode_s_per_nnz_col`` the CSR one;
    ``call_overhead_s`` fixed cost of one layer call on a chunk (forward + backward);
    ``saved_values_per_row`` values an autograd forward keeps per (row x width), by
    model kind; ``saved_halo_values_per_row`` what it keeps besides per (halo row x
    width) of a chunk or part (the input dropout's mask of the halo rows, and the
    input rows where a layer keeps them); ``runtime_bytes`` a worker's memory before any graph data (CPU: the
    process with torch loaded; CUDA: the allocator's count, 0); ``device_memory_bytes``
    the device's memory, split evenly between the workers of a node when
    ``shared_memory`` (CPU: the node's RAM); ``link_bytes_per_s`` / ``link_latency_s`` between workers.
    ``exchange_bytes_per_s`` and ``exchange_latency_s``: each direction's rate, and
    the fixed seconds, of an exchange as graph mode's halo exchange and the hybrid's
    per-step exchange make it: two workers sending to each other at once, right after
    a kernel, so that each also pays the other's lateness (0: taken as
    ``link_bytes_per_s`` / ``link_latency_s``; :mod:`gnnpipe.plan.twins`);
    ``rate_rows``: the rows of the graph the rates were measured on; ``large_rows``
    and ``large_rate_ratio``: a second measurement on a larger graph, each
    size-dependent rate there over its value here (keys ``matmul``, ``aggregate``,
    ``gather``, ``dropout``, ``mask_apply``, ``row``, ``single_speedup``, and
    ``stack``: a layer run among others per layer over one alone, 1 at the first
    size, where the layers are timed in stacks already; :meth:`size_factor`).
    """

    device: str
    threads: int
    device_memory_bytes: int
    matmul_s_per_flop: float
    aggregate_s_per_edge_row: float
    gather_s_per_byte: float
    encode_s_per_flop: float
    sparse_encode_s_per_nnz_col: float
    call_overhead_s: float
    link_bytes_per_s: float
    link_latency_s: float
    runtime_bytes: int
    single_speedup: float = 1.0
    contention: float = 1.0
    dropout_s_per_value: float = 0.0
    mask_apply_s_per_value: float = 0.0
    layer_row_s_per_value: dict[str, float] = field(default_factory=dict)
    saved_values_per_row: dict[str, float] = field(default_factory=dict)
    saved_halo_values_per_row: dict[str, float] = field(default_factory=dict)
    shared_memory: bool = False
    source: str = "measured"
    exchange_bytes_per_s: float = 0.0
    rate_rows: int = 0
    large_rows: int = 0
    large_rate_ratio: dict[str, float] = field(default_factory=dict)
    exchange_latency_s: float = 0.0

    def exchange_rate(self) -> float:
        """Bytes/s each way of a two-sided exchange (:attr:`exchange_bytes_per_s`)."""
        return self.exchange_bytes_per_s or self.link_bytes_per_s

    def exchange_latency(self) -> float:
        """Fixed seconds of a two-sided exchange between kernels (:attr:`exchange_latency_s`)."""
        return self.exchange_latency_s or self.link_latency_s

    def size_factor(self, rate: str, rows: float) -> float:
        """How many times its calibrated value the rate ``rate`` (a key of
        ``large_rate_ratio``) is on a kernel over ``rows`` rows: 1 up to ``rate_rows``
        (the rows the rates were measured on), the measured ratio from ``large_rows``
        on, and between them linear in ``log(rows)``. Past the cache a kernel streams
        its rows from memory, and on CPU past glibc's 32 MiB mmap threshold each of its
        outputs is fresh pages: on this project's 2-core machine an aggregation cost
        3.4x as much per (edge x width) over 200,000 rows as over 20,000, a dropout 5.4x
        (the calibration of ``bench/results/plan_check_200k.json``), and a gather with
        dropout 1.2 ns a value over 82,000 rows against 6.4 over 100,000
        (``bench/results/chunk_rates.json``): a step the interpolation smooths. A
        profile without a second measurement scales nothing."""
        ratio = self.large_rate_ratio.get(rate)
        if ratio is None or self.large_rows <= self.rate_rows or rows <= self.rate_rows:
            return 1.0
        if rows >= self.large_rows:
            return ratio
        share = math.log(rows / self.rate_rows) / math.log(self.large_rows / self.rate_rows)
        return 1.0 + share * (ratio - 1.0)

    def row_cost(self, model: str) -> float:
        """Seconds per (row x width) of a layer's elementwise work for ``model``."""
        return self.layer_row_s_per_value.get(model, max(self.layer_row_s_per_value.values(), default=2e-9))

    def saved(self, model: str) -> float:
        """Values autograd keeps per (row x width) of one layer of ``model``."""
        return self.saved_values_per_row.get(model, 6.0)

    def saved_halo(self, model: str) -> float:
        """Values autograd keeps per (halo row x width) of one layer of ``model``
        (0.25: a dropout mask's byte, where a profile does not say)."""
        return self.saved_halo_values_per_row.get(model, 0.25)

    def with_overrides(self, **kw: Any) -> "HardwareProfile":
        """A copy with the given fields replaced (None values ignored); marked ``given``."""
        kw = {k: v for k, v in kw.items() if v is not None}
        return replace(self, **kw, source=self.source + "+given") if kw else self


def write_profile(profile: HardwareProfile, path: str | Path) -> None:
    from gnnpipe.atomic import atomic_open

    with atomic_open(Path(path), "w") as fh:
        json.dump(asdict(profile), fh, indent=1, sort_keys=True)


def read_profile(path: str | Path) -> HardwareProfile:
    """A profile written by ``python -m gnnpipe.plan calibrate``; ConfigError (one
    line) when missing or malformed."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"--profile: expected an existing JSON file, found nothing at {str(p)!r}") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--profile: expected a JSON profile, found {str(p)!r} ({exc})") from None
    names = {f.name for f in fields(HardwareProfile)}
    if not isinstance(raw, dict) or set(raw) - names:
        raise ConfigError(f"--profile: expected the keys of a HardwareProfile, found {sorted(raw)[:6]}")
    try:
        return HardwareProfile(**raw)
    except TypeError as exc:
        raise ConfigError(f"--profile: expected a complete HardwareProfile, found {exc}") from None
