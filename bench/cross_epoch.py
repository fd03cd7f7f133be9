"""The cross-epoch overlap's epoch time against the synchronous schedule (issue 14:
"an option that hides the fill/drain bubble across epochs ... measured: its epoch time
and its convergence against the synchronous schedule").

For each graph and model this runs the pipeline (S workers, C chunks, one thread each)
through the public entry, ``python -m gnnpipe.train``, once per ``--cross-epoch-chunks``
value K (0: the synchronous schedule), the K values in turn, ``--repeats`` rounds, in
one invocation, so that the ratios compare runs made minutes apart on the same machine.
Evaluation only at the last epoch, so every epoch but the last begins the next one.
Figures per epoch are the means over the epochs after the record's warm-up ones; the
time split is the slowest rank's. Convergence is the ``cross-epoch`` suite's job.
Writes a JSON with machine, load and config::

    python -m bench.cross_epoch --out bench/results/cross_epoch.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from .compute_split import run_arguments, run_arguments_error, run_once
from .runner import load_average, write_measurement

DEFAULT_CASES = ("blogcatalog:gcnii", "amazon_photo:gcnii", "blogcatalog:gcn", "amazon_photo:gcn")


def summarize(runs: list[dict[str, Any]], ks: list[int], stages: int, chunks: int) -> dict[str, Any]:
    """Per K: the mean over rounds of epoch, bubble and compute (measured), and the
    epoch and bubble against K = 0's (computed)."""
    by_k: dict[int, list[dict[str, Any]]] = {k: [r for r in runs if r["k"] == k] for k in ks}
    mean = lambda rs, key: statistics.fmean(r[key] for r in rs)  # noqa: E731
    out: dict[str, Any] = {"schedule_bubble_share_synchronous": (stages - 1) / (chunks + stages - 1)}
    base = by_k[ks[0]]
    for k, rs in by_k.items():
        out[f"K={k}"] = {"epoch_s": mean(rs, "epoch_s"), "bubble_s": mean(rs, "bubble_s"),
                         "compute_s": mean(rs, "compute_s"), "comm_wait_s": mean(rs, "comm_wait_s"),
                         "bubble_share": mean(rs, "bubble_s") / mean(rs, "epoch_s"),
                         "epoch_over_synchronous": mean(rs, "epoch_s") / mean(base, "epoch_s"),
                         "rounds_epoch_s": [r["epoch_s"] for r in rs]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    run_arguments(ap, "bench/results/cross_epoch.json", DEFAULT_CASES)
    ap.add_argument("--ks", type=int, nargs="+", default=[0, 1, 2], help="--cross-epoch-chunks values (0 first)")
    ap.add_argument("--repeats", type=int, default=2, help="rounds over the K values")
    args = ap.parse_args(argv)
    error = run_arguments_error(args)
    if error:
        ap.error(error)
    if args.ks[0] != 0:
        ap.error(f"--ks: expected 0 first (the synchronous reference), found {args.ks}")
    cases, load_before = [], load_average()
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            dataset, _, model = case.partition(":")
            runs = []
            for rnd in range(args.repeats):
                for k in args.ks:
                    r = run_once(dataset, model, "pipeline", args, Path(tmp), ("--cross-epoch-chunks", str(k)))
                    runs.append({"k": k, "round": rnd, **r})
                    if "error" in r:
                        print(f"cross_epoch: {case} K={k} failed, nothing written:\n{r['error']}", file=sys.stderr)
                        return 1
            cases.append({"dataset": dataset, "model": model, "runs": runs,
                          "computed": summarize(runs, args.ks, args.stages, args.chunks)})
            print(json.dumps({"case": case, **{k: v for k, v in cases[-1]["computed"].items()}}), flush=True)
    write_measurement(
        args,
        "pipeline per epoch (means after the record's warm-up epochs; the slowest rank's time split), "
        "for each --cross-epoch-chunks K, rounds in turn (measured); means over rounds and ratios to K=0 "
        "computed", load_before, cases=cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
