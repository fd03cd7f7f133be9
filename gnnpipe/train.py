"""``python -m gnnpipe.train``: train a deep GNN from the command line.

The flags are generated from :mod:`gnnpipe.config`; :func:`gnnpipe.cli.main` parses
them and is also the ``gnnpipe-train`` console script. This module only runs it.

The library function ``gnnpipe.train(graph, ...)`` (:func:`gnnpipe.api.train`) shares
this module's name. Running the module with ``-m`` does not touch it, but importing
the module binds the package attribute ``gnnpipe.train`` to the module (Python's
import system does that for every submodule), so an import warns and says what to
call instead.
"""

from __future__ import annotations

import warnings

from gnnpipe.cli import entry, main

__all__ = ["entry", "main"]

if __name__ == "__main__":
    entry()
elif __name__ == __spec__.name:  # imported, not run (a spawned worker runs it as __mp_main__)
    warnings.warn("gnnpipe.train is the command-line module; importing it makes gnnpipe.train refer to "
                  "this module, not to the training function: call gnnpipe.api.train(...) (or gnnpipe.train "
                  "without importing this module), and gnnpipe.cli.main(argv) for the command line",
                  stacklevel=2)
