"""FleetSLOs as Kubernetes resources: which specs to hold, what may be enforced, what status to show.

* ``load_resources`` turns the listed resources into specs; one that does not validate is kept out
  and gets a ``Degraded`` (``InvalidSpec``) status, so ``kubectl get fleetslo`` says why nothing
  happens instead of the controller stopping;
* ``guard_conflicts`` refuses to enforce on a workload another autoscaler (an HPA, a KEDA
  ScaledObject) already scales: the spec runs advisory, the status says ``Conflict`` and a
  Warning Event goes on the workload — two controllers writing one replica count would fight;
* ``StatusAuditor`` is the ``Auditor`` that also writes each reconcile into the resource's status
  (observed p90s and attainment, replicas, batch limit, last decision, conditions).

Writing status is best effort, like Events: a refused write is logged, the reconcile goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Span

from fleetslo.control.audit import Auditor, EventSink, Reconcile
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.kube.fleetslo_resources import Scaler
from fleetslo.core.errors import ConfigError, FleetSLOError
from fleetslo.core.model import Reason
from fleetslo.core.spec import FleetSLO, Mode, ReplicaActuatorKind, Target, load_fleetslo_documents
from fleetslo.core.spec.resource import resource_key
from fleetslo.core.spec.status import (
    Condition,
    ConditionType,
    FleetSLOStatus,
    LastDecision,
    ObservedLatency,
    ReplicaStatus,
)

log = logging.getLogger("fleetslo.resources")

#: Decisions made on missing or doubtful data: the target is held, and the status says Degraded.
DEGRADED_REASONS = frozenset({Reason.HOLD_NO_DATA, Reason.HOLD_STALE_DATA, Reason.HOLD_PARTIAL_DATA,
                              Reason.HOLD_CONTRADICTORY_DATA})  # fmt: skip


class StatusWriter(Protocol):
    def write_status(self, namespace: str, name: str, status: FleetSLOStatus) -> None: ...


class ScalerFinder(Protocol):
    def scaling(self, target: Target) -> list[Scaler]: ...


@dataclass(frozen=True)
class Held:
    """A spec the controller holds, where it came from, and why it may not enforce."""

    slo: FleetSLO
    #: ``(namespace, name)`` of its resource; None for a spec from a file or ConfigMap.
    resource: tuple[str, str] | None = None
    generation: int | None = None
    conflict: Scaler | None = None


@dataclass
class Loaded:
    held: list[Held] = field(default_factory=list)
    #: Resources that do not validate: ``(namespace, name) -> the loader's message``.
    invalid: dict[tuple[str, str], str] = field(default_factory=dict)


def load_resources(items: Sequence[Mapping[str, Any]]) -> Loaded:
    """Specs from listed resources; each invalid one is set aside with its error."""
    loaded = Loaded()
    for item in items:
        key = resource_key(item)
        try:
            (slo,) = load_fleetslo_documents([dict(item)], f"FleetSLO {key[0]}/{key[1]}")
        except ConfigError as exc:
            loaded.invalid[key] = str(exc)
            continue
        generation = (item.get("metadata") or {}).get("generation")
        loaded.held.append(Held(slo, key, int(generation) if generation is not None else None))
    names = [h.slo.metadata.name for h in loaded.held]
    for h in list(loaded.held):
        if names.count(h.slo.metadata.name) > 1 and h.resource is not None:
            loaded.held.remove(h)  # bindings are keyed by name: the same name twice is refused
            loaded.invalid[h.resource] = f"another FleetSLO is also named {h.slo.metadata.name}"
    return loaded


def guard_conflicts(held: Sequence[Held], finder: ScalerFinder, events: EventSink | None) -> list[Held]:
    """``held`` with every enforcing spec whose workload another autoscaler scales made advisory."""
    out = []
    for h in held:
        if h.slo.spec.replicas.actuator == ReplicaActuatorKind.EXTERNAL:
            out.append(h)  # the other autoscaler is fleetslo's hands here, by design
            continue
        scalers = finder.scaling(h.slo.spec.target)
        if not scalers:
            out.append(h)
            continue
        advisory = h.slo.model_copy(update={"spec": h.slo.spec.model_copy(update={"mode": Mode.ADVISORY})})
        message = (
            f"{scalers[0]} already scales this workload: fleetslo runs {h.slo.metadata.name} advisory "
            "(decides and reports, writes nothing). Remove that autoscaler to let fleetslo enforce."
        )
        log.warning(message, extra={"fields": {"event": "conflict", "target": h.slo.metadata.name}})
        if events is not None and h.slo.spec.mode == Mode.ENFORCE:
            try:
                events.event(h.slo.spec.target, "Conflict", message, warning=True)
            except FleetSLOError as exc:
                log.warning("could not record the conflict event: %s", exc)
        out.append(Held(advisory, h.resource, h.generation, scalers[0]))
    return out


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: ConditionType, on: bool, reason: str, message: str = "", *,
              now: str, generation: int | None) -> Condition:  # fmt: skip
    return Condition(type=kind, status="True" if on else "False", reason=reason, message=message[:1024],
                     lastTransitionTime=now, observedGeneration=generation)  # fmt: skip


def invalid_status(message: str, now: str | None = None) -> FleetSLOStatus:
    now = now or _now()
    return FleetSLOStatus(conditions=(
        condition(ConditionType.READY, False, "InvalidSpec", message, now=now, generation=None),
        condition(ConditionType.DEGRADED, True, "InvalidSpec", message, now=now, generation=None),
    ))  # fmt: skip


class StatusAuditor(Auditor):
    """An ``Auditor`` that also writes each reconcile into its FleetSLO resource's status."""

    def __init__(
        self,
        metrics: ControllerMetrics,
        events: EventSink | None,
        tracer: trace.Tracer | None,
        writer: StatusWriter,
        held: Sequence[Held],
        *,
        dry_run: bool = False,
        now: Callable[[], str] = _now,
    ) -> None:
        super().__init__(metrics, events, tracer)
        self.writer, self.dry_run, self.now = writer, dry_run, now
        self.held = {h.slo.metadata.name: h for h in held if h.resource is not None}
        #: The last status written per target, so a failure keeps what was last seen.
        self.last: dict[str, FleetSLOStatus] = {}
        #: A hook for the capacity model's learned state: name -> its dict, persisted in the status.
        self.capacity_state: Callable[[str], dict[str, Any] | None] = lambda _name: None

    def decided(self, r: Reconcile, span: Span | None = None) -> None:
        super().decided(r, span)
        h = self.held.get(r.name)
        if h is None:
            return
        self._write(h, self.status_of(r, h))

    def failed(self, name: str, target: Target, stage: str, exc: BaseException, *,
               retry_in: float, span: Span | None = None) -> None:  # fmt: skip
        super().failed(name, target, stage, exc, retry_in=retry_in, span=span)
        h = self.held.get(name)
        if h is None:
            return
        now, gen = self.now(), h.generation
        kind = exc.reason if isinstance(exc, FleetSLOError) else "bug"
        reason = "".join(p.capitalize() for p in str(kind).replace("-", "_").split("_")) or "Failed"
        base = self.last.get(name, FleetSLOStatus())
        failing = [
            condition(ConditionType.READY, False, reason, f"{stage} failed: {exc}", now=now, generation=gen),
            condition(ConditionType.ACTUATION_FAILING, stage == "apply", reason, str(exc),
                      now=now, generation=gen),
        ]  # fmt: skip
        self._write(h, base.model_copy(update={"conditions": _merge(base.conditions, failing)}))

    def status_of(self, r: Reconcile, h: Held) -> FleetSLOStatus:
        now, spec = self.now(), h.slo.spec
        advisory = self.dry_run or spec.mode == Mode.ADVISORY
        external = spec.replicas.actuator == ReplicaActuatorKind.EXTERNAL
        obs = r.observation
        attainments = [a for a in (obs.ttft_attainment, obs.tpot_attainment) if a is not None]
        previous = self.last.get(r.name)
        d = r.decision
        return FleetSLOStatus(
            observedGeneration=h.generation,
            mode="advisory" if advisory else "external" if external else "enforce",
            replicas=ReplicaStatus(
                current=r.before.scale.desired, desired=d.replicas, ready=r.before.scale.counts.ready
            ),
            batchLimit=d.batch_limit if d.batch_limit is not None else r.before.batch_limit,
            observed=ObservedLatency(
                ttftSeconds=obs.ttft.at(spec.objectives.ttft.quantile),
                tpotSeconds=obs.tpot.at(spec.objectives.tpot.quantile),
                attainment=min(attainments) if attainments else None,
                requestsPerSecond=obs.request_rate,
            ),
            lastDecision=LastDecision(
                time=now,
                reason=d.reason.value,
                message=d.message[:1024],
                replicas=d.replicas,
                batchLimit=d.batch_limit,
                applied=r.outcome.changed and not r.outcome.dry_run,
            ),
            conflictsWith=str(h.conflict) if h.conflict else None,
            conditions=_merge(previous.conditions if previous else (), self._conditions(r, h, advisory, now)),
            capacityModel=self.capacity_state(r.name),
        )

    def _conditions(self, r: Reconcile, h: Held, advisory: bool, now: str) -> list[Condition]:
        gen, d = h.generation, r.decision
        degraded = d.reason in DEGRADED_REASONS
        if not advisory:
            why = "Enforcing"
        else:
            why = "Conflict" if h.conflict else "DryRun" if self.dry_run else "ModeAdvisory"
        conflict = f"{h.conflict} scales this workload" if h.conflict else ""
        return [
            condition(ConditionType.READY, True, "Reconciling", d.message, now=now, generation=gen),
            condition(ConditionType.DEGRADED, degraded, d.reason.value if degraded else "DataComplete",
                      d.message if degraded else "", now=now, generation=gen),
            condition(ConditionType.ADVISORY, advisory, why, now=now, generation=gen),
            condition(ConditionType.ACTUATION_FAILING, False, "Applied", now=now, generation=gen),
            condition(ConditionType.CONFLICT, h.conflict is not None,
                      "OtherAutoscaler" if h.conflict else "None", conflict, now=now, generation=gen),
        ]  # fmt: skip

    def _write(self, h: Held, status: FleetSLOStatus) -> None:
        assert h.resource is not None
        self.last[h.slo.metadata.name] = status
        try:
            self.writer.write_status(*h.resource, status)
        except FleetSLOError as exc:
            log.warning("could not write the status of FleetSLO %s/%s: %s", *h.resource, exc)


def _merge(old: Sequence[Condition], new: Sequence[Condition]) -> tuple[Condition, ...]:
    """``new`` conditions, keeping an old one's lastTransitionTime while its status is unchanged
    (as metav1.Condition means it: when the status last flipped, not when it was last written)."""
    before = {c.type: c for c in old}
    merged = {c.type: c for c in old}
    for fresh in new:
        prior = before.get(fresh.type)
        if prior is not None and prior.status == fresh.status:
            fresh = fresh.model_copy(update={"lastTransitionTime": prior.lastTransitionTime})  # noqa: PLW2901
        merged[fresh.type] = fresh
    return tuple(merged[t] for t in ConditionType if t in merged)
