"""``python -m gnnpipe``: the same as ``python -m gnnpipe.train``."""

from gnnpipe.cli import entry

if __name__ == "__main__":
    entry()
