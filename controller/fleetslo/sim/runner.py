"""Replay a trace through a simulated fleet in virtual time, under any ``Policy``.

The runner drives; the controller decides. The loop interleaves three kinds of events: request
arrivals (routed at once), engine runs ending (the fleet's heap), and the control events of
``control_plane.ControlPlane`` — replicas finishing their cold start, scrapes every
``scrape_interval_s``, and ticks of the production ``Controller``, which observes the fleet through
the same observation builder a real fleet's direct source uses, decides with ``policy`` at its
interval (finite-only data, the scale-down evidence guard, back-off after a failure, the audit) and
applies the decision through the same ``FleetActuator`` ``fleetslo run`` builds. Every change is
recorded with the decision's reason.

What this module adds is only how arrivals come in (the whole trace, held) and what it keeps for
the judge (``result``): every request's timestamps and the fleet over time. It must not decide
(no policy logic here) and must not judge.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.ports import Source
from fleetslo.policy.base import Policy
from fleetslo.sim.control_plane import ControlPlane, FleetSample, SimConfig
from fleetslo.sim.records import SimRequest
from fleetslo.sim.result_types import DecisionRecord, ScaleEventRecord
from fleetslo.sim.workload import Trace

__all__ = ["FleetSample", "Run", "SimConfig", "simulate"]


@dataclass(slots=True)
class Run:
    """What happened: every request's timestamps, the fleet over time, the scaling actions."""

    requests: list[SimRequest]
    samples: list[FleetSample] = field(default_factory=list)
    events: list[ScaleEventRecord] = field(default_factory=list)
    decisions: list[DecisionRecord] = field(default_factory=list)
    end: float = 0.0
    replica_seconds: float = 0.0
    rejected: int = 0
    preemptions: int = 0
    in_flight: int = 0
    wall_seconds: float = 0.0
    #: The controller's own metrics over the replay (decisions by reason, errors, tick durations).
    controller: ControllerMetrics | None = None
    #: Reconciles that failed and were backed off: (t, stage, error kind).
    failures: list[tuple[float, str, str]] = field(default_factory=list)


def simulate(
    trace: Trace,
    policy: Policy[Any],
    config: SimConfig,
    *,
    wrap_source: Callable[[Source], Source] | None = None,
) -> Run:
    """Replay ``trace`` through a warm fleet of ``config.initial_replicas`` under ``policy``.

    ``wrap_source`` wraps the simulated fleet's source (fault injection: a metrics pipeline that
    fails, lags or lies, met by the controller exactly as in production).
    """
    started = time.perf_counter()
    requests = [SimRequest.of(i, r) for i, r in enumerate(trace.requests)]
    loop = _Loop(requests, policy, config, wrap_source)
    loop.run()
    run = loop.finish()
    run.wall_seconds = time.perf_counter() - started
    return run


class _Loop:
    """The state of one replay: the held trace, and the control plane it runs under."""

    def __init__(
        self,
        requests: list[SimRequest],
        policy: Policy[Any],
        config: SimConfig,
        wrap_source: Callable[[Source], Source] | None,
    ) -> None:
        self.requests = requests
        self.config = config
        self.run_record = Run(requests)
        self.plane = ControlPlane(policy, config, on_sample=self._sample, wrap_source=wrap_source)
        self.fleet = self.plane.fleet
        self.index = 0
        self.now = 0.0
        last = requests[-1].arrival if requests else 0.0
        self.horizon = last
        self.deadline = last + config.drain_timeout_s

    def run(self) -> None:
        """Arrivals and engine runs (``_pump``) between the control plane's events, to the end."""
        self.plane.run(self._pump, self._stop, self._after_control)

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

    def _stop(self, t_ctrl: float) -> bool:
        done = self.index >= len(self.requests) and self.fleet.outstanding() == 0
        return done or t_ctrl > self.deadline

    def _after_control(self, now: float) -> None:
        self.now = now

    def _sample(self, sample: FleetSample) -> None:
        self.run_record.samples.append(sample)
        if self.config.progress is not None:
            self.config.progress(sample.t, self.horizon)

    def finish(self) -> Run:
        run, fleet, records = self.run_record, self.fleet, self.plane.records
        end = self.now
        run.end = end
        run.events, run.decisions, run.failures = records.events, records.decisions, records.failures
        run.controller = self.plane.metrics
        run.replica_seconds = fleet.replica_seconds(end)
        run.rejected = fleet.rejected
        run.preemptions = fleet.preemptions()
        run.in_flight = sum(1 for r in self.requests if r.finish is None and not r.rejected)
        return run
