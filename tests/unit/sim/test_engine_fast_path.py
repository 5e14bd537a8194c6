"""The fleet's fast path (per-request histograms a scrape never reads are left alone) changes nothing else."""

from __future__ import annotations

import random

from fleetslo.core import conventions as cv
from fleetslo.sim.engine import Engine
from fleetslo.sim.fleet import Fleet, FleetConfig
from fleetslo.sim.harness import replay_open
from fleetslo.sim.traces import lognormal_tokens, poisson
from fleetslo.sim.vllm_metrics import EngineMetrics

from tests.unit.sim.sim_support import tiny_profile


def test_skipping_unread_histograms_keeps_every_timestamp_and_the_read_ones() -> None:
    profile = tiny_profile(kv_capacity_tokens=40_000)  # small enough to preempt
    trace = poisson(40.0, 120.0, lognormal_tokens(400, 80, 0.8), seed=7)
    full = Engine(profile, EngineMetrics("m"), rng=random.Random(1))
    fast = Engine(profile, EngineMetrics("m"), rng=random.Random(1), request_histograms=False)
    a, b = replay_open(full, trace.requests), replay_open(fast, trace.requests)
    assert [(r.first_token, r.finish, r.preemptions) for r in a] == [
        (r.first_token, r.finish, r.preemptions) for r in b
    ]
    assert full.metrics.preemptions > 0
    for name in (cv.Histogram.TTFT, cv.Histogram.ITL, cv.Histogram.TPOT):
        assert full.metrics.histograms()[name].counts == fast.metrics.histograms()[name].counts
        assert full.metrics.histograms()[name].sum == fast.metrics.histograms()[name].sum
    assert sum(fast.metrics.e2e.counts) == 0 and sum(full.metrics.e2e.counts) == len(trace)


def test_a_fleet_records_what_its_scrapes_keep() -> None:
    profile = tiny_profile()
    kept = Fleet(profile, FleetConfig("m", 60.0), 8, random.Random(0))
    everything = Fleet(profile, FleetConfig("m", 60.0, scrape_histograms=None), 8, random.Random(0))
    kept.add_ready(1, 0.0)
    everything.add_ready(1, 0.0)
    assert kept.ready[0].engine is not None and not kept.ready[0].engine.request_histograms
    assert everything.ready[0].engine is not None and everything.ready[0].engine.request_histograms
