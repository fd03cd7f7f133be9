"""Refuse a local launch that a script started outside ``if __name__ == "__main__":``.

The local launcher's workers are spawned, and each re-imports the main module: a
script that starts the run from its unguarded top level would start the training
again in every worker (and the launcher would wait forever). :func:`check_main_module_guard`,
called before any process starts, refuses such a launch at once (ConfigError): in the
launcher by reading the main module's source for a guard around the calling line, and
in a spawned worker by noticing that it is still importing the main module. Where the
main module is not re-imported (REPL, ``-c``, notebooks, ``-m package``) or its source
cannot be read, the launcher-side check lets the launch go on.

It is a question about the caller's source (frames and syntax trees), not about
processes, so it lives apart from the launcher.
"""

from __future__ import annotations

import ast
import logging
import sys
from typing import Any

from gnnpipe.errors import ConfigError

__all__ = ["check_main_module_guard"]

logger = logging.getLogger(__name__)

_GUARD_HINT = ('start the run under `if __name__ == "__main__":` '
               '(the workers are spawned and re-import the main module)')


def check_main_module_guard() -> None:
    """Refuse (ConfigError) a launch that the main module's top-level code started
    without the ``__main__`` guard: every spawned worker re-imports that module, and
    each would start the training again (and the launcher would wait forever)."""
    import multiprocessing as mp

    # In a spawned worker still importing the main module (the script's top level
    # called us again): refuse before starting anything.
    if getattr(mp.current_process(), "_inheriting", False) or _main_module_frame("__mp_main__") is not None:
        raise ConfigError(f"main module: {_GUARD_HINT}, found a spawned worker starting the run again "
                          "while it imported the main module")
    where = _unguarded_call_site()
    if where is not None:
        raise ConfigError(f"main module {where[0]!r}: {_GUARD_HINT}, found the run started at line {where[1]}, "
                          "outside that guard")


def _main_module_frame(name: str) -> Any:
    """The innermost frame of the calling stack that runs the top level of a module
    named ``name`` (``__main__``, or ``__mp_main__`` in a spawned worker), or None."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == name:
            return frame
        frame = frame.f_back
    return None


def _unguarded_call_site() -> tuple[str, int] | None:
    """``(path, line)`` when this call comes from top-level code of a main module that
    spawn re-imports (a script or ``-m module``) and that line is not under an
    ``if __name__ == "__main__":``; None when the call is guarded, or the main
    module is not re-imported (REPL, ``-c``, notebooks, ``-m package``), or its source
    cannot be read (the worker-side check above still applies)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec_name = getattr(getattr(main, "__spec__", None), "name", "") or ""
    if main is None or not path or spec_name == "__main__" or spec_name.endswith(".__main__"):
        return None
    frame = _main_module_frame("__main__")
    if frame is None or frame.f_globals is not vars(main):
        return None
    line = frame.f_lineno
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError) as exc:
        logger.debug("cannot read the main module %s to check its __main__ guard: %s", path, exc)
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            for block in _main_guarded_blocks(node):
                if block and block[0].lineno <= line <= (block[-1].end_lineno or block[-1].lineno):
                    return None
    return path, line


def _main_guarded_blocks(node: ast.If) -> list[list[ast.stmt]]:
    """The statements that run only in ``__main__``: the body of ``if __name__ ==
    "__main__":`` or the ``else`` of ``if __name__ != "__main__":``."""
    test = node.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and len(test.comparators) == 1):
        return []
    sides = {type(s).__name__ + ":" + str(getattr(s, "id", getattr(s, "value", None)))
             for s in (test.left, test.comparators[0])}
    if sides != {"Name:__name__", "Constant:__main__"}:
        return []
    if isinstance(test.ops[0], ast.Eq):
        return [node.body]
    if isinstance(test.ops[0], ast.NotEq):
        return [node.orelse]
    return []
