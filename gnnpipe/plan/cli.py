"""``python -m gnnpipe.plan``: list candidate layouts with predicted figures.

    python -m gnnpipe.plan --dataset amazon_photo --model gcnii --layers 32 --hidden 100 --workers 2
    python -m gnnpipe.plan --num-nodes 111059956 --num-edges 1615685872 --features 128 --classes 172 \\
        --edge-cut-fraction 0.2 --workers 64 --device-memory-gb 80 --flops 19.5e12 --link-gbps 100
    python -m gnnpipe.plan calibrate --out profile.json

With a graph (``--dataset``) the partition figures and bytes are exact; with
statistics alone the halos are estimated (:func:`gnnpipe.plan.inputs.estimate_cut`).
The hardware is ``--profile FILE`` (written by ``calibrate``), figures given on the
command line (``--flops`` ...: :func:`profile_from_figures`), or a calibration on the
fly. Every figure printed is a prediction. Exit codes: 0 done (also when nothing
fits: the table says so), 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn, Sequence

from gnnpipe.errors import ConfigError, GnnpipeInputError
from gnnpipe.plan.inputs import HardwareProfile

__all__ = ["main", "entry", "format_table", "profile_from_figures"]

PROG = "python -m gnnpipe.plan"
#: Values autograd keeps per (row x width) of one layer, as the CPU calibration
#: counts them (device independent): used when the profile is given as figures.
DEFAULT_SAVED = {"gcn": 2.26, "sage": 3.26, "gcnii": 2.26, "resgcn+": 3.28, "mlp": 2.0}
#: ... and besides per (halo row x width), dropout 0.5 (the CPU calibration's count
#: on a chunk with halo rows: a mask's byte, plus the input rows where a layer keeps them).
DEFAULT_SAVED_HALO = {"gcn": 0.25, "sage": 1.25, "gcnii": 0.25, "resgcn+": 2.27, "mlp": 0.0}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise ConfigError(f"command line: {message}")


def profile_from_figures(*, flops: float, link_gbps: float, device_memory_gb: float,
                         memory_bandwidth_gbs: float | None = None, link_latency_us: float = 10.0) -> HardwareProfile:
    """A :class:`HardwareProfile` of a device known only by its dense FLOP/s, its
    memory bandwidth (default ``flops / 10`` bytes/s) and its link. Assumptions:
    matmul forward + backward = 3x the forward FLOPs at ``flops``; an aggregation
    moves 24 bytes per (edge x width) forward + backward; a layer's elementwise rest
    10 read-write passes per value, its input dropout 6 (a draw, a compare and a
    multiply forward, a multiply backward), applying a drawn mask 3; a call costs 20 us of launches; no runtime bytes
    beyond the allocator's count."""
    for what, v in (("--flops", flops), ("--link-gbps", link_gbps), ("--device-memory-gb", device_memory_gb)):
        if v is None or not v > 0:
            raise ConfigError(f"{what}: expected a value > 0, found {v!r}")
    bw = float(memory_bandwidth_gbs) * 1e9 if memory_bandwidth_gbs else float(flops) / 10.0
    row = 10 * 2 * 4 / bw
    return HardwareProfile(
        device="given", threads=0, device_memory_bytes=int(device_memory_gb * 2**30),
        matmul_s_per_flop=3.0 / flops, aggregate_s_per_edge_row=24.0 / bw, gather_s_per_byte=2.0 / bw,
        encode_s_per_flop=2.0 / flops, sparse_encode_s_per_nnz_col=24.0 / bw, call_overhead_s=20e-6,
        dropout_s_per_value=6 * 2 * 4 / bw, mask_apply_s_per_value=3 * 2 * 4 / bw,
        link_bytes_per_s=link_gbps * 1e9 / 8, link_latency_s=link_latency_us * 1e-6, runtime_bytes=0,
        layer_row_s_per_value={k: row for k in DEFAULT_SAVED}, saved_values_per_row=dict(DEFAULT_SAVED),
        saved_halo_values_per_row=dict(DEFAULT_SAVED_HALO),
        source=f"given: {flops:.3g} FLOP/s, {bw / 1e9:.0f} GB/s memory, {link_gbps:g} Gbit/s link")


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog=PROG, description="Candidate layouts of a run with predicted bytes, peak memory "
                 "and epoch time; the fastest that fits is marked *.", allow_abbrev=False)
    g = ap.add_argument_group("graph (a dataset, or statistics alone)")
    g.add_argument("--dataset"), g.add_argument("--data-root", metavar="DIR")
    g.add_argument("--data-option", action="append", default=[], metavar="KEY=VALUE")
    g.add_argument("--num-nodes", type=int), g.add_argument("--num-edges", type=int)
    g.add_argument("--features", type=int), g.add_argument("--classes", type=int)
    g.add_argument("--feature-density", type=float, default=1.0)
    g.add_argument("--edge-cut-fraction", type=float,
                   help="fraction of edges a k-way split cuts (default: a random split's 1 - 1/k)")
    m = ap.add_argument_group("model and layout")
    m.add_argument("--model", default="gcnii", choices=("gcn", "sage", "gcnii", "resgcn+", "mlp"))
    m.add_argument("--layers", type=int, default=8), m.add_argument("--hidden", type=int, default=64)
    m.add_argument("--input-proj", action=argparse.BooleanOptionalAction, default=None,
                   help="the input projection F -> H, as the trainer's flag (default: the model's)")
    m.add_argument("--classifier", action=argparse.BooleanOptionalAction, default=None,
                   help="the classifier H -> classes, as the trainer's flag (default: as --input-proj)")
    m.add_argument("--workers", type=int, default=2)
    m.add_argument("--mode", choices=("single", "graph", "pipeline", "hybrid"), help="only this mode")
    m.add_argument("--ways", type=int), m.add_argument("--chunks", type=int)
    m.add_argument("--partition", default="metis", choices=("metis", "random"))
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--snapshot-period", type=int,
                   help="as the trainer's (default: 23, or 1 for a GCN/GraphSAGE of 16+ layers)")
    m.add_argument("--dropout-masks", choices=("chunk", "row"), default="chunk",
                   help="the pipeline's dropout masks, as the trainer's --dropout-masks")
    m.add_argument("--cross-epoch-chunks", type=int, default=0, metavar="K",
                   help="pipeline mode's chunks run ahead at the turn of an epoch, as the trainer's "
                        "--cross-epoch-chunks (default 0: the synchronous schedule)")
    h = ap.add_argument_group("hardware (a profile, figures, or a calibration on the fly)")
    h.add_argument("--profile", metavar="FILE.json")
    h.add_argument("--memory-gb", type=float, help="memory one worker may use (overrides the profile)")
    h.add_argument("--device-memory-gb", type=float, help="memory of one device (with --flops)")
    h.add_argument("--flops", type=float, help="dense FLOP/s of one device")
    h.add_argument("--memory-bandwidth-gbs", type=float)
    h.add_argument("--link-gbps", type=float, help="link bandwidth, Gbit/s")
    h.add_argument("--link-latency-us", type=float)
    ap.add_argument("--json", action="store_true", help="print the plan as JSON instead of the table")
    return ap


def _calibrate_main(argv: Sequence[str]) -> int:
    from gnnpipe.plan.calibrate import calibrate
    from gnnpipe.plan.inputs import write_profile

    ap = _Parser(prog=f"{PROG} calibrate", description="Measure this machine (a few seconds).")
    ap.add_argument("--out", required=True, metavar="FILE.json")
    ap.add_argument("--hidden", type=int, default=100), ap.add_argument("--features", type=int, default=512)
    ap.add_argument("--feature-density", type=float, default=1.0)
    ap.add_argument("--mean-degree", type=float, default=16.0, help="in-edges per vertex of the graphs to plan")
    ap.add_argument("--num-nodes", type=int, default=20000,
                    help="vertices of the graphs to plan (the layers are timed at this size, 2,000 to 20,000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--link-gbps", type=float), ap.add_argument("--link-latency-us", type=float, default=50.0)
    a = ap.parse_args(list(argv))
    for what, v in (("--hidden", a.hidden), ("--features", a.features), ("--workers", a.workers)):
        if v < 1:
            raise ConfigError(f"{what}: expected an integer >= 1, found {v}")
    link = None if a.link_gbps is None else (a.link_gbps * 1e9 / 8, a.link_latency_us * 1e-6)
    if not a.mean_degree > 0:
        raise ConfigError(f"--mean-degree: expected a value > 0, found {a.mean_degree}")
    if a.num_nodes < 1:
        raise ConfigError(f"--num-nodes: expected an integer >= 1, found {a.num_nodes}")
    prof = calibrate(hidden=a.hidden, num_features=a.features, feature_density=a.feature_density,
                     mean_degree=a.mean_degree, num_nodes=a.num_nodes, workers=a.workers, link=link,
                     device=a.device)
    write_profile(prof, a.out)
    print(f"measured profile written to {a.out}")
    return 0


def _stats(a: argparse.Namespace) -> tuple[Any, Any]:
    """``(graph statistics, the graph or None)``."""
    from gnnpipe.plan.inputs import graph_stats, stats_only

    given = [a.num_nodes, a.num_edges, a.features, a.classes]
    if a.dataset is not None:
        if any(v is not None for v in given):
            raise ConfigError("command line: expected --dataset or --num-nodes/--num-edges/--features/--classes, "
                              "found both")
        from gnnpipe.data import load_dataset
        from gnnpipe.data.options import parse_option_words

        graph = load_dataset(a.dataset, root=a.data_root, **parse_option_words(a.data_option))
        return graph_stats(graph, method=a.partition, seed=a.seed), graph
    if any(v is None for v in given):
        raise ConfigError("command line: expected --dataset, or all of --num-nodes --num-edges --features "
                          "--classes")
    return stats_only(num_nodes=a.num_nodes, num_edges=a.num_edges, num_features=a.features,
                      num_classes=a.classes, edge_cut_fraction=a.edge_cut_fraction,
                      feature_density=a.feature_density), None


def _profile(a: argparse.Namespace, stats: Any, graph: Any = None) -> HardwareProfile:
    from gnnpipe.plan.inputs import read_profile

    if a.profile is not None:
        prof = read_profile(a.profile)
    elif a.flops is not None:
        return profile_from_figures(flops=a.flops, link_gbps=a.link_gbps or 100.0,
                                    device_memory_gb=a.device_memory_gb or a.memory_gb or 80.0,
                                    memory_bandwidth_gbs=a.memory_bandwidth_gbs,
                                    link_latency_us=a.link_latency_us or 10.0)
    else:
        from gnnpipe.plan.calibrate import calibrate_for

        link = None if a.link_gbps is None else (a.link_gbps * 1e9 / 8, (a.link_latency_us or 50.0) * 1e-6)
        prof = calibrate_for(stats, a.model, a.hidden, workers=a.workers, graph=graph, link=link)
    over: dict[str, Any] = {}
    if a.link_gbps is not None:
        over["link_bytes_per_s"] = a.link_gbps * 1e9 / 8
        over["exchange_bytes_per_s"] = 0.0  # the given link's rate, both ways
    if a.link_latency_us is not None:
        over["link_latency_s"] = a.link_latency_us * 1e-6
        over["exchange_latency_s"] = 0.0  # the given latency, for exchanges too
    if a.memory_gb is not None or a.device_memory_gb is not None:
        over["device_memory_bytes"] = int((a.memory_gb or a.device_memory_gb) * 2**30)
        over["shared_memory"] = a.memory_gb is None and prof.shared_memory
    return prof.with_overrides(**over)


def format_table(plan: Any) -> str:
    """The candidates as a text table, fastest first, the chosen one marked ``*``."""
    gib = 2**30
    head = (f"{'':1} {'layout (predicted)':34} {'split':>9} {'epoch s':>9} {'compute':>8} {'comm':>8} "
            f"{'bubble':>8} {'MB/epoch':>10} {'GiB/worker':>10} {'fits':>4}  reason")
    lines = [f"graph {plan.graph['name']}: N={plan.graph['num_nodes']:,} E={plan.graph['num_edges']:,} "
             f"F={plan.graph['num_features']} classes={plan.graph['num_classes']} "
             f"({'exact partitions' if plan.graph['exact_partitions'] else 'halos estimated from statistics'}); "
             f"model {plan.model['model']}-{plan.model['layers']} hidden {plan.model['hidden']}; "
             f"hardware {plan.profile_source}", "ALL FIGURES BELOW ARE PREDICTIONS", head, "-" * len(head)]
    for c in plan.candidates:
        split = ",".join(map(str, c.stage_split)) if len(c.stage_split) <= 4 else f"{c.split}"
        lines.append(f"{'*' if c is plan.chosen else ' ':1} {c.label():34} {split:>9} {c.epoch_s:9.4g} "
                     f"{c.compute_s:8.3g} {c.comm_s:8.3g} {c.bubble_s:8.3g} {c.total_bytes / 1e6:10.1f} "
                     f"{c.peak_memory_bytes / gib:10.2f} {'yes' if c.fits else 'no':>4}  {c.reason}")
    lines.append(f"chosen: {plan.chosen.label() if plan.chosen else 'none'} ({plan.reason})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # As a run does by default (train.host_huge_pages), before anything large is allocated.
    from gnnpipe.huge_pages import request_huge_pages

    request_huge_pages()
    try:
        if argv[:1] == ["calibrate"]:
            return _calibrate_main(argv[1:])
        a = _parser().parse_args(argv)
        for what, v, lo in (("--workers", a.workers, 1), ("--layers", a.layers, 1), ("--hidden", a.hidden, 1),
                            ("--chunks", a.chunks, 1), ("--ways", a.ways, 1),
                            ("--cross-epoch-chunks", a.cross_epoch_chunks, 0),
                            ("--snapshot-period", a.snapshot_period, 1)):
            if v is not None and v < lo:
                raise ConfigError(f"{what}: expected an integer >= {lo}, found {v}")
        if a.memory_gb is not None and not a.memory_gb > 0:
            raise ConfigError(f"--memory-gb: expected a value > 0, found {a.memory_gb}")
        from gnnpipe.config import ModelConfig, default_snapshot_period, stale_sensitive
        from gnnpipe.plan.costs import ModelShape
        from gnnpipe.plan.planner import make_plan

        model = ModelConfig(model=a.model, layers=a.layers, hidden=a.hidden, input_proj=a.input_proj,
                            classifier=a.classifier)
        if a.snapshot_period is None:  # the trainer's default for this model
            a.snapshot_period = default_snapshot_period(stale_sensitive(a.model, a.layers))
        stats, graph = _stats(a)
        prof = _profile(a, stats, graph)
        shape = ModelShape.of(model, stats.num_features, stats.num_classes)
        plan = make_plan(stats, shape, prof, workers=a.workers,
                         modes=(a.mode,) if a.mode else ("single", "graph", "pipeline", "hybrid"),
                         ways=a.ways, chunks=a.chunks, snapshot_period=a.snapshot_period,
                         row_masks=a.dropout_masks == "row", cross_epoch_chunks=a.cross_epoch_chunks)
        print(json.dumps(plan.as_dict(), indent=1) if a.json else format_table(plan), flush=True)
        return 0
    except GnnpipeInputError as exc:
        print(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    sys.exit(main(argv))
