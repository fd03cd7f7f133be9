"""The planner (issue 14): candidate layouts of a run with predicted bytes, peak
memory and epoch time, and the choice of the fastest that fits.

Layer: after :mod:`gnnpipe.engine` (whose byte predictions and schedule it reuses),
before :mod:`gnnpipe.trainer`; the entry (:mod:`gnnpipe.api`) resolves ``--mode auto``
and ``--chunks auto`` through :func:`gnnpipe.plan.auto.resolve_auto`.

* :mod:`~gnnpipe.plan.inputs`    ``GraphStats`` (exact or from statistics), ``HardwareProfile``;
* :mod:`~gnnpipe.plan.calibrate` the short measurement that writes a profile (its twin
  processes: :mod:`~gnnpipe.plan.twins`; its timer: :mod:`~gnnpipe.plan.timing`);
* :mod:`~gnnpipe.plan.costs`     predicted time and memory of one layout;
* :mod:`~gnnpipe.plan.planner`   ``Candidate``, ``Plan``, ``make_plan``, the balanced split;
* :mod:`~gnnpipe.plan.cli`       ``python -m gnnpipe.plan``.
"""

from gnnpipe.plan.calibrate import calibrate
from gnnpipe.plan.costs import ModelShape
from gnnpipe.plan.inputs import GraphStats, HardwareProfile, graph_stats, read_profile, stats_only, write_profile
from gnnpipe.plan.planner import Candidate, Plan, balanced_split, equal_split, make_plan

__all__ = ["calibrate", "ModelShape", "GraphStats", "HardwareProfile", "graph_stats", "read_profile",
           "stats_only", "write_profile", "Candidate", "Plan", "balanced_split", "equal_split", "make_plan"]
