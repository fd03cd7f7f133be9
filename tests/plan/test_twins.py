"""The calibration's twin processes (real gloo processes): the link, an exchange made
between kernels, a stage layer's contention, and a twin that dies named at once."""

from __future__ import annotations

import time

import pytest


def test_the_twin_processes_measure_the_link_and_a_stage_layers_contention():
    """Two real gloo processes: a ping-pong (bandwidth, latency), exchanges between
    kernels (each direction's rate, no faster than one way; a fixed cost, no less than
    the ping-pong's latency), one stage layer's work over the chunks of a synthetic
    graph alone and on both at once (contention: their ratio, about 1 where the two
    workers do not slow each other), and a bare worker's resident size."""
    from gnnpipe.plan.twins import _stage_layer, link_figures

    layer = _stage_layer(num_nodes=600, chunks=3)
    layer()  # forward and backward over every chunk, in this process too
    bw, lat, contention, rss, exchange_bw, exchange_lat = link_figures(bytes_big=1 << 20)
    assert bw > 1e6 and 0 < lat < 0.1
    assert 1e6 < exchange_bw <= bw  # each direction of both sending at once
    assert lat <= exchange_lat < 0.1
    assert 0.5 < contention < 4.0
    assert rss > 50 * 2**20  # torch and gnnpipe imported


def test_a_twin_that_dies_is_named_at_once_not_waited_for():
    """A twin that fails (here: a message of negative size) ends the calibration with
    an error naming it and its exit code, without waiting out the twins' deadline
    (before: 120 s, then a bare ``queue.Empty``)."""
    from gnnpipe.plan.twins import TWIN_TIMEOUT_S, link_figures

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"link twin rank [01] exited with code [1-9]"):
        link_figures(bytes_big=-4)
    assert time.monotonic() - t0 < TWIN_TIMEOUT_S / 2
