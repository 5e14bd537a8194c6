"""The loop hands policies NaN as missing: a NaN series never crashes a decision or moves a fleet."""

from __future__ import annotations

import math

import pytest
from fleetslo.control.actuators.fleet import FleetActuator
from fleetslo.control.audit import Auditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.leader import AlwaysLeader
from fleetslo.control.loop import Binding, Controller, Outcome
from fleetslo.core.model import Observation, Quantiles, ReplicaCounts
from fleetslo.policy.registry import make_policy
from fleetslo.testing import FakeReplicaActuator, FakeSource

from tests.loop_support import make_slo

NAN = math.nan


def poisoned(slo, replicas: ReplicaCounts, batch_limit, now: float) -> Observation:  # type: ignore[no-untyped-def]
    return Observation(
        slo.metadata.name, now, 60.0, replicas, batch_limit=batch_limit, replicas_reporting=replicas.ready,
        data_age=5.0, ttft=Quantiles(NAN, NAN, NAN), itl=Quantiles(p90=NAN), tpot=Quantiles(p90=math.inf),
        request_rate=NAN, prompt_tokens_rate=NAN, generation_tokens_rate=NAN, running=NAN, waiting=NAN,
        kv_cache_usage=NAN, gpu_utilization=NAN,
    )  # fmt: skip


def test_non_finite_signals_become_missing_and_nothing_else_changes() -> None:
    obs = poisoned(make_slo("a"), ReplicaCounts(4), None, 10.0).finite_only()
    assert obs.ttft == Quantiles() and obs.itl == Quantiles() and obs.tpot == Quantiles()
    assert obs.request_rate is None and obs.running is None and obs.gpu_utilization is None
    assert obs.replicas_reporting == 4 and obs.data_age == 5.0 and obs.window == 60.0
    whole = Observation("a", 1.0, 60.0, ReplicaCounts(2), request_rate=3.0)
    assert whole.finite_only() is whole


@pytest.mark.parametrize("policy", ["fleetslo", "hpa-util", "hpa-running", "keda-waiting", "llmd-slo"])
def test_every_policy_decides_on_a_nan_observation_without_scaling(policy: str) -> None:
    slo = make_slo("a")
    replicas = FakeReplicaActuator()
    replicas.scale(slo.spec.target, 4)
    replicas.settle()
    controller = Controller(
        [Binding(slo, make_policy(policy, slo.spec), FakeSource(poisoned), FleetActuator(replicas))],
        Auditor(ControllerMetrics()),
        leader=AlwaysLeader(),
    )
    for t in range(0, 900, 15):
        assert controller.tick_target("a", float(t)) in (Outcome.DECIDED, Outcome.NOT_DUE)
    assert replicas.read(slo.spec.target).desired == 4
