"""What arrives, read by conservation: completions over the window plus the growth of the requests
held. Reproduces drawn 94 (two x2.6 spikes of short requests, 5-minute cold start): when the new
replicas drained a 4,000-request backlog in 15 s, the window's completions held the drain for a
minute after the growth since the last decision no longer did, and 160 requests/s read as 0, then
225; sized on that, the fleet bought 33 replicas where 7 served."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fleetslo.core.model import Observation
from fleetslo.policy.fleetslo import signals
from fleetslo.policy.fleetslo.config import FleetSLOConfig

from tests.unit.policy.fleetslo.test_decide import obs

DRAIN = FleetSLOConfig().drain_share
ARRIVING = 160.0
#: Requests held in the fleet at each decision (15 s apart): 4 replicas fall 10/s behind, then
#: replicas join at 2,270 s and drain the backlog.
HELD = {2220.0: 4000.0, 2235.0: 4150.0, 2250.0: 4300.0, 2265.0: 4450.0, 2280.0: 250.0, 2295.0: 200.0}


def window(now: float, held: dict[float, float]) -> Observation:
    """The observation at ``now``: the window's completions exactly what conservation leaves."""
    completed = (ARRIVING * 60.0 - (held[now] - held[now - 60.0])) / 60.0
    return replace(obs(now, 24, completed), running=held[now], waiting=0.0)


def before(now: float, held: dict[float, float]) -> tuple[tuple[float, float], ...]:
    return tuple((t, h) for t, h in held.items() if t < now)


@pytest.mark.parametrize("now", [2280.0, 2295.0])
def test_a_drained_backlog_is_not_read_as_arrivals(now: float) -> None:
    reading = signals.arrival_rate(window(now, HELD), before(now, HELD), now, drain_share=DRAIN)
    assert reading == pytest.approx(ARRIVING)


def test_growth_since_the_last_decision_alone_reads_the_drain_twice() -> None:
    """The reading this replaced, kept as the reproduction: growth over 15 s against completions
    over 60 s (with no sample a window old, or no drain share that counts)."""
    now = 2295.0
    last = ((2280.0, HELD[2280.0]),)
    assert signals.arrival_rate(window(now, HELD), last, now, drain_share=DRAIN) == pytest.approx(222.5)
    every = before(now, HELD)
    never = signals.arrival_rate(window(now, HELD), every, now, drain_share=float("inf"))
    assert never == pytest.approx(222.5)  # 1.39x what arrives


def test_a_backlog_building_shows_at_once() -> None:
    # 4 replicas complete 60/s flat while 160/s arrive from 2,060 s: the held requests grow
    # 100/s over the last 15 s, a quarter of that over the window
    held = {2015.0 + 15.0 * k: 100.0 for k in range(4)} | {2075.0: 1600.0}
    now = 2075.0
    seen = replace(obs(now, 4, 60.0), running=held[now], waiting=0.0)
    assert signals.arrival_rate(seen, before(now, held), now, drain_share=DRAIN) == pytest.approx(ARRIVING)


def test_a_steady_fleet_s_swings_keep_the_reading_since_the_last_decision() -> None:
    # held swings 60 -> 40 within the window (drained 20 over 60 s against 3,600 completed): not
    # a drain; the growth since the last decision (+10 in 15 s) is the reading
    held = {1940.0: 60.0, 1955.0: 55.0, 1970.0: 45.0, 1985.0: 30.0, 2000.0: 40.0}
    now = 2000.0
    seen = replace(obs(now, 4, 60.0), running=held[now], waiting=0.0)
    assert signals.arrival_rate(seen, before(now, held), now, drain_share=DRAIN) == pytest.approx(
        60.0 + 10.0 / 15.0
    )


def test_without_an_earlier_sample_only_the_completions_count() -> None:
    assert signals.arrival_rate(obs(100.0, 4, 60.0), (), 100.0, drain_share=DRAIN) == pytest.approx(60.0)
    missing = replace(obs(100.0, 4, 60.0), request_rate=None)
    assert signals.arrival_rate(missing, (), 100.0, drain_share=DRAIN) is None
