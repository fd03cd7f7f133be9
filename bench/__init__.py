"""gnnpipe's benchmark suite: ``python -m bench list | run | estimate | report``.

A suite is a TOML grid under ``bench/suites/`` (:mod:`bench.suite` expands it into
runs named by a hash of their settings); :mod:`bench.runner` runs each through
``python -m gnnpipe.train --json-out`` in a subprocess and resumes where a killed
suite stopped; :mod:`bench.estimate` times a suite from short probes;
:mod:`bench.report` turns the records into ``report.md`` and PNG plots. The other
scripts here (``python -m bench list`` names them) keep their own flags and JSON.
"""
