"""``python -m gnnpipe``: the same as ``python -m gnnpipe.train``."""

import sys

from gnnpipe.cli import main

if __name__ == "__main__":
    sys.exit(main())
