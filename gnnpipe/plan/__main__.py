"""``python -m gnnpipe.plan``: see :mod:`gnnpipe.plan.cli`."""

from gnnpipe.plan.cli import entry

if __name__ == "__main__":
    entry()
