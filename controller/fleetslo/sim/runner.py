"""Replay a trace through a simulated fleet in virtual time, under any ``Policy``.

The loop interleaves three kinds of events: request arrivals (routed at once), engine runs
ending (the fleet's heap), and control events — replicas finishing their cold start, scrapes
every ``scrape_interval_s``, and policy decisions every ``policy.interval`` seconds. A decision
sees an ``Observation`` built from the scrapes exactly as a real fleet's would be, and its
``replicas`` and ``batch_limit`` are applied as an actuator would apply them; every change is
recorded with the decision's reason.

The runner drives; it must not decide (no policy logic here) and must not judge (``result``).
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetslo.core.model import Decision
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.base import Policy
from fleetslo.sim.fleet import Fleet, FleetConfig
from fleetslo.sim.observe import build_observation
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.records import SimRequest
from fleetslo.sim.workload import Trace

#: Hard bound on what a decision may ask for, whatever the policy says (the spec's own maximum).
_MAX_REPLICAS = 10_000


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Everything about a run except the trace and the policy."""

    spec: FleetSLOSpec
    profile: EngineProfile
    initial_replicas: int
    #: The observation window the policy sees (the spec's objective window by default).
    window_s: float = 60.0
    scrape_interval_s: float = 15.0
    #: After the last arrival, keep going this long for in-flight requests to finish.
    drain_timeout_s: float = 1800.0
    seed: int = 0
    cold_start_sigma: float = 0.0
    router_queue_limit: int | None = None
    initial_batch_limit: int | None = None
    buckets: Mapping[str, Sequence[float]] | None = None
    #: Called now and then with (virtual seconds done, virtual seconds expected).
    progress: Callable[[float, float], None] | None = None


@dataclass(frozen=True, slots=True)
class FleetSample:
    """The fleet as one scrape saw it (the report's replica and queue plots)."""

    t: float
    ready: int
    starting: int
    draining: int
    batch_limit: int
    queue_length: int


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    t: float
    replicas_from: int
    replicas_to: int
    batch_limit: int
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class DecisionSample:
    """One decision and the p90s the policy predicted behind it (for the model-quality report)."""

    t: float
    replicas: int
    ready: int
    starting: int
    predicted_ttft_s: float | None
    predicted_tpot_s: float | None
    #: The p90s the decision's observation showed (bucket-interpolated, over the last window).
    observed_ttft_s: float | None
    observed_tpot_s: float | None


@dataclass(slots=True)
class Run:
    """What happened: every request's timestamps, the fleet over time, the scaling actions."""

    requests: list[SimRequest]
    samples: list[FleetSample] = field(default_factory=list)
    events: list[ScaleEvent] = field(default_factory=list)
    decisions: list[DecisionSample] = field(default_factory=list)
    end: float = 0.0
    replica_seconds: float = 0.0
    rejected: int = 0
    preemptions: int = 0
    in_flight: int = 0
    wall_seconds: float = 0.0


def simulate(trace: Trace, policy: Policy[Any], config: SimConfig) -> Run:
    """Replay ``trace`` through a warm fleet of ``config.initial_replicas`` under ``policy``."""
    started = time.perf_counter()
    requests = [SimRequest.of(i, r) for i, r in enumerate(trace.requests)]
    loop = _Loop(requests, policy, config)
    loop.run()
    run = loop.finish()
    run.wall_seconds = time.perf_counter() - started
    return run


class _Loop:
    """The state of one replay; ``run`` advances it to the end."""

    def __init__(self, requests: list[SimRequest], policy: Policy[Any], config: SimConfig) -> None:
        self.requests = requests
        self.policy = policy
        self.config = config
        self.spec = config.spec
        profile = config.profile
        fleet_config = FleetConfig(
            model_name=self.spec.target.model_name,
            cold_start_s=self.spec.replicas.cold_start,
            cold_start_sigma=config.cold_start_sigma,
            router_queue_limit=config.router_queue_limit,
            ring_size=int(config.window_s / config.scrape_interval_s) + 4,
            buckets=config.buckets,
        )
        limit = config.initial_batch_limit or profile.max_num_seqs
        self.fleet = Fleet(profile, fleet_config, limit, random.Random(config.seed))
        self.fleet.add_ready(config.initial_replicas, 0.0)
        self.run_record = Run(requests)
        self.state = policy.initial_state(self.spec)
        self.next_scrape = 0.0
        self.next_tick = 0.0
        self.index = 0
        self.now = 0.0
        last = requests[-1].arrival if requests else 0.0
        self.horizon = last
        self.deadline = last + config.drain_timeout_s

    def run(self) -> None:
        while True:
            t_ctrl = min(self.next_scrape, self.next_tick, self.fleet.next_ready_at())
            self._pump(t_ctrl)
            if self._done() or t_ctrl > self.deadline:
                return
            self.now = t_ctrl
            self._control(t_ctrl)

    def _pump(self, until: float) -> None:
        """Process arrivals and engine events up to ``until`` (inclusive), earliest first."""
        fleet, requests = self.fleet, self.requests
        n, i = len(requests), self.index
        route, run_event, events = fleet.route, fleet.run_next_event, fleet.events
        t_arrival = requests[i].arrival if i < n else math.inf
        while True:
            # fleet.next_event_at(), inlined: this loop runs a few times per simulated request
            while events and events[0][1] != events[0][2].pending:
                heapq.heappop(events)
            t_event = events[0][0] if events else math.inf
            if t_event <= t_arrival:
                if t_event > until:
                    break
                run_event()
                self.now = t_event
            else:
                if t_arrival > until:
                    break
                route(requests[i], t_arrival)
                self.now = t_arrival
                i += 1
                t_arrival = requests[i].arrival if i < n else math.inf
        self.index = i

    def _done(self) -> bool:
        return self.index >= len(self.requests) and self.fleet.outstanding() == 0

    def _control(self, now: float) -> None:
        fleet = self.fleet
        if fleet.next_ready_at() <= now:
            fleet.promote_due(now)
        if self.next_scrape <= now:
            fleet.scrape(now)
            counts = fleet.counts()
            self.run_record.samples.append(
                FleetSample(
                    now, counts.ready, counts.starting, counts.draining, fleet.limit, fleet.queue_length()
                )
            )
            self.next_scrape += self.config.scrape_interval_s
            if self.config.progress is not None:
                self.config.progress(now, self.horizon)
        if self.next_tick <= now:
            self._decide(now)
            self.next_tick += self.policy.interval

    def _decide(self, now: float) -> None:
        fleet, config = self.fleet, self.config
        obs = build_observation(
            self.spec.target.name,
            now,
            config.window_s,
            histories=fleet.histories(now, config.window_s),
            replicas=fleet.counts(),
            batch_limit=fleet.limit,
            spec=self.spec,
            slack=config.scrape_interval_s / 2,
        )
        decision, self.state = self.policy.decide(obs, self.state, self.spec, now)
        counts = obs.replicas
        self.run_record.decisions.append(
            DecisionSample(
                now, decision.replicas, counts.ready, counts.starting,
                decision.predicted_ttft_p90, decision.predicted_tpot_p90,
                obs.ttft.p90, obs.tpot.p90 if obs.tpot.p90 is not None else obs.itl.p90,
            )
        )  # fmt: skip
        self._apply(decision, now)

    def _apply(self, decision: Decision, now: float) -> None:
        fleet = self.fleet
        before = len(fleet.ready) + len(fleet.starting)
        target = max(0, min(decision.replicas, _MAX_REPLICAS))
        old_limit = fleet.limit
        if target != before:
            fleet.scale_to(target, now)
        if decision.batch_limit is not None and decision.batch_limit != fleet.limit:
            fleet.set_limit(decision.batch_limit, now)
        if target != before or fleet.limit != old_limit:
            self.run_record.events.append(
                ScaleEvent(now, before, target, fleet.limit, str(decision.reason), decision.message)
            )

    def finish(self) -> Run:
        run, fleet = self.run_record, self.fleet
        end = self.now
        run.end = end
        run.replica_seconds = fleet.replica_seconds(end)
        run.rejected = fleet.rejected
        run.preemptions = fleet.preemptions()
        run.in_flight = sum(1 for r in self.requests if r.finish is None and not r.rejected)
        return run
