"""The order of operations on one target: batch limit first, drain before scale-down, undo on failure."""

from __future__ import annotations

import pytest
from fleetslo.control.actuators.fleet import FleetActuator, FleetState
from fleetslo.control.ports import ScaleState
from fleetslo.core.errors import ApiUnavailable, Forbidden
from fleetslo.core.model import Decision, Reason, ReplicaCounts
from fleetslo.testing import FakeBatchLimitActuator, FakeDrainer, FakePodMarker, FakeReplicaActuator

from tests.loop_support import make_slo

TARGET = make_slo("qwen").spec.target


def decision(replicas: int, limit: int | None = None) -> Decision:
    return Decision(replicas, limit, Reason.SCALE_DOWN_LOW_LOAD, "test")


def fleet(desired: int, ready: int) -> tuple[FleetActuator, FakeReplicaActuator, FakeDrainer, FakePodMarker]:
    replicas, drainer, marker = FakeReplicaActuator(), FakeDrainer(), FakePodMarker()
    replicas.set(TARGET, desired, ready)
    return FleetActuator(replicas, FakeBatchLimitActuator(64), drainer, marker), replicas, drainer, marker


def state(desired: int, ready: int, limit: int | None = 64) -> FleetState:
    return FleetState(ScaleState(desired, ReplicaCounts(min(ready, desired), max(0, desired - ready))), limit)


def test_scale_down_drains_marks_and_then_scales() -> None:
    actuator, replicas, drainer, marker = fleet(6, 6)
    outcome = actuator.apply(TARGET, decision(4), state(6, 6))
    assert drainer.drained == [("infer/qwen", ["qwen-drained-1", "qwen-drained-2"])]
    assert marker.marked == [("infer/qwen", ["qwen-drained-1", "qwen-drained-2"])]
    assert replicas.writes == [("infer/qwen", 4)]
    assert outcome.changed and outcome.drained == ("qwen-drained-1", "qwen-drained-2")


def test_starting_replicas_are_removed_first_without_draining() -> None:
    actuator, replicas, drainer, _ = fleet(6, 4)  # 2 still starting
    actuator.apply(TARGET, decision(3), state(6, 4))
    assert drainer.drained == [("infer/qwen", ["qwen-drained-1"])]  # 3 removed: 2 starting + 1 drained
    assert replicas.writes == [("infer/qwen", 3)]


def test_a_short_drain_scales_down_only_by_what_was_drained() -> None:
    actuator, replicas, drainer, _ = fleet(6, 6)
    drainer.short_by = 1
    outcome = actuator.apply(TARGET, decision(3), state(6, 6))
    assert replicas.writes == [("infer/qwen", 4)] and outcome.replicas_written == 4


def test_nothing_drained_means_no_scale_down_yet() -> None:
    actuator, replicas, drainer, _ = fleet(2, 2)
    drainer.short_by = 5
    outcome = actuator.apply(TARGET, decision(1), state(2, 2))
    assert replicas.writes == [] and not outcome.changed
    assert outcome.replicas is not None and "waits" in outcome.replicas.message


def test_a_failed_scale_down_puts_the_drained_pods_back() -> None:
    actuator, replicas, drainer, marker = fleet(4, 4)
    replicas.errors[("scale", "infer/qwen")] = ApiUnavailable("boom")
    with pytest.raises(ApiUnavailable):
        actuator.apply(TARGET, decision(3), state(4, 4))
    assert drainer.resumed == [("infer/qwen", ["qwen-drained-1"])]
    assert marker.unmarked == [("infer/qwen", ["qwen-drained-1"])]


def test_scale_up_needs_no_drain_and_unchanged_knobs_are_not_written() -> None:
    actuator, replicas, drainer, _ = fleet(2, 2)
    outcome = actuator.apply(TARGET, decision(5, 64), state(2, 2, 64))
    assert replicas.writes == [("infer/qwen", 5)] and drainer.drained == []
    assert outcome.batch_limit is None  # 64 already
    assert actuator.apply(TARGET, decision(5, 64), state(5, 5, 64)).replicas is None


def test_the_batch_limit_moves_even_when_scaling_fails_and_the_permanent_error_wins() -> None:
    replicas, batch = FakeReplicaActuator(), FakeBatchLimitActuator(64)
    replicas.errors[("scale", "infer/qwen")] = Forbidden("rbac")
    actuator = FleetActuator(replicas, batch)
    with pytest.raises(Forbidden):
        actuator.apply(TARGET, decision(5, 32), state(2, 2, 64))
    assert batch.writes == [("infer/qwen", 32)]
    batch.error = ApiUnavailable("gate down")
    with pytest.raises(Forbidden):  # both failed: the one a person must fix is reported
        actuator.apply(TARGET, decision(5, 16), state(2, 2, 32))


def test_without_a_drainer_a_scale_down_is_one_write() -> None:
    replicas = FakeReplicaActuator()
    replicas.set(TARGET, 4)
    FleetActuator(replicas).apply(TARGET, decision(2), state(4, 4))
    assert replicas.writes == [("infer/qwen", 2)]
