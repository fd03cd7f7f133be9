"""The README's headline: the committed ``paper`` run as one table, its machine and budget.

    python -m bench.headline                  # print the block
    python -m bench.headline --write-readme   # put it between README.md's headline markers

The block is generated, never typed: it reads the records of ``bench/results/paper/``
through the report's own reading and row code (:func:`bench.report.read_results`,
:func:`bench.report.build_rows`), so every figure is one the records hold or the mean,
standard deviation, difference or ratio of such figures, formatted as ``report.md``
formats them. ``tests/bench/test_headline.py`` checks that README.md's block is this
module's output, so the README cannot drift from the committed records.

One row per dataset and model (GCNII and ResGCN+, the deep models the suite is about,
first; then GCN and GraphSAGE): test accuracy of single mode (the exact reference),
pipeline and hybrid, the pipeline's gap to single mode, the pipeline's epoch time as a
ratio to single mode, and the measured training bytes per epoch of pipeline and hybrid.
The paper suite has no graph-mode run; its hybrid (W=2 ways of S=1 stage) crosses
graph parallelism's cut, so the hybrid bytes stand for graph mode's, and the text says
so rather than naming a graph-mode figure it does not have. Layouts and techniques are
named per model where the models differ (a stale-sensitive GCN/GraphSAGE is pipelined
at C = S x W and R = 1, the other models at C = 4 S x W and R = 23).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterable

from .report import TRAINING_KINDS, _load_range, build_rows, read_results, technique_text
from .report_common import Row, _pm, _slug, _table
from .runner import DEFAULT_OUT, REPO

PAPER_DIR = DEFAULT_OUT / "paper"
README = REPO / "README.md"
WIDTH = 88  # README.md's prose width
BEGIN, END = "<!-- headline:begin -->", "<!-- headline:end -->"
#: Row order and display names: the deep models first, then the plain ones.
MODEL_NAMES = {"gcnii": "GCNII", "resgcn+": "ResGCN+", "gcn": "GCN", "sage": "SAGE"}
#: The figure embedded under the table: GCNII on Amazon Photo, where all three modes
#: learn within the budget and the pipeline's early lag and catching up are visible.
PLOT = ("amazon_photo", "gcnii")
#: The training settings the budget line names, as ``config.train`` of a record has them.
BUDGET_KEYS = ("epochs", "lr", "eval_every", "patience", "monitor")
#: The keys of a record's ``machine`` that describe the machine itself.
MACHINE_KEYS = ("hostname", "platform", "cpu_cores", "device", "gpu", "gpu_count", "cuda", "torch", "python",
                "gnnpipe")


def _one(values: Iterable[Any]) -> str:
    """The value every record has, or the distinct values joined with ``/``."""
    distinct = list(dict.fromkeys(values))
    return "/".join(str(v) for v in distinct)


def _model_name(row: Row) -> str:
    layers = row.point.get("layers")
    name = MODEL_NAMES.get(row.model, row.model)
    return f"{name}-{layers}" if layers is not None else name


def headline_groups(rows: list[Row]) -> list[dict[str, Row]]:
    """The rows grouped by dataset and model ({mode: row} each), in headline order:
    models as :data:`MODEL_NAMES` orders them (others after, in suite order), datasets
    in suite order within a model. The headline needs one row per dataset, model and
    mode; a suite that varies more than that is refused with a ValueError."""
    groups: dict[tuple[str, str], dict[str, Row]] = {}
    for r in rows:
        group = groups.setdefault((r.dataset, r.model), {})
        if r.mode in group:
            raise ValueError(f"two {r.mode} rows for {r.dataset} {r.model}: the headline takes suites "
                             "with one setting per dataset, model and mode")
        group[r.mode] = r
    order = list(MODEL_NAMES) + [m for _, m in groups if m not in MODEL_NAMES]
    return [groups[k] for k in sorted(groups, key=lambda k: order.index(k[1]))]


def headline_table(rows: list[Row]) -> list[str]:
    """The headline table's Markdown lines (see the module docstring for the columns)."""
    lines = []
    for group in headline_groups(rows):
        single, pipe, hybrid = (group.get(m) for m in ("single", "pipeline", "hybrid"))
        first = next(iter(group.values()))
        acc = [_pm(*r.stat("test_acc"), scale=100, decimals=2) if r else "-" for r in (single, pipe, hybrid)]
        s_acc, p_acc = (r.stat("test_acc")[0] if r else None for r in (single, pipe))
        gap = "-" if s_acc is None or p_acc is None else f"{100 * (p_acc - s_acc):+.2f}"
        s_time, p_time = (r.stat("epoch_time_s")[0] if r else None for r in (single, pipe))
        ratio = "-" if not s_time or p_time is None else f"{p_time / s_time:.2f}"
        mb = [_pm(*r.stat("gb_per_epoch"), scale=1000) if r else "-" for r in (pipe, hybrid)]
        lines.append([first.dataset, _model_name(first), *acc, gap, ratio, *mb])
    return _table(["dataset", "model", "single (exact) test %", "pipeline test %", "hybrid test %",
                   "pipeline - exact (points)", "epoch time pipeline / single", "pipeline MB / epoch",
                   "hybrid MB / epoch"], lines)


def _by_model(rows: list[Row], mode: str, key: Any) -> list[tuple[Any, list[str]]]:
    """``key(row)`` for the ``mode`` rows, each distinct value with the models that have
    it, in headline order: the suite may give different models different layouts or
    techniques (a stale-sensitive GCN/GraphSAGE runs at C = S x W and R = 1)."""
    groups: dict[Any, list[str]] = {}
    for group in headline_groups(rows):
        row = group.get(mode)
        if row is not None:
            names = groups.setdefault(key(row), [])
            if _model_name(row) not in names:
                names.append(_model_name(row))
    return list(groups.items())


def _joined(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _for_models(parts: list[tuple[str, list[str]]]) -> str:
    """``text`` alone when every model has it, else ``A and B: text`` per value."""
    if len(parts) == 1:
        return parts[0][0]
    return "; ".join(f"{_joined(names)}: {text}" for text, names in parts)


def _hybrid_text(row: Row) -> str:
    """What a hybrid row's layout is in graph parallelism's terms."""
    point, chunks = row.point, row.runs[0].get("chunks")
    if point.get("workers") != point.get("ways"):
        return row.runs[0]["layout"]
    if chunks in (None, point.get("ways")):
        return (f"{row.runs[0]['layout']}, graph parallelism's layout (every halo read fresh; the suite has no "
                "graph-mode run, so these hybrid bytes stand for graph mode's)")
    return (f"{row.runs[0]['layout']}, one stage per way: its halo rows cross graph parallelism's cut, so the "
            "hybrid bytes stand for graph mode's, while within a way the chunks after the current one are read "
            "from history")


def bytes_match_prediction(records: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """(runs whose measured training bytes equal the record's DESIGN.md 7 prediction at
    every epoch, runs that carry a prediction at all)."""
    predicted = matched = 0
    for record in records:
        epochs = [e for e in record["epochs"] if e.get("bytes_predicted") is not None]
        if not epochs:
            continue
        predicted += 1
        matched += all(e["bytes"].get(k, 0) == e["bytes_predicted"].get(k, 0) for e in epochs for k in TRAINING_KINDS)
    return matched, predicted


def machine_text(records: list[dict[str, Any]]) -> str:
    """The machine the records ran on, from their ``machine`` field (each distinct one
    once; the run's own ``dist_backend`` is not the machine's and is left out)."""
    machines = list({repr([r["machine"].get(k) for k in MACHINE_KEYS]): r["machine"] for r in records}.values())
    parts = []
    for m in machines:
        cores = m.get("cpu_cores", {})
        gpu = f", {m.get('gpu_count')}x {m['gpu']} (CUDA {m.get('cuda')})" if m.get("gpu") else ""
        parts.append(f"`{m.get('hostname')}` ({m.get('platform')}; {cores.get('usable')} usable of "
                     f"{cores.get('logical')} logical CPU cores, device {m.get('device')}{gpu}; the records name "
                     f"no CPU model), torch {m.get('torch')}, python {m.get('python')}, gnnpipe {m.get('gnnpipe')}")
    return "; ".join(parts)


def _paragraph(text: str) -> str:
    """A paragraph wrapped as the README wraps its prose."""
    return textwrap.fill(text, width=WIDTH, break_long_words=False, break_on_hyphens=False)


def method_text(rows: list[Row], records: list[dict[str, Any]]) -> str:
    """What the table's figures are and how they were computed."""
    seeds = sorted({s for r in rows for s in r.seeds})
    monitor = _one(rec["config"]["train"].get("monitor") for rec in records)
    matched, predicted = bytes_match_prediction(records)
    return (f"Test accuracy at the best validation epoch (monitor {monitor}), mean ± sample standard deviation "
            f"over seeds {', '.join(map(str, seeds))} (those with a record); a figure without ± comes from one "
            "seed or is the same for every seed. Pipeline layout: "
            f"{_for_models(_by_model(rows, 'pipeline', lambda r: r.runs[0]['layout'])) or '-'}. Hybrid layout: "
            f"{_for_models(_by_model(rows, 'hybrid', _hybrid_text)) or '-'}."
            " The gap is the pipeline mean minus the single-mode mean; the epoch time (after the warm-up "
            "epochs, evaluation excluded) is the ratio of the seed means; bytes are the payload of the training "
            "kinds per epoch summed over workers, as the communicator counted them"
            + (f", equal to the DESIGN.md 7 prediction at every epoch in {matched} of the {predicted} runs that "
               "carry one." if predicted else "."))


def budget_text(rows: list[Row], records: list[dict[str, Any]]) -> str:
    """The training budget from the records' config, and whether the runs used it up:
    the share of runs whose best epoch is the last one run (still improving when the
    budget ended) decides whether the table is said to compare a budget or converged runs."""
    train = {k: _one(rec["config"]["train"].get(k) for rec in records) for k in BUDGET_KEYS}
    model = {k: _one(rec["config"]["model"].get(k) for rec in records) for k in ("layers", "hidden", "dropout")}
    runs = [run for r in rows for run in r.runs]
    best_last = sum(run["best_epoch"] == run["epochs_run"] for run in runs)
    stopped = sum(bool(run["stopped_early"]) for run in runs)
    text = (f"Budget (the suite's settings, as the records' config has them): {train['epochs']} epochs, lr "
            f"{train['lr']}, evaluation every {train['eval_every']} epochs, patience {train['patience']} "
            f"evaluations on {train['monitor']}; {model['layers']} layers, hidden {model['hidden']}, dropout "
            f"{model['dropout']}. ")
    if 2 * best_last > len(runs):
        text += (f"This is a fixed short budget of {train['epochs']} epochs, not training to convergence: the best "
                 f"epoch is the last epoch run in {best_last} of the {len(runs)} runs and {stopped} stopped early, "
                 "so the table compares the modes at one small budget, not their final accuracy.")
    else:
        text += (f"Up to {train['epochs']} epochs with patience: the best epoch is the last epoch run in only "
                 f"{best_last} of the {len(runs)} runs (still improving when the budget ended) and {stopped} stopped "
                 "early on patience, so most runs had stopped improving before the budget ended.")
    return text + _techniques_text(rows)


def _techniques_text(rows: list[Row]) -> str:
    """The pipeline runs' techniques, from their config (a default may have changed
    since), per model where the models differ."""
    parts = _by_model(rows, "pipeline", lambda r: technique_text(r.runs[0]["techniques"]))
    if not parts:
        return ""
    return f" Pipeline techniques (the records' config): {_for_models(parts)}."


def headline(suite_dir: Path = PAPER_DIR, plot: tuple[str, str] | None = PLOT, root: Path = REPO) -> str:
    """The README block (without its markers) from ``suite_dir``'s manifest and
    records; ``plot`` (dataset, model) names the validation-accuracy figure of the
    report to embed, with its path relative to ``root`` (README.md's folder)."""
    manifest, by_name, failed, pending = read_results(suite_dir)
    records = list(by_name.values())
    rows = build_rows(manifest["runs"], by_name, manifest.get("grid_names", []))
    source = Path(os.path.relpath(suite_dir, root)).as_posix()
    missing = f", {len(failed)} failed, {len(pending)} without a record" if failed or pending else ""
    out = [_paragraph(f"Measured in the committed `{manifest['suite']}` suite run ({len(records)} runs{missing}; "
                      f"[full report]({source}/report.md)):"), "",
           *headline_table(rows), "",
           _paragraph(method_text(rows, records)), "",
           _paragraph(f"Machine (the records' `machine` field): {machine_text(records)}. 1-minute load average "
                      f"before/after the runs: {_load_range(manifest['runs'])} (a run's own processes count in it; "
                      "where it exceeds the usable cores, other work shared the machine and times are upper "
                      "bounds)."), "",
           _paragraph(budget_text(rows, records))]
    if plot is not None:
        file = suite_dir / f"val_{_slug(*plot)}.png"
        if not file.is_file():
            raise FileNotFoundError(f"{file} not found: write the report first (python -m bench report "
                                    f"{manifest['suite']})")
        caption = (f"{plot[0]}, {MODEL_NAMES.get(plot[1], plot[1])}: validation accuracy at every evaluated "
                   "epoch (measured), one line per seed, one colour per mode")
        out += ["", f"![{caption}]({Path(os.path.relpath(file, root)).as_posix()})", "", f"*{caption}*"]
    out += ["", "Generated from the records by `python -m bench.headline --write-readme`."]
    return "\n".join(out)


def readme_block(text: str) -> str | None:
    """The text between README's headline markers (None when they are missing)."""
    m = re.search(rf"{re.escape(BEGIN)}\n(.*?)\n{re.escape(END)}", text, re.S)
    return m.group(1) if m else None


def write_readme(block: str, readme: Path = README) -> None:
    """Replace the text between README's headline markers with ``block``."""
    text = readme.read_text(encoding="utf-8")
    if readme_block(text) is None:
        raise ValueError(f"{readme} lacks the {BEGIN} ... {END} markers")
    readme.write_text(re.sub(rf"{re.escape(BEGIN)}\n.*?\n{re.escape(END)}",
                             lambda _: f"{BEGIN}\n{block}\n{END}", text, count=1, flags=re.S), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.headline", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite-dir", default=str(PAPER_DIR), metavar="DIR",
                    help="the suite's results folder (default: bench/results/paper)")
    ap.add_argument("--write-readme", action="store_true", help="write the block into README.md's markers")
    args = ap.parse_args(argv)
    try:
        block = headline(Path(args.suite_dir))
        if args.write_readme:
            write_readme(block)
    except (FileNotFoundError, ValueError) as exc:
        print(f"bench.headline: {exc}", file=sys.stderr)
        return 2
    print(block if not args.write_readme else f"wrote the headline into {README}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
