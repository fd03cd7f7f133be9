"""``python -m gnnpipe.partition``: partition a dataset and print its quality figures.

Example::

    python -m gnnpipe.partition --dataset cora --parts 8 --method metis --json

Bad input (unknown dataset, impossible part count, missing root) prints one line to
stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import NoReturn, Sequence

from gnnpipe.data import load_dataset
from gnnpipe.errors import GnnpipeInputError
from gnnpipe.partition.chunked import chunk_graph
from gnnpipe.partition.core import KNOWN_METHODS


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2) like every other
    input error of gnnpipe."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m gnnpipe.partition", description=__doc__.splitlines()[0])
    p.add_argument("--dataset", required=True, help="dataset name, as gnnpipe.data.load_dataset knows it")
    p.add_argument("--parts", type=int, required=True, help="number of parts (chunks)")
    p.add_argument("--method", default="metis", choices=KNOWN_METHODS, help="partitioner (default metis)")
    p.add_argument("--seed", type=int, default=0, help="partitioner seed (default 0)")
    p.add_argument("--weights", default="uniform", choices=("uniform", "degree"),
                   help="METIS vertex weights: uniform or in-degree+1 (default uniform)")
    p.add_argument("--root", default=None, help="dataset root folder (default $GNNPIPE_DATA_ROOT)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the partition cache")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        # load_dataset itself falls back to $GNNPIPE_DATA_ROOT (and needs no root for
        # the synthetic generator).
        graph = load_dataset(args.dataset, root=args.root)
        t0 = time.perf_counter()
        cg = chunk_graph(
            graph, args.parts, method=args.method, seed=args.seed,
            vertex_weights=args.weights, cache=not args.no_cache,
        )
        seconds = time.perf_counter() - t0
    except GnnpipeInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        out = cg.stats.as_dict()
        out["seconds"] = seconds
        out["vertex_weights"] = args.weights
        print(json.dumps(out))
    else:
        print(cg.stats.format_table())
        print(f"time (partition + reorder + plans + stats, cache {'off' if args.no_cache else 'on'}) {seconds:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
