"""Fleet lifecycle, cost and the router, driven directly in virtual time."""

from __future__ import annotations

import math
import random

import pytest
from fleetslo.control.observation import build_observation
from fleetslo.sim.fleet import Fleet, FleetConfig, Phase
from fleetslo.sim.records import SimRequest

from tests.unit.sim.sim_support import spec_for, tiny_profile


def fleet(ready: int = 1, **config: object) -> Fleet:
    options = {"model_name": "m", "cold_start_s": 100.0, **config}
    f = Fleet(tiny_profile(), FleetConfig(**options), 64, random.Random(0))  # type: ignore[arg-type]
    f.add_ready(ready, 0.0)
    return f


def drain_events(f: Fleet, until: float = math.inf) -> None:
    while (t := f.next_event_at()) < math.inf and t <= until:
        f.run_next_event()


def test_cold_start_then_ready_and_cost_from_request_to_gone() -> None:
    f = fleet(1)
    f.scale_to(3, 10.0)
    assert f.counts().ready == 1 and f.counts().starting == 2
    assert f.next_ready_at() == 110.0
    f.promote_due(109.0)
    assert f.counts().starting == 2
    f.promote_due(110.0)
    assert f.counts().ready == 3 and f.counts().starting == 0
    f.scale_to(1, 200.0)  # idle replicas drain at once
    assert f.counts().ready == 1 and f.counts().draining == 0
    # one replica 0 → 300 s, two requested at 10 s and gone at 200 s
    assert f.replica_seconds(300.0) == pytest.approx(300 + 2 * 190)


def test_scale_down_cancels_starting_replicas_first() -> None:
    f = fleet(2)
    f.scale_to(4, 0.0)
    f.scale_to(2, 5.0)
    assert f.counts().ready == 2 and f.counts().starting == 0
    gone = [r for r in f.replicas if r.phase is Phase.GONE]
    assert len(gone) == 2 and all(r.gone_at == 5.0 and r.engine is None for r in gone)
    assert f.next_ready_at() == math.inf


def test_draining_replica_finishes_in_flight_requests_and_takes_no_new_ones() -> None:
    f = fleet(2)
    busy = [SimRequest(i, 0.0, 500, 400) for i in range(4)]
    for r in busy:
        f.route(r, 0.0)
    assert sorted(rep.outstanding() for rep in f.ready) == [2, 2]
    drain_events(f, until=1.0)
    f.scale_to(1, 1.0)
    (draining,) = f.draining
    assert draining.outstanding() == 2
    late = SimRequest(9, 1.5, 100, 10)
    f.route(late, 1.5)
    assert f.ready[0].outstanding() == 3  # the draining replica is not a routing target
    drain_events(f)
    assert all(r.finish is not None for r in [*busy, late])
    assert draining.phase is Phase.GONE and draining.outstanding() == 0
    assert draining.gone_at in {r.finish for r in busy}  # gone when its last request finished


def test_least_outstanding_router_spreads_and_prefers_the_idle_replica() -> None:
    f = fleet(4)
    for i in range(8):
        f.route(SimRequest(i, 0.0, 100, 1000), 0.0)
    assert [r.outstanding() for r in f.ready] == [2, 2, 2, 2]
    f.scale_to(5, 0.0)
    f.promote_due(100.0)
    f.route(SimRequest(99, 100.0, 100, 10), 100.0)
    assert f.ready[-1].outstanding() == 1


def test_requests_wait_at_the_router_while_no_replica_is_ready() -> None:
    f = fleet(0, router_queue_limit=2)
    f.scale_to(1, 0.0)
    reqs = [SimRequest(i, 1.0, 100, 10) for i in range(3)]
    for r in reqs:
        f.route(r, 1.0)
    assert f.rejected == 1 and reqs[2].rejected
    assert f.queue_length() == 2 and f.outstanding() == 2
    f.promote_due(100.0)
    drain_events(f)
    assert reqs[0].engine_arrival == 100.0 and reqs[0].ttft is not None and reqs[0].ttft > 99
    assert f.outstanding() == 0


def test_requests_longer_than_the_context_are_rejected() -> None:
    f = fleet(1)
    huge = SimRequest(0, 0.0, 70_000, 10)
    f.route(huge, 0.0)
    assert huge.rejected and f.rejected == 1


def test_batch_limit_applies_to_every_replica_and_newcomers() -> None:
    f = fleet(2)
    f.set_limit(3, 0.0)
    f.scale_to(3, 0.0)
    f.promote_due(100.0)
    assert {r.engine.limit for r in f.ready if r.engine} == {3}
    f.set_limit(10_000, 100.0)
    assert f.limit == 64  # never above max_num_seqs


def test_a_replica_ready_between_scrapes_does_not_make_the_others_look_stale() -> None:
    f = fleet(2)
    for i in range(4):
        f.route(SimRequest(i, 0.0, 100, 20), 0.0)
    drain_events(f, until=14.0)
    f.scrape(15.0)
    f.scale_to(3, 15.0)
    f.promote_due(115.0)  # cold start 100 s: ready at 115 s, after the scrape at 15 s
    obs = build_observation(
        "t", 120.0, 60.0, histories=f.histories(120.0, 300.0), replicas=f.counts(), batch_limit=8,
        spec=spec_for(tiny_profile()),
    )  # fmt: skip
    assert obs.replicas_reporting == 3
    assert obs.running == 0.0 and obs.data_age == pytest.approx(105.0)


def test_a_fleet_that_scales_up_and_down_for_hours_keeps_only_the_histories_a_window_reaches() -> None:
    f = fleet(2, cold_start_s=30.0, ring_size=8)
    window, index = 60.0, 0
    for cycle in range(40):  # 40 rounds of 2 -> 8 -> 2 replicas, 4 minutes each
        start = cycle * 240.0
        for t in range(int(start), int(start) + 240, 15):
            now = float(t)
            f.promote_due(now)
            if t == start:
                f.scale_to(8, now)
            if t == start + 120:
                f.scale_to(2, now)
            for _ in range(3):
                index += 1
                f.route(SimRequest(index, now, 200, 20), now)
            drain_events(f, until=now)
            f.scrape(now)
            rings = f.histories(now, window)
            newest = {ring.newest()[0] for ring in rings if ring.newest() is not None}
            assert newest <= {now} or min(newest) >= now - window
    gone = [r for r in f.replicas if r.phase is Phase.GONE]
    assert len(gone) >= 200  # hundreds of replicas came and went
    assert sum(r.ring is not None for r in gone) == 0  # none of their histories is kept
    assert f.replica_seconds(9600.0) > 0 and f.preemptions() == 0  # the cost still counts every one


def test_a_new_replica_takes_every_arrival_until_it_holds_as_many_and_their_prefills_queue_there() -> None:
    """What a least-outstanding router does to a newcomer (the policy's join hold rests on it):
    the first 40 arrivals after it joins all go to it, their prefills queue behind each other, so
    their TTFT grows with their place in line, while the next arrivals, spread again, see none of it."""
    f = fleet(4)
    for i in range(160):
        f.route(SimRequest(i, 0.0, 200, 20_000), 0.0)  # long decodes: 40 outstanding per replica
    drain_events(f, until=5.0)
    f.scale_to(5, 5.0)
    f.promote_due(105.0)
    drain_events(f, until=105.0)
    newcomer = f.ready[-1]
    arrivals = [SimRequest(1000 + i, 105.0 + 0.01 * i, 2000, 10) for i in range(44)]
    for r in arrivals:
        drain_events(f, until=r.arrival)
        f.route(r, r.arrival)
        if r.index < 1040:
            assert newcomer.outstanding() == r.index - 999  # every one of the first 40 went to it
    drain_events(f, until=200.0)
    ttft = [r.first_token - r.arrival for r in arrivals if r.first_token is not None]
    assert len(ttft) == 44
    assert ttft[0] < 0.3 and ttft[39] > 25 * ttft[0]  # 0.21 s first in line, 7.9 s fortieth
    assert all(t < 0.3 for t in ttft[40:])  # spread again: no queue
