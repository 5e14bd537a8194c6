"""The record of every reconcile: a JSON log line, a Kubernetes Event, metrics and a trace span.

* every decision is one structured log line (``event: decision``) with what was seen, what was
  decided, why (``reason``, the same token everywhere) and what was written;
* a change that was actually written, and a permanent failure, become a Kubernetes Event on the
  target (reason = ``Decision.reason``, or ``FailedGetScale``/``FailedGetMetrics``/``FailedRescale``
  as the HPA names its failures) — advisory mode writes none, as it writes nothing at all;
* the controller metrics (decisions by reason, desired/current/limit per target, errors);
* one OpenTelemetry span per reconcile with the same facts as attributes.

Auditing never fails a tick: an Event the API refuses is logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from fleetslo.control.actuators.fleet import FleetOutcome, FleetState
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.core.errors import FleetSLOError, Permanent
from fleetslo.core.model import Decision, Observation
from fleetslo.core.spec import Target

log = logging.getLogger("fleetslo.decision")

#: Event reasons for failures, by the stage that failed (the HPA's names for the same things).
FAILURE_REASONS = {"read": "FailedGetScale", "observe": "FailedGetMetrics", "apply": "FailedRescale"}


class EventSink(Protocol):
    def event(self, target: Target, reason: str, message: str, *, warning: bool = False) -> None: ...


@dataclass(frozen=True, slots=True)
class Reconcile:
    """What one reconcile of one target saw, decided and did."""

    name: str
    target: Target
    before: FleetState
    observation: Observation
    decision: Decision
    outcome: FleetOutcome
    observe_error: FleetSLOError | None = None


class Auditor:
    """Writes the record of each reconcile to the log, the API, the metrics and the tracer."""

    def __init__(
        self,
        metrics: ControllerMetrics,
        events: EventSink | None = None,
        tracer: trace.Tracer | None = None,
        *,
        decision_log: logging.Logger = log,
    ) -> None:
        self.metrics = metrics
        self.events = events
        self.tracer = tracer or trace.NoOpTracer()
        #: Where the decision lines go (the simulator sends its thousands to a debug-only logger).
        self.decision_log = decision_log

    @contextmanager
    def span(self, name: str, target: Target) -> Iterator[Span]:
        attributes = {"fleetslo.target": name, "k8s.namespace.name": target.namespace,
                      "fleetslo.workload": f"{target.kind.value}/{target.name}"}  # fmt: skip
        with self.tracer.start_as_current_span("fleetslo.reconcile", attributes=attributes) as span:
            yield span

    def decided(self, r: Reconcile, span: Span | None = None) -> None:
        fields = decision_fields(r)
        self.decision_log.info(
            f"{r.name}: {r.decision.reason}: {r.decision.message}", extra={"fields": fields}
        )
        self.metrics.decided(r.name, r.decision.reason.value)
        limit = r.decision.batch_limit if r.decision.batch_limit is not None else r.before.batch_limit
        self.metrics.state(
            r.name, desired=r.decision.replicas, current=r.before.scale.desired, batch_limit=limit
        )
        if span is not None:
            span.set_attributes({f"fleetslo.{k}": v for k, v in fields.items() if _otel_value(v)})
        if r.outcome.changed:
            self._event(r.target, r.decision.reason.value, _change_message(r), warning=False)

    def observe_failed(self, name: str, target: Target, exc: FleetSLOError) -> None:
        """The source failed; the policy sees an observation without signals (see ``loop``)."""
        self.metrics.observe_errors.labels(name, exc.reason).inc()
        fields = {"event": "observe_failed", "target": name, "error": exc.reason}
        log.warning(f"{name}: observation failed, deciding on no data: {exc}", extra={"fields": fields})

    def failed(
        self,
        name: str,
        target: Target,
        stage: str,
        exc: BaseException,
        *,
        retry_in: float,
        span: Span | None = None,
    ) -> None:
        """A reconcile failed at ``stage``; it is retried in ``retry_in`` seconds."""
        kind = exc.reason if isinstance(exc, FleetSLOError) else "bug"
        permanent = isinstance(exc, Permanent)
        # Failed reads and writes are counted by the Measured wrappers around the actuators.
        if stage == "observe":
            self.metrics.observe_errors.labels(name, kind).inc()
        elif stage == "decide":
            self.metrics.actuation_errors.labels(name, "policy_error").inc()
        fields = {"event": "reconcile_failed", "target": name, "stage": stage, "error": kind,
                  "permanent": permanent, "retry_in": retry_in}  # fmt: skip
        log.log(logging.ERROR if permanent or kind == "bug" else logging.WARNING,
                f"{name}: {stage} failed ({kind}), retrying in {retry_in:g}s: {exc}",
                extra={"fields": fields}, exc_info=kind == "bug")  # fmt: skip
        if span is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{stage}: {kind}"))
        if permanent:
            self._event(target, FAILURE_REASONS.get(stage, "Failed"), str(exc), warning=True)

    def _event(self, target: Target, reason: str, message: str, *, warning: bool) -> None:
        if self.events is None:
            return
        try:
            self.events.event(target, reason, message, warning=warning)
        except FleetSLOError as exc:
            log.warning("could not record event %s on %s: %s", reason, target.name, exc)


class RecordingAuditor(Auditor):
    """The usual audit (log line, metrics, span; no Events), and every reconcile handed on.

    ``on_decided`` gets each audited decision, ``on_failed`` (when given) the stage and error of
    each failed reconcile: how the simulator and the demo turn the controller's reconciles into
    their records.
    """

    def __init__(
        self,
        metrics: ControllerMetrics,
        on_decided: Callable[[Reconcile], None],
        on_failed: Callable[[str, BaseException], None] | None = None,
        *,
        decision_log: logging.Logger = log,
    ) -> None:
        super().__init__(metrics, events=None, decision_log=decision_log)
        self.on_decided, self.on_failed = on_decided, on_failed

    def decided(self, r: Reconcile, span: Span | None = None) -> None:
        super().decided(r, span)
        self.on_decided(r)

    def failed(
        self,
        name: str,
        target: Target,
        stage: str,
        exc: BaseException,
        *,
        retry_in: float,
        span: Span | None = None,
    ) -> None:
        super().failed(name, target, stage, exc, retry_in=retry_in, span=span)
        if self.on_failed is not None:
            self.on_failed(stage, exc)


def decision_fields(r: Reconcile) -> dict[str, Any]:
    """The audit line's fields: what was seen, decided, and done."""
    obs, d, scale = r.observation, r.decision, r.before.scale
    return {
        "event": "decision", "target": r.name, "reason": d.reason.value, "message": d.message,
        "workload": f"{r.target.kind.value}/{r.target.namespace}/{r.target.name}",
        "replicas_before": scale.desired, "replicas_ready": scale.counts.ready,
        "replicas_starting": scale.counts.starting, "replicas_wanted": d.replicas,
        "replicas_written": r.outcome.replicas_written,
        "batch_limit_before": r.before.batch_limit, "batch_limit_wanted": d.batch_limit,
        "predicted_ttft_p90": d.predicted_ttft_p90, "predicted_tpot_p90": d.predicted_tpot_p90,
        "ttft_p90": obs.ttft.p90, "tpot_p90": obs.tpot.p90, "request_rate": obs.request_rate,
        "waiting": obs.waiting, "running": obs.running, "data_age": obs.data_age,
        "replicas_reporting": obs.replicas_reporting,
        "observe_error": r.observe_error.reason if r.observe_error else None,
        "changed": r.outcome.changed, "dry_run": r.outcome.dry_run,
        "drained": list(r.outcome.drained), "actions": r.outcome.messages,
    }  # fmt: skip


def _change_message(r: Reconcile) -> str:
    return "; ".join([r.decision.message, *(m for m in r.outcome.messages)])


def _otel_value(value: object) -> bool:
    return isinstance(value, str | bool | int | float) or (
        isinstance(value, list) and all(isinstance(v, str) for v in value) and bool(value)
    )
