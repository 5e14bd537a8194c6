"""The demo's controller: the real control loop, on its own thread, ticking in simulated time.

Wiring only, with the production parts unchanged: ``DirectSource`` scrapes each replica's sidecar
``/vllm/metrics``, ``GateActuator`` sets the batch limit and drains through each gate's admin API,
``LocalFleet`` starts and stops replicas, ``make_fleet`` orders them (limit first, drain before a
scale-down), and ``Controller`` reconciles with the ``fleetslo`` policy it is given (the one the
simulated side replays, ``outcome.fleetslo_policy``). The only
difference from ``fleetslo run`` is the clock: the thread ticks every ``policy.interval`` simulated
seconds and hands the controller that nominal time, so the policy's intervals, windows and cooldowns
all run ``speedup`` times faster, exactly as the simulated fleet's do.

After each tick it records what the simulator's runner records — a ``FleetSample`` and, when a knob
moved, a ``ScaleEventRecord`` with the decision's reason — plus the last decisions for the live view.
It must not decide anything itself.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import httpx

from fleetslo.control.actuators.gate import GateActuator
from fleetslo.control.audit import Reconcile, RecordingAuditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.leader import AlwaysLeader
from fleetslo.control.local.fleet import LocalFleet
from fleetslo.control.loop import Binding, Controller
from fleetslo.control.service import Actuators, make_fleet
from fleetslo.control.sources.direct import DirectSource
from fleetslo.core.spec import BatchActuator, FleetSLO
from fleetslo.policy.base import Policy
from fleetslo.sim.demo.lag import CONTROLLER, LagMeter
from fleetslo.sim.result_types import ScaleEventRecord
from fleetslo.sim.runner import FleetSample
from fleetslo.sim.server.clock import SpeedClock

log = logging.getLogger("fleetslo.demo")

#: Wall seconds the gate actuator waits for a drained replica's requests (a replica holds seconds
#: of simulated work at most, a fraction of that in wall time).
DRAIN_TIMEOUT_S = 10.0


class ControlLoop:
    """``Controller`` for one FleetSLO over a ``LocalFleet``, ticked by a thread in simulated time."""

    def __init__(
        self,
        slo: FleetSLO,
        policy: Policy[Any],
        fleet: LocalFleet,
        token: str,
        clock: SpeedClock,
        *,
        router_waiting: Callable[[], int],
        default_limit: int,
        lag: LagMeter | None = None,
    ) -> None:
        self.slo, self.fleet, self.clock, self.token = slo, fleet, clock, token
        self.lag = lag or LagMeter()
        self.router_waiting = router_waiting
        self.interval = policy.interval
        self.source = DirectSource(
            fleet, url=fleet.sidecar_url, interval=self.interval, timeout=2.0, gpu_utilization=False
        )
        self.gate = GateActuator(
            fleet,
            token,
            admin_url=fleet.admin_url,
            timeout=2.0,
            drain_timeout=DRAIN_TIMEOUT_S,
            poll_interval=0.05,
        )
        self.metrics = ControllerMetrics()
        actuator = make_fleet(
            slo,
            Actuators(fleet, {BatchActuator.GATE: self.gate}, self.gate, marker=fleet),
            self.metrics,
            dry_run=False,
            drain=True,
        )
        auditor = RecordingAuditor(self.metrics, self._record)
        self.controller = Controller(
            [Binding(slo, policy, self.source, actuator)], auditor, leader=AlwaysLeader()
        )
        self.samples: list[FleetSample] = []
        self.events: list[ScaleEventRecord] = []
        self.decisions: deque[ScaleEventRecord] = deque(maxlen=6)
        self.limit = default_limit
        self.last: Reconcile | None = None
        self._http = httpx.Client(timeout=1.0, headers={"Authorization": f"Bearer {token}"})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-controller", daemon=True)

    def start(self) -> None:
        """Start ticking at simulated time 0 (call it when the clock's origin was just set)."""
        # The warm fleet was up before the traffic, and a controller running beside it would have
        # scraped it already: one scrape now anchors every replica's first window at 0, as the
        # simulator anchors a ready replica's (otherwise the first tick sees no data and the
        # policy's first window closes one interval later than in the simulation).
        self.source.observe(self.slo, self.fleet.counts(), self.limit, 0.0)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=DRAIN_TIMEOUT_S + 5)
        self.gate.close()
        self.source.close()
        self._http.close()

    def _run(self) -> None:
        tick = 0
        while not self._stop.is_set():
            nominal = tick * self.interval
            if self._stop.wait(max(0.0, self.clock.wall_seconds(nominal - self.clock.now()))):
                return
            late = self.clock.wall_seconds(self.clock.now() - nominal)
            self.lag.record(CONTROLLER, late, self.clock.wall_at(self.clock.now()))
            self.controller.tick(nominal)
            self._sample(nominal)
            # A tick that ran long (a drain) skips the ticks it overran, as a coalescing scheduler does.
            tick = max(tick + 1, int(self.clock.now() // self.interval) + 1)

    def _record(self, r: Reconcile) -> None:
        decision, before = r.decision, r.before
        previous = self.limit
        limit = decision.batch_limit if decision.batch_limit is not None else before.batch_limit
        self.limit = limit if limit is not None else previous
        replicas = (
            r.outcome.replicas_written if r.outcome.replicas_written is not None else before.scale.desired
        )
        self.last = r
        event = ScaleEventRecord(
            r.observation.at,
            before.scale.desired,
            replicas,
            self.limit,
            str(decision.reason),
            decision.message,
        )
        self.decisions.append(event)
        if replicas != before.scale.desired or self.limit != previous:
            self.events.append(event)

    def _sample(self, now: float) -> None:
        counts = self.fleet.counts()
        waiting = self.last.observation.waiting if self.last is not None else None
        queue = self.router_waiting() + int(waiting or 0) + self._gate_queued()
        self.samples.append(
            FleetSample(now, counts.ready, counts.starting, counts.draining, self.limit, queue)
        )

    def _gate_queued(self) -> int:
        """Requests waiting behind the gates' limits (they wait there, not in vLLM, on a gated fleet)."""
        total = 0
        for pod in self.fleet.pods(self.slo.spec.target):
            try:
                total += int(
                    self._http.get(self.fleet.admin_url(pod) + "/admin/status").json().get("queued", 0)
                )
            except (httpx.HTTPError, ValueError):
                continue
        return total
