"""Readers for the public on-disk graph formats, one module per format family.

Each module defines its reader ``load_<format>(path, opts) -> Graph``, the list of files
it reads, and a :class:`Format` entry ``FORMAT`` saying which options it accepts;
:data:`FORMATS` maps the format names of ``load_dataset(<format>, root=<path>)`` to them.
What the readers share (error wrapping, dtype checks, the finisher that compacts class
ids, symmetrises, splits and validates) is in :mod:`gnnpipe.data.formats._common`; the
options type is :class:`gnnpipe.data.options.LoadOptions`.
"""

from __future__ import annotations

from gnnpipe.data.formats import geom_gcn, graphdata, heterophilous, linqs, musae, ogb, planetoid, sparsegraph
from gnnpipe.data.formats._common import Format

__all__ = ["FORMATS", "Format"]

#: Format name -> its reader, file list and accepted options.
FORMATS: dict[str, Format] = {
    m.FORMAT.name: m.FORMAT
    for m in (planetoid, sparsegraph, graphdata, heterophilous, geom_gcn, musae, linqs, ogb)
}
