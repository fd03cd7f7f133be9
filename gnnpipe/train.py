"""``python -m gnnpipe.train``: train a deep GNN from the command line.

See :mod:`gnnpipe.cli` for the flags (generated from :mod:`gnnpipe.config`) and the
exit codes. ``main(argv) -> int`` is also the ``gnnpipe-train`` console script.

This module shares its name with the library function ``gnnpipe.train``: importing
it would replace that attribute of the package with the module. So the module is
made callable and forwards calls to :func:`gnnpipe.api.train`, and
``gnnpipe.train(graph, ...)`` works whether or not this module was imported.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), train, return the exit code."""
    from gnnpipe.cli import main as cli_main

    return cli_main(argv)


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from gnnpipe.api import train

        return train(*args, **kwargs)


if __name__ != "__main__":
    sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
