"""The audit record: one JSON line per decision, Events only for real changes and permanent failures,
metrics, and an OpenTelemetry span per reconcile."""

from __future__ import annotations

import json
import logging

import pytest
from fleetslo.control.actuators.fleet import FleetOutcome, FleetState
from fleetslo.control.audit import Auditor, Reconcile, RecordingAuditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.ports import ActuationResult, ScaleState
from fleetslo.core.errors import ApiUnavailable, Forbidden
from fleetslo.core.logs import JsonFormatter
from fleetslo.core.model import Decision, Observation, Quantiles, Reason, ReplicaCounts
from fleetslo.testing import FakeEventSink
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.loop_support import make_slo

SLO = make_slo("qwen")
TARGET = SLO.spec.target
BEFORE = FleetState(ScaleState(4, ReplicaCounts(4)), 64)
OBS = Observation("qwen", 100.0, 60.0, ReplicaCounts(4), ttft=Quantiles(p90=3.1), request_rate=12.0)
UP = Decision(6, 64, Reason.SCALE_UP_SLO_BREACH, "p90 TTFT 3.1s > 2s", predicted_ttft_p90=1.8)


def reconcile(outcome: FleetOutcome) -> Reconcile:
    return Reconcile("qwen", TARGET, BEFORE, OBS, UP, outcome)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def auditor(spans: InMemorySpanExporter) -> tuple[Auditor, FakeEventSink, ControllerMetrics]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics, events = ControllerMetrics(), FakeEventSink()
    return Auditor(metrics, events, provider.get_tracer("test")), events, metrics


def test_a_change_is_one_json_line_an_event_metrics_and_a_span(
    auditor: tuple[Auditor, FakeEventSink, ControllerMetrics],
    spans: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    audit, events, metrics = auditor
    outcome = FleetOutcome(ActuationResult(True, "scaled from 4 to 6"), replicas_written=6)
    with caplog.at_level(logging.INFO, logger="fleetslo.decision"), audit.span("qwen", TARGET) as span:
        audit.decided(reconcile(outcome), span)
    line = json.loads(JsonFormatter().format(caplog.records[0]))
    assert line["event"] == "decision" and line["reason"] == "ScaleUpSLOBreach" and line["target"] == "qwen"
    assert (line["replicas_before"], line["replicas_wanted"], line["replicas_written"]) == (4, 6, 6)
    assert line["ttft_p90"] == 3.1 and line["predicted_ttft_p90"] == 1.8 and line["changed"] is True
    assert events.events == [("qwen", "ScaleUpSLOBreach", "p90 TTFT 3.1s > 2s; scaled from 4 to 6", False)]
    get = metrics.registry.get_sample_value
    assert get("fleetslo_controller_decisions_total", {"target": "qwen", "reason": "ScaleUpSLOBreach"}) == 1
    assert get("fleetslo_controller_desired_replicas", {"target": "qwen"}) == 6
    assert get("fleetslo_controller_batch_limit", {"target": "qwen"}) == 64
    (finished,) = spans.get_finished_spans()
    assert finished.name == "fleetslo.reconcile"
    assert finished.attributes is not None
    assert finished.attributes["fleetslo.reason"] == "ScaleUpSLOBreach"
    assert finished.attributes["fleetslo.replicas_wanted"] == 6


def test_a_hold_or_a_dry_run_writes_no_event(
    auditor: tuple[Auditor, FakeEventSink, ControllerMetrics],
) -> None:
    audit, events, _ = auditor
    audit.decided(reconcile(FleetOutcome()))
    audit.decided(reconcile(FleetOutcome(ActuationResult(False, "would scale", dry_run=True))))
    assert events.events == []


def test_failures_count_and_only_permanent_ones_become_warning_events(
    auditor: tuple[Auditor, FakeEventSink, ControllerMetrics], spans: InMemorySpanExporter
) -> None:
    audit, events, metrics = auditor
    with audit.span("qwen", TARGET) as span:
        audit.failed(
            "qwen", TARGET, "apply", Forbidden("cannot patch deployments/scale"), retry_in=600, span=span
        )
    audit.failed("qwen", TARGET, "read", ApiUnavailable("timeout"), retry_in=2)
    audit.failed("qwen", TARGET, "decide", ZeroDivisionError("bug"), retry_in=1)
    assert events.events == [("qwen", "FailedRescale", "cannot patch deployments/scale", True)]
    get = metrics.registry.get_sample_value
    assert get("fleetslo_controller_actuation_errors_total", {"target": "qwen", "kind": "policy_error"}) == 1
    (finished,) = spans.get_finished_spans()
    assert finished.status.status_code == StatusCode.ERROR and finished.events[0].name == "exception"


def test_an_event_the_api_refuses_never_fails_the_tick(
    auditor: tuple[Auditor, FakeEventSink, ControllerMetrics],
) -> None:
    audit, events, _ = auditor

    def refuse(*args: object, **kwargs: object) -> None:
        raise Forbidden("cannot create events")

    events.event = refuse  # type: ignore[method-assign]
    audit.decided(reconcile(FleetOutcome(ActuationResult(True, "scaled"))))


def test_a_recording_auditor_audits_and_hands_each_reconcile_on(caplog: pytest.LogCaptureFixture) -> None:
    decided: list[Reconcile] = []
    failed: list[tuple[str, BaseException]] = []
    quiet = logging.getLogger("tests.audit.quiet")

    def on_failed(stage: str, exc: BaseException) -> None:
        failed.append((stage, exc))

    audit = RecordingAuditor(ControllerMetrics(), decided.append, on_failed, decision_log=quiet)
    r, exc = reconcile(FleetOutcome(ActuationResult(True, "scaled"))), ApiUnavailable("timeout")
    with caplog.at_level(logging.INFO):
        audit.decided(r)
        audit.failed("qwen", TARGET, "read", exc, retry_in=2)
    assert decided == [r] and failed == [("read", exc)]
    lines = [rec.name for rec in caplog.records if rec.getMessage().startswith("qwen: ScaleUp")]
    assert lines == [quiet.name]
    get = audit.metrics.registry.get_sample_value
    assert get("fleetslo_controller_decisions_total", {"target": "qwen", "reason": "ScaleUpSLOBreach"}) == 1
    # Without ``on_failed`` a failure is only audited.
    RecordingAuditor(ControllerMetrics(), decided.append).failed("qwen", TARGET, "read", exc, retry_in=2)
    assert failed == [("read", exc)]


def test_the_leader_gauge_is_read_at_scrape_time() -> None:
    leading = [False]
    metrics = ControllerMetrics(lambda: leading[0])
    assert metrics.registry.get_sample_value("fleetslo_controller_leader") == 0.0
    leading[0] = True
    assert metrics.registry.get_sample_value("fleetslo_controller_leader") == 1.0
    metrics.state("gone", desired=3, current=2, batch_limit=None)
    metrics.forget("gone")
    assert (
        metrics.registry.get_sample_value("fleetslo_controller_desired_replicas", {"target": "gone"}) is None
    )
