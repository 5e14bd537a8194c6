"""Dry-run and measured wrappers: same protocols, no writes in a dry run, every call measured."""

from __future__ import annotations

import logging

import pytest
from fleetslo.control.actuators.wrappers import (
    DryRunBatchLimit,
    DryRunDrainer,
    DryRunMarker,
    DryRunReplicas,
    MeasuredDrainer,
    MeasuredReplicas,
)
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.core.errors import Forbidden
from fleetslo.testing import FakeBatchLimitActuator, FakeClock, FakeDrainer, FakeReplicaActuator

from tests.loop_support import make_slo

TARGET = make_slo("qwen").spec.target


def test_dry_run_reads_through_and_writes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    real, batch = FakeReplicaActuator(initial=3), FakeBatchLimitActuator(64)
    replicas, limit = DryRunReplicas(real), DryRunBatchLimit(batch)
    with caplog.at_level(logging.INFO, logger="fleetslo.actuation"):
        assert replicas.read(TARGET).desired == 3
        result = replicas.scale(TARGET, 7)
        assert limit.read_limit(TARGET) == 64
        limit.set_limit(TARGET, 16)
        names = DryRunDrainer().drain(TARGET, 2)
        DryRunMarker().mark(TARGET, names)
    assert result.dry_run and not result.changed and "would scale qwen to 7" in result.message
    assert real.writes == [] and batch.writes == [] and len(names) == 2
    fields = [r.fields for r in caplog.records]  # type: ignore[attr-defined]
    assert [f["action"] for f in fields] == ["scale", "set_limit", "drain", "mark"]
    assert fields[0]["replicas"] == 7 and fields[0]["target"] == "qwen"


def test_measured_records_latency_and_error_kind_and_reraises() -> None:
    metrics, clock = ControllerMetrics(), FakeClock(0.0)
    real = FakeReplicaActuator()
    real.errors[("scale", "infer/qwen")] = Forbidden("rbac")
    measured = MeasuredReplicas(real, metrics, "qwen", clock)
    measured.read(TARGET)
    with pytest.raises(Forbidden):
        measured.scale(TARGET, 4)
    get = metrics.registry.get_sample_value
    assert get("fleetslo_controller_actuation_errors_total", {"target": "qwen", "kind": "forbidden"}) == 1
    assert get("fleetslo_controller_actuation_duration_seconds_count", {"operation": "read"}) == 1
    assert get("fleetslo_controller_actuation_duration_seconds_count", {"operation": "scale"}) == 1


def test_measured_drainer_passes_names_through() -> None:
    metrics = ControllerMetrics()
    assert MeasuredDrainer(FakeDrainer(), metrics, "qwen").drain(TARGET, 1) == ["qwen-drained-1"]
