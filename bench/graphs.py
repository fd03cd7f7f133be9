"""The synthetic graph of the systems benchmarks, pinned.

The ``modes`` suite (``bench/suites/modes.toml``, formerly ``bench/modes.py``),
``bench/kernels.py``, ``bench/compare_pyg.py`` (its 200k cases) and
``bench/synthetic.py`` measure time, bytes and memory, not what depth can learn. Their
committed results (``bench/results/``) were measured on the generator's options of
gnnpipe 0.1 (homophily 0.6, feature signal 0.22, mean degree 10: a 200k-vertex graph
has 1,987,910 edges). These options are pinned here so that those results stay
reproducible although the default job's graph (:data:`gnnpipe.data.SYNTHETIC_DEFAULTS`)
has since moved to a sparser, more homophilous graph on which depth pays.
Every option not named here (``num_nodes``, ``seed``, ...) is the caller's.
"""

from __future__ import annotations

from typing import Any

#: Generator options of the systems benchmarks' synthetic graphs.
SYSTEMS_SYNTHETIC: dict[str, Any] = {"avg_degree": 10.0, "homophily": 0.6, "feature_signal": 0.22}
