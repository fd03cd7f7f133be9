"""A pipeline worker's compute against single mode's one-thread compute / S, and the
pipeline's epoch against graph mode's (issue 14's compute and dense-epoch targets).

Pipeline mode does no extra arithmetic: a stage computes L/S layers for all rows, so
with one thread per worker its compute per epoch should be close to a one-thread
single-mode epoch divided by S. What it adds is per-chunk work (gathers of halo rows,
gradient scatters, small kernels). For each graph and model this runs, through the
public entry (``python -m gnnpipe.train``), one after the other in one invocation:

* ``single`` with ``OMP_NUM_THREADS=1`` (its compute is its epoch time);
* ``pipeline`` (S workers, C chunks, one thread each: the launcher's share of 2 cores);
* ``graph`` (S workers, one thread each), for the epoch ratio pipeline / graph.

Figures per epoch are the means over the epochs after the warm-up ones that the record
itself leaves out (``summary.mean_epoch_time_skipped_epochs``), or after the first
``--skip-epochs`` (for a large graph whose few epochs are each long); the pipeline's compute is
the time split of the slowest rank (``epochs[].time.compute_s``, which with wait and
bubble adds up to that rank's epoch). The load average is recorded before and after
each run.

``--rounds N`` runs every case N times in turn (round 1 all cases, then round 2 ...),
the three modes of a case one after the other in each round, in the reverse order every
other round. A ratio is then taken within one round, between runs a minute apart: on
this machine the same code's epochs moved up to 2.2x between invocations minutes apart
(``bench/results/stale_ab_dense/``), so a ratio of runs far apart measures the machine.
Each case's ``computed`` is the median over its rounds of each round's ratio (their
range beside it); the JSON is written after every case of every round, and
``--resume`` continues a run that stopped with the rounds it has.

``--decompose`` adds three runs to every round, to say what the compute ratio is made
of: ``single_pair``, two one-thread single runs started together (one per core: what
two busy processes cost each other on this machine, which a pipeline's S workers pay
and a lone single run does not); ``pipeline_one_worker``, the same C chunks through
one stage on one worker (the chunks' own extra work, with nothing else running); and
``pipeline_one_worker_pair``, two of those started together (what two processes
working through chunks cost each other, which need not be what two single runs do:
a chunk's rows are worked on while they sit in the cache the two cores share). Then
``chunking_overhead x chunked_sharing_slowdown x pipeline_compute_over_one_worker_pair_per_stage``
is the compute ratio, the last factor what the S-stage pipeline adds beyond them.
Writes a JSON with machine, load and config::

    python -m bench.compute_split --out bench/results/compute_split.json
    python -m bench.compute_split --rounds 5 --epochs 6 --out bench/results/compute_split_rounds.json
    python -m bench.compute_split --rounds 3 --decompose --out bench/results/compute_split_decomposed.json
    # the 200k-vertex systems graph (bench/graphs.py SYSTEMS_SYNTHETIC), GCN-32:
    python -m bench.compute_split --cases synthetic:gcn --epochs 4 --skip-epochs 1 \
        --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 \
        --data-option feature_signal=0.22 --data-option seed=0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .runner import load_average, write_measurement

DEFAULT_CASES = ("blogcatalog:gcnii", "blogcatalog:gcn", "amazon_photo:gcnii", "amazon_photo:gcn")
#: Seconds a trainer run may take before it is killed and its case reported failed.
RUN_TIMEOUT_S = 3600


def _trainer_argv(dataset: str, model: str, mode: str, args: argparse.Namespace, out: Path,
                  extra: tuple[str, ...] = ()) -> list[str]:
    """The trainer's command line of one run of ``mode`` (one of :data:`MODES` or
    :data:`DECOMPOSE_MODES`; a pair, :data:`PAIRS`, is two runs of the mode it pairs)."""
    mode = PAIRS.get(mode, mode)
    trainer_mode = "pipeline" if mode == "pipeline_one_worker" else mode
    argv = [sys.executable, "-m", "gnnpipe.train", "--dataset", dataset, "--data-root", args.data_root,
            "--model", model, "--layers", str(args.layers), "--hidden", str(args.hidden),
            "--input-proj", "--classifier", "--dropout", "0.5", "--lr", "0.001",
            "--epochs", str(args.epochs), "--eval-every", str(args.epochs), "--seed", "0",
            "--mode", trainer_mode, "--json-out", str(out), "--log-level", "WARNING"]
    for option in args.data_option:
        argv += ["--data-option", option]
    if trainer_mode != "single":
        argv += ["--workers", "1" if mode == "pipeline_one_worker" else str(args.stages)]
    if trainer_mode == "pipeline":
        argv += ["--chunks", str(args.chunks), "--dropout-masks", args.dropout_masks]
        if args.stage_split and mode == "pipeline":
            argv += ["--stage-split", args.stage_split]
    return argv + list(extra)


def _trainer_env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def _figures(mode: str, argv: list[str], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """A finished run's per-epoch means (measured) from its record at ``out``."""
    record = json.loads(out.read_text())
    skip = record["summary"]["mean_epoch_time_skipped_epochs"] if args.skip_epochs is None else args.skip_epochs
    timed = record["epochs"][skip:]
    mean = lambda values: statistics.fmean(values)  # noqa: E731
    return {"mode": mode, "command": " ".join(argv[1:]), "epochs_timed": len(timed),
            "epoch_s": mean(e["epoch_time_s"] for e in timed),
            "compute_s": mean(e["time"]["compute_s"] for e in timed),
            "comm_wait_s": mean(e["time"]["comm_wait_s"] for e in timed),
            "bubble_s": mean(e["time"]["bubble_s"] for e in timed),
            # Each rank's own means, where the record has them (schema >= 6).
            "per_rank": ([{k: mean(e["time_per_rank"][r][k] for e in timed)
                           for k in ("epoch_s", "compute_s", "comm_wait_s", "bubble_s")}
                          for r in range(len(timed[0]["time_per_rank"]))]
                         if "time_per_rank" in timed[0] else None),
            "peak_memory_bytes": record["peak_memory_bytes"]}


def run_once(dataset: str, model: str, mode: str, args: argparse.Namespace, workdir: Path,
             extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """One ``python -m gnnpipe.train`` run of ``mode`` (``extra``: more trainer flags);
    returns its per-epoch means and the load. A pair (:data:`PAIRS`): two one-thread
    runs of its mode started together, one per core, each timed as that mode alone
    (``pair``: both runs' figures; the means of the two beside them)."""
    copies = 2 if mode in PAIRS else 1
    serial = len(list(workdir.iterdir()))
    outs = [workdir / f"{dataset}-{model}-{mode}-{serial}-{i}.json" for i in range(copies)]
    argvs = [_trainer_argv(dataset, model, mode, args, out, extra) for out in outs]
    env = _trainer_env()
    before = load_average()
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              cwd=args.checkout) for argv in argvs]
    try:
        results = [proc.communicate(timeout=RUN_TIMEOUT_S) for proc in procs]
    except subprocess.TimeoutExpired:
        for proc in procs:  # a stuck run ends the case with an error, leaving nothing running
            proc.kill()
            proc.communicate()
        return {"mode": mode, "returncode": None,
                "error": f"{mode}: no result within {RUN_TIMEOUT_S} s (killed): {' '.join(argvs[0][1:])}"}
    after = load_average()
    for proc, (_stdout, stderr) in zip(procs, results):
        if proc.returncode != 0:
            return {"mode": mode, "returncode": proc.returncode, "error": stderr[-500:]}
    figures = [_figures(mode, argv, out, args) for argv, out in zip(argvs, outs)]
    run = figures[0]
    if copies > 1:
        run = {"mode": mode, "command": run["command"], "epochs_timed": run["epochs_timed"],
               **{k: statistics.fmean(f[k] for f in figures) for k in ("epoch_s", "compute_s", "comm_wait_s",
                                                                        "bubble_s")},
               "per_rank": None, "peak_memory_bytes": [f["peak_memory_bytes"] for f in figures], "pair": figures}
    return {**run, "load_average_before": before, "load_average_after": after}


def compare(runs: dict[str, dict[str, Any]], stages: int, chunks: int) -> dict[str, Any]:
    """The issue's ratios from one case's runs (computed); with the
    :data:`DECOMPOSE_MODES` runs also what the compute ratio is made of:
    ``chunking_overhead`` (a one-worker pipeline's compute over single mode's, both one
    thread, alone on the machine: the chunks' own extra work), ``sharing_slowdown``
    (single mode's compute with a twin run on the other core over alone: what two busy
    one-thread processes cost each other here), and the pipeline's compute over the
    twin runs' compute / S; with ``pipeline_one_worker_pair`` too (not in rounds
    recorded before it existed) ``chunked_sharing_slowdown`` (the one-worker pipeline's
    compute with a twin on the other core over alone) and the pipeline's compute over
    the twin one-worker pipelines' / S (what the S stages add beyond the chunks' work
    and the two processes' sharing of it)."""
    single, pipe, graph = runs["single"], runs["pipeline"], runs["graph"]  # all succeeded (main checks)
    per_stage = single["compute_s"] / stages
    out = {"pipeline_compute_over_single_1thread_per_stage": pipe["compute_s"] / per_stage,
           "target_compute_ratio": 1.1,
           "pipeline_bubble_share": pipe["bubble_s"] / pipe["epoch_s"],
           "pipeline_bubble_share_per_rank": (None if pipe.get("per_rank") is None else
                                              [r["bubble_s"] / r["epoch_s"] for r in pipe["per_rank"]]),
           "schedule_bubble_share": (stages - 1) / (chunks + stages - 1),
           "pipeline_epoch_over_graph_epoch": pipe["epoch_s"] / graph["epoch_s"],
           "graph_compute_over_single_1thread_per_worker": graph["compute_s"] / per_stage,
           "target_epoch_ratio_dense": 1.0}
    if "single_pair" in runs:
        pair, one = runs["single_pair"], runs["pipeline_one_worker"]
        out.update({"chunking_overhead": one["compute_s"] / single["compute_s"],
                    "sharing_slowdown": pair["compute_s"] / single["compute_s"],
                    "pipeline_compute_over_single_pair_per_stage": pipe["compute_s"] / (pair["compute_s"] / stages)})
    if "pipeline_one_worker_pair" in runs:
        one, pair = runs["pipeline_one_worker"], runs["pipeline_one_worker_pair"]
        out.update({"chunked_sharing_slowdown": pair["compute_s"] / one["compute_s"],
                    "pipeline_compute_over_one_worker_pair_per_stage": pipe["compute_s"] / (pair["compute_s"] / stages)})
    return out


#: The modes of a case in the order of even rounds (odd rounds: reversed).
MODES = ("single", "pipeline", "graph")
#: With ``--decompose``, also in each round: two single runs at once (``single_pair``),
#: the pipeline's chunks on one worker (``pipeline_one_worker``: S = 1, C chunks) and
#: two of those at once (``pipeline_one_worker_pair``).
DECOMPOSE_MODES = ("single_pair", "pipeline_one_worker", "pipeline_one_worker_pair")
#: The modes that are two runs of another started together, and that other.
PAIRS = {"single_pair": "single", "pipeline_one_worker_pair": "pipeline_one_worker"}


def summarize_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each ratio's median over the rounds (element by element for per-rank lists),
    and its range: ``{name: value, name + "_range": [lo, hi]}``; constants (targets,
    the schedule's share) as they are (computed). A ratio that only some rounds have (a
    mode added to ``--decompose`` while a record was resumed) is over those rounds,
    and ``name + "_rounds"`` says how many."""
    computed = [r["computed"] for r in rounds]
    out: dict[str, Any] = {}
    names = list(dict.fromkeys(name for c in computed for name in c))
    for name in names:
        values = [c[name] for c in computed if name in c]
        first = values[0]
        if len(values) < len(computed):
            out[name + "_rounds"] = len(values)
        if first is None or name.startswith("target") or name == "schedule_bubble_share":
            out[name] = first
        elif isinstance(first, list):
            out[name] = [statistics.median(v[i] for v in values) for i in range(len(first))]
        else:
            out[name] = statistics.median(values)
            out[name + "_range"] = [min(values), max(values)]
    out["rounds"] = len(computed)
    return out


def run_arguments(ap: argparse.ArgumentParser, out: str, cases: tuple[str, ...]) -> None:
    """The flags :func:`run_once` reads (and ``--out``, ``--cases``), with defaults."""
    ap.add_argument("--out", default=out)
    ap.add_argument("--cases", nargs="+", default=list(cases), metavar="DATASET:MODEL")
    ap.add_argument("--data-root", default=os.environ.get("GNNPIPE_DATASETS", "../shared/datasets"))
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--skip-epochs", type=int, default=None, metavar="N",
                    help="time the epochs after the first N (default: the record's own warm-up count)")
    ap.add_argument("--data-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a loader option for every case (the trainer's --data-option; repeatable)")
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--dropout-masks", choices=("chunk", "row"), default="chunk",
                    help="the pipeline's dropout masks (the trainer's --dropout-masks)")
    ap.add_argument("--stage-split", default=None, metavar="L1,L2,...",
                    help="the pipeline's layers per stage (the trainer's --stage-split; default: equal)")
    ap.add_argument("--checkout", default=None, metavar="DIR",
                    help="run the trainer from this git checkout of gnnpipe (an A/B against another "
                         "commit; default: the installed one). Its gnnpipe/ is imported, but "
                         "gnnpipe.data and gnnpipe.partition stay the installed ones (the editable "
                         "install maps them by name), so they must be the same at both commits")


def run_arguments_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags of :func:`run_arguments` that argparse cannot check
    alone, as one line (None when nothing): every entry point that reads them asks."""
    if args.skip_epochs is not None and not 0 <= args.skip_epochs < args.epochs:
        return f"--skip-epochs: expected 0 <= N < --epochs ({args.epochs}), found {args.skip_epochs}"
    return None


def _checkout_mismatch(checkout: Path) -> str | None:
    """Why ``checkout`` cannot be run with this install's ``data``/``partition``
    packages (None when it can: the same files at both commits)."""
    here = Path(__file__).resolve().parents[1]
    try:
        other = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True,
                               text=True, check=True).stdout.strip()
        diff = subprocess.run(["git", "-C", str(here), "diff", "--quiet", other, "--", "data", "partition"],
                              capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"expected a git checkout, found {exc}"
    if diff.returncode != 0:
        return (f"expected data/ and partition/ as installed ({here}), found them changed at {other[:12]}: "
                "install that commit in its own environment instead")
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    run_arguments(ap, "bench/results/compute_split.json", DEFAULT_CASES)
    ap.add_argument("--rounds", type=int, default=1, metavar="N",
                    help="run every case N times in turn, ratios within each round (default 1)")
    ap.add_argument("--resume", action="store_true",
                    help="continue the run whose JSON is at --out (same flags): the rounds it has are kept")
    ap.add_argument("--decompose", action="store_true",
                    help="also run, in each round, two single runs at once, the pipeline on one worker and two "
                         "of those at once, and split the compute ratio into the chunks' own work, the two "
                         "processes' sharing of it and what the stages add")
    args = ap.parse_args(argv)
    error = run_arguments_error(args) or (f"--rounds: expected N >= 1, found {args.rounds}"
                                          if args.rounds < 1 else None)
    if error:
        print(f"compute_split: {error}", file=sys.stderr)
        return 2
    if args.checkout:
        why = _checkout_mismatch(Path(args.checkout))
        if why:
            print(f"compute_split: --checkout {args.checkout}: {why}", file=sys.stderr)
            return 2
    # What a resumed run must share with the one it continues (not how many rounds).
    config = {k: v for k, v in vars(args).items() if k not in ("out", "resume", "rounds")}
    cases: list[dict[str, Any]] = [{"dataset": c.partition(":")[0], "model": c.partition(":")[2], "rounds": []}
                                   for c in args.cases]
    load_before = load_average()
    if args.resume and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        old_config = {k: v for k, v in old.get("config", {}).items() if k not in ("resume", "rounds")}
        # A flag added since the record was written ran at its default then.
        old_config.update({k: ap.get_default(k) for k in config if k not in old_config})
        if old_config != config:
            print(f"compute_split: --resume: expected {args.out} to hold this config, found {old_config}",
                  file=sys.stderr)
            return 2
        cases, load_before = old["cases"], old["load_average_before"]
    all_modes = MODES + (DECOMPOSE_MODES if args.decompose else ())
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            modes = all_modes if r % 2 == 0 else all_modes[::-1]
            for case in cases:
                if any(done["round"] == r for done in case["rounds"]):
                    continue
                runs = {mode: run_once(case["dataset"], case["model"], mode, args, Path(tmp)) for mode in modes}
                failed = [m for m, run in runs.items() if "error" in run]
                if failed:  # a ratio of a failed run means nothing: write no more
                    print(f"compute_split: runs failed, nothing more written: {case['dataset']}:{case['model']} "
                          f"{', '.join(failed)} (round {r + 1}); the first error:\n" + runs[failed[0]]["error"],
                          file=sys.stderr)
                    return 1
                case["rounds"].append({"round": r, "order": list(modes), "runs": runs,
                                       "computed": compare(runs, args.stages, args.chunks)})
                case["computed"] = summarize_rounds(case["rounds"])
                print(json.dumps({"case": f"{case['dataset']}:{case['model']}", "round": r + 1,
                                  **case["rounds"][-1]["computed"]}), flush=True)
                write_measurement(
                    args,
                    "per epoch (means after the record's warm-up epochs): single mode with one thread, pipeline "
                    "(S workers, one thread each) and graph mode (S workers), one after the other in each round "
                    "(--decompose: also two single runs at once, single_pair, the pipeline's C chunks on one "
                    "worker, pipeline_one_worker, and two of those at once, pipeline_one_worker_pair); "
                    "the pipeline's compute is its slowest rank's time split (measured); ratios within a round, "
                    "and their medians over the rounds (computed)", load_before, cases=cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
