"""The ``python -m gnnpipe.train`` command line, generated from the config dataclasses.

Every field of :class:`DataConfig`, :class:`ModelConfig`, :class:`TrainConfig` and
:class:`ParallelConfig` becomes one flag (``--<field-name>`` with dashes, or the
``flag`` named in the field metadata), with the field's help text and default. Flags
override ``--config FILE.toml``, which overrides the defaults. Booleans take
``--x/--no-x``; optional values accept ``none``; tuples are comma-separated; loader
options are ``--data-option KEY=VALUE`` (repeatable).

Exit codes: 0 done; 2 bad input (one line on stderr, nothing written); 1 a worker
failed; 3 training diverged (a loss or gradient turned NaN or infinite: one line
naming the epoch and where; the record is written, its ``summary.diverged`` says so);
130 interrupted (SIGINT); 143 terminated (SIGTERM: every worker is stopped first). Under ``torchrun`` (:func:`gnnpipe.engine.environment.torchrun_env`)
the process acts as one worker of the run; only rank 0 prints the summary and writes
``--json-out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import typing
from typing import Any, NoReturn, Sequence

from gnnpipe.config import SECTIONS, RunConfig, read_toml
from gnnpipe.errors import ConfigError, GnnpipeInputError, RunTerminated, WorkerFailedError

__all__ = ["build_parser", "parse_config", "main"]

PROG = "python -m gnnpipe.train"
_DEST_SEP = "__"  # argparse dest = section__field


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors become ConfigError (one line, exit 2)."""

    def error(self, message: str) -> typing.NoReturn:  # type: ignore[override]
        raise ConfigError(f"command line: {message}")


def _flag(f: dataclasses.Field) -> str:
    return "--" + f.metadata.get("flag", f.name.rstrip("_").replace("_", "-"))


def _base_types(tp: Any) -> tuple[Any, bool]:
    """(the non-None type, whether None is allowed)."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else tp), type(None) in args
    return tp, False


def _parse_scalar(text: str, tp: Any, flag: str) -> Any:
    try:
        if tp is int:
            return int(text)
        if tp is float:
            return float(text)
    except ValueError:
        # argparse reports an ArgumentTypeError as "argument --flag: <message>".
        raise argparse.ArgumentTypeError(
            f"expected {'an integer' if tp is int else 'a number'}, found {text!r}") from None
    return text


def _converter(tp: Any, flag: str) -> Any:
    base, nullable = _base_types(tp)

    def conv(text: str) -> Any:
        if nullable and text.lower() in ("none", "null"):
            return None
        if typing.get_origin(base) is tuple:
            item = typing.get_args(base)[0]
            parts = [p for p in text.replace(" ", "").split(",") if p]
            return tuple(_parse_scalar(p, item, flag) for p in parts)
        return _parse_scalar(text, base, flag)

    return conv


def build_parser() -> argparse.ArgumentParser:
    """The parser: ``--config``, then one group of flags per config section."""
    hints = {name: typing.get_type_hints(cls) for name, cls in SECTIONS.items()}
    parser = _Parser(
        prog=PROG,
        description="Train a deep GNN on one graph: single process, graph parallelism, "
                    "GNNPipe layer pipelining or their hybrid. With no arguments it trains the "
                    "default model on the synthetic graph.",
        epilog="Flags override --config; every error is one line on stderr with exit code 2.",
        allow_abbrev=False,
    )
    parser.add_argument("--config", metavar="FILE.toml", default=argparse.SUPPRESS,
                        help="TOML file with [data] [model] [train] [parallel] sections")
    for section, cls in SECTIONS.items():
        group = parser.add_argument_group(f"[{section}]", _first_paragraph(cls.__doc__))
        defaults = cls()
        for f in dataclasses.fields(cls):
            tp = hints[section][f.name]
            base, nullable = _base_types(tp)
            flag = _flag(f)
            dest = f"{section}{_DEST_SEP}{f.name}"
            help_text = f.metadata.get("help", "")
            choices = f.metadata.get("choices")
            if "default" not in help_text:
                # Shown, not applied: only the flags given become overrides. Fields whose
                # default depends on others describe it in their own help text.
                help_text += f" (default: {_show(getattr(defaults, f.name))})"
            kw: dict[str, Any] = {"dest": dest, "default": argparse.SUPPRESS,
                                  "help": help_text.replace("%", "%%")}
            if base is bool:
                group.add_argument(flag, action=argparse.BooleanOptionalAction, **kw)
            elif typing.get_origin(base) is dict:
                group.add_argument(flag, action="append", metavar=f.metadata.get("metavar", "KEY=VALUE"), **kw)
            else:
                metavar = f.metadata.get("metavar") or ("{" + ",".join(map(str, choices)) + "}" if choices
                                                        else f.name.rstrip("_").upper())
                group.add_argument(flag, type=_converter(tp, flag), metavar=metavar, **kw)
    return parser


def _first_paragraph(doc: str | None) -> str:
    para = (doc or "").strip().split("\n\n")[0]
    return " ".join(para.replace("``", "").split())


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "none"
    return str(value)


def parse_config(argv: Sequence[str] | None) -> tuple[RunConfig, set[str]]:
    """``argv`` -> (RunConfig, the set of ``section.field`` set by a flag or the file)."""
    parser = build_parser()
    ns = vars(parser.parse_args(list(argv) if argv is not None else None))
    config_path = ns.pop("config", None)
    overrides: dict[str, dict[str, Any]] = {}
    for dest, value in ns.items():
        section, name = dest.split(_DEST_SEP, 1)
        if section == "data" and name == "options":
            from gnnpipe.data.options import parse_option_words  # here: importing the CLI stays light

            value = parse_option_words(value)
        overrides.setdefault(section, {})[name] = value
    given = {f"{s}.{k}" for s, body in overrides.items() for k in body}
    if config_path is not None:
        raw = read_toml(config_path)
        cfg = RunConfig.from_dict(raw, overrides, source=f"config file {config_path!r}")
        given |= {f"{s}.{k}" for s, body in raw.items() if isinstance(body, dict) for k in body}
        return cfg, given
    return RunConfig.from_dict({}, overrides, source="command line"), given


def _torchrun_config(cfg: RunConfig, given: set[str], world_size: int) -> RunConfig:
    """Under torchrun the worker count is WORLD_SIZE: fill it in (and re-derive the
    chunks and ways that depend on it) when neither a flag nor the file set it. What
    cannot run under torchrun (single mode, workers != WORLD_SIZE) is refused where
    the layout is resolved (:func:`gnnpipe.engine.layout.resolve_layout`)."""
    p = cfg.parallel
    if p.mode == "single" or "parallel.workers" in given:
        return cfg
    d = cfg.to_dict()
    d["parallel"]["workers"] = world_size
    if "parallel.chunks" not in given:
        d["parallel"]["chunks"] = None
    if "parallel.ways" not in given and p.mode == "hybrid":
        d["parallel"]["ways"] = None
    return RunConfig.from_dict(d, source="command line")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see the module docstring)."""
    from gnnpipe.engine.environment import torchrun_env
    from gnnpipe.logs import setup_logging

    rank = 0
    try:
        env = torchrun_env()
        if env is not None:
            rank = env.rank
        cfg, given = parse_config(argv)
        setup_logging(cfg.train.log_level, rank=rank)
        log = logging.getLogger("gnnpipe.cli")
        from gnnpipe import api

        if env is not None:
            # One worker of a torchrun launch: the entry joins it as one worker.
            cfg = _torchrun_config(cfg, given, env.world_size)
        log.debug("config: %s", cfg.to_dict())
        record = api.train_from_config(cfg)  # None on ranks other than 0
        if rank == 0 and record is not None:
            from gnnpipe.trainer.record import summary_line

            print(summary_line(record), flush=True)
            if cfg.train.json_out:
                log.info("record written to %s", cfg.train.json_out)
            diverged = record["summary"]["diverged"]
            if diverged is not None:
                print(f"error: training diverged at epoch {diverged['epoch']} ({diverged['where']}): "
                      f"{diverged['what']}", file=sys.stderr, flush=True)
                return 3
        return 0
    except GnnpipeInputError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr, flush=True)
        return 2
    except WorkerFailedError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        return 130
    except RunTerminated as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)  # error: terminated (SIGTERM)
        return exc.exit_code  # 143


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    """The process entry (``python -m gnnpipe.train``, ``python -m gnnpipe``, the
    ``gnnpipe-train`` script): :func:`main`, then exit with its code.

    One worker of a torchrun launch ends with ``os._exit`` once its output is flushed,
    skipping interpreter teardown: gloo's worker threads can still be dropping the last
    collective's work (whose tensors hold Python objects) when the interpreter
    finalizes, and that aborts the process (SIGABRT, "terminate called without an
    active exception") after a run that succeeded; torchrun then reports it failed.
    The process group has been destroyed and every file closed by then.
    """
    from gnnpipe.engine.environment import exit_now, torchrun_env

    code = main(argv)
    if torchrun_env() is not None:
        exit_now(code)
    sys.exit(code)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
