"""``python -m gnnpipe.data``: list the known datasets or load one and print its statistics.

    python -m gnnpipe.data list
    python -m gnnpipe.data info cora --root /work/shared/datasets [--option split=3 ...]
    python -m gnnpipe.data table     # the Markdown table of README.md's "Datasets" section

Bad input (unknown name, missing file, malformed data) prints one line to stderr and
exits with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from gnnpipe.errors import GnnpipeInputError


def _parse_option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, found {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value  # a plain string


def summary(graph: Any) -> dict[str, Any]:
    """The statistics the shared datasets' README reports, for one graph."""
    no_loops = graph.remove_self_loops()
    labels = graph.labels[graph.labels >= 0]
    import torch

    return {
        "name": graph.name,
        "nodes": graph.num_nodes,
        "stored_directed_edges": graph.num_edges,
        "undirected_edges": no_loops.num_edges // 2 if graph.is_symmetric() else None,
        "self_loops": graph.num_edges - no_loops.num_edges,
        "features": graph.num_features,
        "feature_layout": "csr" if graph.sparse_features else "dense",
        "feature_density": round(graph.feature_density, 6),
        "classes": graph.num_classes,
        "label_counts": torch.bincount(labels, minlength=graph.num_classes).tolist(),
        "unlabelled": int((graph.labels < 0).sum()),
        "split": [int(graph.train_mask.sum()), int(graph.val_mask.sum()), int(graph.test_mask.sum())],
    }


def main(argv: Sequence[str] | None = None) -> int:
    from gnnpipe.data import list_datasets, list_formats, load_dataset
    from gnnpipe.data.registry import dataset_table_markdown

    ap = argparse.ArgumentParser(prog="python -m gnnpipe.data", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="print the dataset and format names")
    sub.add_parser("table", help="print the README dataset table (Markdown), generated from the registry")
    info = sub.add_parser("info", help="load a dataset and print its statistics as JSON")
    info.add_argument("name")
    info.add_argument("--root", default=None, help="dataset root (default: $GNNPIPE_DATA_ROOT)")
    info.add_argument("--option", "-o", action="append", type=_parse_option, default=[], metavar="KEY=VALUE",
                      help="loader option (JSON value or string); repeatable")
    info.add_argument("--no-cache", action="store_true", help="bypass the converted-graph cache")
    args = ap.parse_args(argv)
    if args.command == "list":
        print("datasets:", " ".join(list_datasets()))
        print("formats: ", " ".join(list_formats()))
        return 0
    if args.command == "table":
        print(dataset_table_markdown(), end="")
        return 0
    try:
        graph = load_dataset(args.name, root=args.root, cache=not args.no_cache, **dict(args.option))
    except GnnpipeInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary(graph)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
