"""The simulated control plane: the controller ``fleetslo run`` ships, over a simulated fleet.

The runner drives; the controller decides. This module gives the production ``Controller`` a
simulated fleet behind the same ports a real one has:

* ``SimSource`` (a ``Source``) builds each observation from the simulated replicas' scrapes with
  the same builder the direct source uses (``sim.observe.build_observation``);
* ``SimReplicas`` (a ``ReplicaActuator``) and ``SimBatchLimit`` (a ``BatchLimitActuator``) read the
  fleet's counts and limit and write them with ``Fleet.scale_to`` and ``Fleet.set_limit``. The
  target's ``FleetActuator`` is composed from them by ``control.service.make_fleet``, as
  ``fleetslo run`` composes it (measured wrappers, the spec's batch actuator or none, advisory mode
  writing nothing). No drainer: the simulated fleet drains a removed replica itself;
* a real ``Auditor`` on a private ``ControllerMetrics`` registry, with no Kubernetes events and its
  decision lines on the ``fleetslo.sim.audit`` logger (debug-only, as the chatty libraries are);
  every audited reconcile is also turned into the runner's records (the result's
  ``ScaleEventRecord`` and ``DecisionRecord``);
* an always-leading ``Leadership``, and virtual time: ``now`` is the simulated second.

So every decision a simulation measures went through ``Controller.tick_target``: the finite-only
observation, ``policy.evidence.guard_scale_down``, the throttle and back-off after a failed
reconcile, and the audit. ``ControlPlane`` also owns the control events a replay interleaves with
arrivals and engine runs: replicas finishing their cold start, scrapes every ``scrape_interval_s``,
and controller ticks every ``tick_interval_s`` (``fleetslo run``'s scheduler tick; each policy still
decides at its own ``interval``). One difference from ``fleetslo run``, on purpose: a reconcile that
fails on a bug (no fleetslo error) stops the replay (``ReplayFailed``) instead of backing off, as a
fleet nobody controls is no measurement. ``ControlPlane.run`` is the one loop both replays use
(``runner`` and ``longrun``); they differ only in how arrivals come in and how results are judged.

Wiring and bookkeeping only: it decides nothing and models no engine.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetslo.control.actuators.fleet import FleetActuator
from fleetslo.control.audit import Reconcile, RecordingAuditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.leader import AlwaysLeader
from fleetslo.control.loop import Binding, Controller
from fleetslo.control.ports import ActuationResult, BatchLimitActuator, ScaleState, Source
from fleetslo.control.service import Actuators, make_fleet
from fleetslo.control.settings import ControllerSettings
from fleetslo.core.errors import Conflict, FleetSLOError
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.core.spec import BatchActuator, FleetSLO, FleetSLOSpec, Target
from fleetslo.core.spec.v1 import Metadata
from fleetslo.policy.base import Policy
from fleetslo.sim.fleet import Fleet, FleetConfig
from fleetslo.sim.observe import build_observation
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.result_types import DecisionRecord, ScaleEventRecord

#: Hard bound on the replicas a write may ask for, whatever the policy says (the spec's own maximum).
MAX_REPLICAS = 10_000
#: ``fleetslo run``'s scheduler tick (``ControllerSettings.interval``'s default).
SCHEDULER_TICK_S: float = ControllerSettings.model_fields["interval"].default
#: Where a simulation's decision lines go: one per simulated decision, so only shown when debugging.
AUDIT_LOG = logging.getLogger("fleetslo.sim.audit")


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Everything about a run except the trace and the policy."""

    spec: FleetSLOSpec
    profile: EngineProfile
    initial_replicas: int
    #: The observation window the policy sees (the spec's objective window by default).
    window_s: float = 60.0
    scrape_interval_s: float = 15.0
    #: After the last arrival, keep going this long for in-flight requests to finish (a replay past
    #: it stops at the next control event: within one tick, ``tick_interval_s``).
    drain_timeout_s: float = 1800.0
    seed: int = 0
    cold_start_sigma: float = 0.0
    router_queue_limit: int | None = None
    initial_batch_limit: int | None = None
    buckets: Mapping[str, Sequence[float]] | None = None
    #: Called now and then with (virtual seconds done, virtual seconds expected).
    progress: Callable[[float, float], None] | None = None
    #: How often the controller is ticked; a policy decides at its own interval, on these ticks.
    tick_interval_s: float = SCHEDULER_TICK_S


@dataclass(frozen=True, slots=True)
class FleetSample:
    """The fleet as one scrape saw it (the report's replica and queue plots)."""

    t: float
    ready: int
    starting: int
    draining: int
    batch_limit: int
    queue_length: int


def make_sim_fleet(config: SimConfig) -> Fleet:
    """The warm fleet a replay starts from: ``initial_replicas`` ready at t=0."""
    spec = config.spec
    fleet_config = FleetConfig(
        model_name=spec.target.model_name,
        cold_start_s=spec.replicas.cold_start,
        cold_start_sigma=config.cold_start_sigma,
        router_queue_limit=config.router_queue_limit,
        ring_size=int(config.window_s / config.scrape_interval_s) + 4,
        buckets=config.buckets,
    )
    limit = config.initial_batch_limit or config.profile.max_num_seqs
    fleet = Fleet(config.profile, fleet_config, limit, random.Random(config.seed))
    fleet.add_ready(config.initial_replicas, 0.0)
    return fleet


class VirtualClock:
    """The simulated second the controller is at: what the actuators write ``now`` as."""

    def __init__(self) -> None:
        self.now = 0.0


class SimSource:
    """The ``Source`` of a simulated fleet: its replicas' scrape histories, built into one observation."""

    def __init__(self, fleet: Fleet, *, window_s: float, scrape_interval_s: float) -> None:
        self.fleet, self.window_s = fleet, window_s
        # A scrape lands up to one interval after the window's start: half of it is the slack.
        self.slack = scrape_interval_s / 2

    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        return build_observation(
            slo.spec.target.name,
            now,
            self.window_s,
            histories=self.fleet.histories(now, self.window_s),
            replicas=replicas,
            batch_limit=batch_limit,
            spec=slo.spec,
            slack=self.slack,
        )


class SimReplicas:
    """The ``ReplicaActuator`` of a simulated fleet: desired = ready + starting; writes ``scale_to``."""

    def __init__(self, fleet: Fleet, clock: VirtualClock) -> None:
        self.fleet, self.clock = fleet, clock

    def read(self, target: Target) -> ScaleState:
        counts = self.fleet.counts()
        return ScaleState(counts.provisioned, counts)

    def scale(self, target: Target, replicas: int, *, expected: int | None = None) -> ActuationResult:
        current = self.fleet.counts().provisioned
        if expected is not None and expected != current:
            raise Conflict(f"{target.name} has {current} replicas, the write was planned for {expected}")
        wanted = max(0, min(replicas, MAX_REPLICAS))
        if wanted == current:
            return ActuationResult(False, f"{target.name} already has {current} replicas")
        self.fleet.scale_to(wanted, self.clock.now)
        return ActuationResult(True, f"scaled {target.name} from {current} to {wanted} replicas")


class SimBatchLimit:
    """The ``BatchLimitActuator`` of a simulated fleet: one live limit on every replica's engine."""

    def __init__(self, fleet: Fleet, clock: VirtualClock) -> None:
        self.fleet, self.clock = fleet, clock

    def read_limit(self, target: Target) -> int | None:
        return self.fleet.limit

    def set_limit(self, target: Target, limit: int) -> ActuationResult:
        before = self.fleet.limit
        self.fleet.set_limit(limit, self.clock.now)
        after = self.fleet.limit  # the engine clamps to [1, max_num_seqs]
        return ActuationResult(after != before, f"batch limit of {target.name} {before} -> {after}")


class ReplayFailed(RuntimeError):
    """The controller hit a bug (an exception that is no fleetslo error) while reconciling.

    ``fleetslo run`` logs it and backs off, so one bad target cannot stop a controller; a replay
    stops instead: a fleet that nobody controls from then on is no measurement of the policy.
    """


def sim_fleetslo(spec: FleetSLOSpec) -> FleetSLO:
    """The FleetSLO resource of a simulated target (named after its workload)."""
    metadata = Metadata(name=spec.target.name)
    return FleetSLO(apiVersion="fleetslo/v1", kind="FleetSLO", metadata=metadata, spec=spec)


@dataclass(slots=True)
class _Schedule:
    next_scrape: float = 0.0
    next_tick: float = 0.0


@dataclass(slots=True)
class Records:
    """What the control plane saw and did, for the judge."""

    events: list[ScaleEventRecord] = field(default_factory=list)
    decisions: list[DecisionRecord] = field(default_factory=list)
    #: Failed reconciles: (t, stage, error kind), backed off as ``fleetslo run`` backs them off.
    failures: list[tuple[float, str, str]] = field(default_factory=list)


class ControlPlane:
    """One simulated target under the production ``Controller``; ``run`` is the replay's loop."""

    def __init__(
        self,
        policy: Policy[Any],
        config: SimConfig,
        *,
        on_sample: Callable[[FleetSample], None],
        record_decisions: bool = True,
        wrap_source: Callable[[Source], Source] | None = None,
    ) -> None:
        self.config, self.on_sample, self.record_decisions = config, on_sample, record_decisions
        self.fleet = make_sim_fleet(config)
        self.clock = VirtualClock()
        self.slo = sim_fleetslo(config.spec)
        self.metrics = ControllerMetrics()
        self.records = Records()
        self.schedule = _Schedule()
        self._bug: tuple[str, BaseException] | None = None
        source: Source = SimSource(
            self.fleet, window_s=config.window_s, scrape_interval_s=config.scrape_interval_s
        )
        if wrap_source is not None:
            source = wrap_source(source)
        self.controller = Controller(
            [Binding(self.slo, policy, source, self._actuator())],
            RecordingAuditor(self.metrics, self._record, self._failed, decision_log=AUDIT_LOG),
            leader=AlwaysLeader(),
        )

    def _actuator(self) -> FleetActuator:
        kind = self.slo.spec.batch_limit.actuator
        batch: dict[BatchActuator, BatchLimitActuator] = {}
        if kind is not BatchActuator.NONE:  # the simulated engine's live limit stands in for any kind
            batch[kind] = SimBatchLimit(self.fleet, self.clock)
        actuators = Actuators(SimReplicas(self.fleet, self.clock), batch)
        return make_fleet(self.slo, actuators, self.metrics, dry_run=False, drain=False)

    # --- the loop ---------------------------------------------------------------------------

    def run(
        self,
        pump: Callable[[float], None],
        stop: Callable[[float], bool],
        after_control: Callable[[float], None],
    ) -> None:
        """Until ``stop``: ``pump`` arrivals and engine runs up to the next control event, run it.

        ``pump(t)`` processes everything due at or before ``t``; ``stop(t)`` is asked after each pump
        (the replay is done, or past its deadline); ``after_control(t)`` follows each control event.
        """
        while True:
            t_ctrl = self.next_at()
            pump(t_ctrl)
            if stop(t_ctrl):
                return
            self.control(t_ctrl)
            after_control(t_ctrl)

    def next_at(self) -> float:
        """When the next control event is due: a cold start ending, a scrape or a tick."""
        s = self.schedule
        return min(s.next_scrape, s.next_tick, self.fleet.next_ready_at())

    def control(self, now: float) -> None:
        """Every control event due at ``now``: replicas becoming ready, then a scrape, then a tick."""
        fleet, s, config = self.fleet, self.schedule, self.config
        if fleet.next_ready_at() <= now:
            fleet.promote_due(now)
        if s.next_scrape <= now:
            fleet.scrape(now)
            counts = fleet.counts()
            self.on_sample(
                FleetSample(
                    now, counts.ready, counts.starting, counts.draining, fleet.limit, fleet.queue_length()
                )
            )
            s.next_scrape += config.scrape_interval_s
        if s.next_tick <= now:
            self.clock.now = now
            self.controller.tick_target(self.slo.metadata.name, now)
            s.next_tick += config.tick_interval_s
            if self._bug is not None:
                stage, exc = self._bug
                raise ReplayFailed(f"the controller's {stage} stage failed at t={now:g}s: {exc!r}") from exc

    # --- records ----------------------------------------------------------------------------

    def _failed(self, stage: str, exc: BaseException) -> None:
        kind = exc.reason if isinstance(exc, FleetSLOError) else "bug"
        self.records.failures.append((self.clock.now, stage, kind))
        if not isinstance(exc, FleetSLOError):
            self._bug = (stage, exc)

    def _record(self, r: Reconcile) -> None:
        """One audited decision: its sample and, when a knob moved, its scale event."""
        now, fleet, decision = self.clock.now, self.fleet, r.decision
        if self.record_decisions:
            obs, counts = r.observation, r.before.scale.counts
            self.records.decisions.append(
                DecisionRecord(
                    now, decision.replicas, counts.ready, counts.starting,
                    decision.predicted_ttft_p90, decision.predicted_tpot_p90,
                    obs.ttft.p90, obs.tpot.p90 if obs.tpot.p90 is not None else obs.itl.p90,
                )
            )  # fmt: skip
        if r.outcome.changed:
            replicas_to = fleet.counts().provisioned
            self.records.events.append(
                ScaleEventRecord(now, r.before.scale.desired, replicas_to, fleet.limit,
                                 str(decision.reason), decision.message)
            )  # fmt: skip
