"""``python -m bench``: list, run, estimate and report the benchmark suites.

    python -m bench list
    python -m bench run SUITE [--out DIR] [--dry-run] [--only PATTERN] [--data-root DIR]
    python -m bench estimate SUITE [--out DIR] [--only PATTERN]
    python -m bench report SUITE [--out DIR]

SUITE is a name under ``bench/suites/`` or a path to a suite's ``.toml`` file. A bad
suite file is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from .runner import DEFAULT_OUT, default_data_root, run_suite
from .suite import SuiteError, list_suites, load_suite, suite_path

BENCH = Path(__file__).resolve().parent
#: The suite's own modules; every other script in bench/ with a ``__main__`` block is
#: a standalone benchmark: not a trainer run (it times kernels, loaders, the
#: partitioner or the generator, probes a graph, or trains PyG twins in-process beside
#: gnnpipe's models), with its own flags and JSON in bench/results/.
SUITE_MODULES = {"__init__", "__main__", "suite", "runner", "report", "estimate", "headline"}


def standalone_scripts() -> list[Path]:
    """The standalone scripts of bench/, found by their ``if __name__ == "__main__"``."""
    return [p for p in sorted(BENCH.glob("*.py"))
            if p.stem not in SUITE_MODULES and '__name__ == "__main__"' in p.read_text()]


def _first_line(script: Path) -> str:
    """The first line of a script's docstring, read without importing it."""
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def cmd_list(_: argparse.Namespace) -> int:
    paths = list_suites()
    print("suites (python -m bench run NAME; results in bench/results/NAME/):")
    rows = []
    for path in paths:
        suite = load_suite(path)
        estimate = "?" if suite.estimate_minutes is None else _minutes(suite.estimate_minutes)
        rows.append((suite.name, f"{len(suite.runs)} runs", estimate, suite.description))
    _table(rows)
    print("\nstandalone (own flags and JSON in bench/results/; python bench/NAME.py --help):")
    _table([(p.stem, f"bench/{p.name}", _first_line(p)) for p in standalone_scripts()])
    return 0


def _minutes(m: float) -> str:
    return f"~{m:.0f} min" if m < 90 else f"~{m / 60:.1f} h"


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])


def cmd_run(args: argparse.Namespace) -> int:
    suite = load_suite(suite_path(args.suite))
    return run_suite(suite, Path(args.out), only=args.only, dry_run=args.dry_run, data_root=args.data_root)


def cmd_estimate(args: argparse.Namespace) -> int:
    from .estimate import estimate_suite

    suite = load_suite(suite_path(args.suite))
    return estimate_suite(suite, Path(args.out), only=args.only, data_root=args.data_root)


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report
    from .report_common import MissingMatplotlib

    try:
        path = write_report(Path(args.out) / Path(suite_path(args.suite)).stem)
    except (MissingMatplotlib, FileNotFoundError) as exc:
        print(f"bench report: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="name the suites and the standalone scripts").set_defaults(fn=cmd_list)
    for name, fn, text in (("run", cmd_run, "run a suite (resumes: runs with a record are skipped)"),
                           ("estimate", cmd_estimate, "time a suite from one short probe per setting"),
                           ("report", cmd_report, "write DIR/SUITE/report.md and its PNG plots")):
        p = sub.add_parser(name, help=text)
        p.add_argument("suite", metavar="SUITE", help="suite name (python -m bench list) or .toml path")
        p.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                       help="results folder; the suite's files go to DIR/SUITE/ (default: bench/results)")
        if name != "report":
            p.add_argument("--only", metavar="PATTERN", default=None,
                           help="runs whose key=value words match every term (globs, e.g. "
                                "'mode=pipeline seed=0'), a grid name (grid=NAME) or a hash prefix")
            p.add_argument("--data-root", default=default_data_root(), metavar="DIR",
                           help="folder of the real datasets (default: $GNNPIPE_DATASETS or ../shared/datasets)")
        if name == "run":
            p.add_argument("--dry-run", action="store_true", help="print each run's command, run nothing")
        p.set_defaults(fn=fn)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except SuiteError as exc:
        print(exc, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: python -m bench {args.command} {getattr(args, 'suite', '')} resumes "
              "(runs with a record are skipped)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
