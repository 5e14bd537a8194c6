"""Writes are fenced by the Lease and made against the count they were planned on (kmock).

Defect 5 of issue 15: a controller that lost its Lease while it waited on a drain still wrote the
scale. Defect 6: a merge patch without ``resourceVersion`` wrote a stale count over a concurrent
scale (8 → 12 during a drain, fleetslo wrote 7: four pods went without being drained).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fleetslo.control.actuators.fleet import FleetActuator
from fleetslo.control.actuators.kubernetes import KubeReplicaActuator
from fleetslo.control.audit import Auditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.kube.lease import KubeLeaseLock
from fleetslo.control.kube.workloads import Workloads
from fleetslo.control.leader import LeaderElector
from fleetslo.control.loop import Binding, Controller, Outcome
from fleetslo.control.ports import Deposed
from fleetslo.core.errors import Conflict
from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec, Target
from fleetslo.testing import FakeClock, FakeDrainer, FakeSource

from tests.adapters.kube.kapi import KubeApi
from tests.loop_support import make_slo

DEPLOYMENTS = "apps/v1/deployments"
LEASES = "coordination.k8s.io/v1/leases"
QWEN = Target(namespace="infer", name="qwen", model_name="qwen")


def deployment(replicas: int, version: str = "100") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "qwen", "namespace": "infer", "resourceVersion": version},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "qwen"}}},
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }  # fmt: skip


def elector(kapi: KubeApi, identity: str, clock: FakeClock) -> LeaderElector:
    lock = KubeLeaseLock(kapi.client(), "fleetslo", "fleetslo-controller")
    return LeaderElector(lock, identity, clock=clock, wall=lambda: 1_800_000_000.0 + clock())


class Fixed:
    """Always four replicas: from eight, a scale-down that drains four."""

    name, interval = "fixed", 5.0

    def initial_state(self, spec: FleetSLOSpec) -> None:
        return None

    def decide(self, obs: Observation, state: None, spec: FleetSLOSpec, now: float) -> tuple[Decision, None]:
        return Decision(4, None, Reason.FIXED_SIZE, "four"), None


class SlowDrainer(FakeDrainer):
    """A drain during which the world moves on (``meanwhile`` runs before it returns)."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        super().__init__()
        self.meanwhile = meanwhile

    def drain(self, target: Target, count: int) -> list[str]:
        names = super().drain(target, count)
        self.meanwhile()
        return names


def scale_patches(kapi: KubeApi) -> list[Any]:
    return [r for r in kapi.requests("patch") if str(r.url.path).endswith("/scale")]


def test_a_controller_that_loses_the_lease_during_a_drain_never_writes_the_scale(kapi: KubeApi) -> None:
    kapi.put(DEPLOYMENTS, deployment(8))
    clock = FakeClock(0.0)
    a, b = elector(kapi, "a", clock), elector(kapi, "b", clock)

    def thirty_seconds_pass() -> None:  # a waits on its drain and renews nothing; b takes over
        for _ in range(15):
            clock.advance(2.0)
            b.step()

    drainer = SlowDrainer(thirty_seconds_pass)
    fleet = FleetActuator(KubeReplicaActuator(Workloads(kapi.client())), drainer=drainer)
    controller = Controller([Binding(make_slo("qwen"), Fixed(), FakeSource.whole(), fleet)],
                            Auditor(metrics := ControllerMetrics()), leader=a)  # fmt: skip
    assert a.step() and not b.step()
    assert controller.tick_target("qwen", clock()) == Outcome.FOLLOWER
    assert b.is_leader()
    assert scale_patches(kapi) == []  # the deposed controller wrote nothing
    assert kapi.get(DEPLOYMENTS, "infer", "qwen")["spec"]["replicas"] == 8
    assert drainer.resumed == [("infer/qwen", drainer.drained[0][1])]  # and put its pods back
    assert (
        metrics.registry.get_sample_value(
            "fleetslo_controller_actuation_errors_total", {"target": "qwen", "kind": "not_leader"}
        )
        == 1
    )


def test_the_fence_reads_the_lease_itself_not_only_the_last_renewal(kapi: KubeApi) -> None:
    clock = FakeClock(0.0)
    a = elector(kapi, "a", clock)
    assert a.step()
    assert a.fence() == pytest.approx(10.0)  # the renew deadline, all of it left
    spec = dict(kapi.get(LEASES, "fleetslo", "fleetslo-controller")["spec"])
    meta = {"name": "fleetslo-controller", "namespace": "fleetslo", "resourceVersion": "9"}
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta}
    kapi.put(LEASES, {**lease, "spec": {**spec, "holderIdentity": "someone-else"}})
    assert a.is_leader()  # our own renewal is fresh, yet the Lease says otherwise
    with pytest.raises(Deposed, match="held by someone-else"):
        a.fence()


def test_a_renewal_older_than_the_deadline_fences_without_asking_the_api(kapi: KubeApi) -> None:
    clock = FakeClock(0.0)
    a = elector(kapi, "a", clock)
    assert a.step()
    clock.advance(10.0)
    before = len(kapi.requests("get"))
    with pytest.raises(Deposed):
        a.fence()
    assert len(kapi.requests("get")) == before


def test_a_count_changed_since_the_plan_is_not_written(kapi: KubeApi) -> None:
    kapi.put(DEPLOYMENTS, deployment(8))
    actuator = KubeReplicaActuator(Workloads(kapi.client()))
    planned = actuator.read(QWEN)
    kapi.put(DEPLOYMENTS, deployment(12, version="101"))  # someone scales 8 -> 12 meanwhile
    with pytest.raises(Conflict, match="from 8 to 12"):
        actuator.scale(QWEN, 7, expected=planned.desired)
    assert kapi.get(DEPLOYMENTS, "infer", "qwen")["spec"]["replicas"] == 12
    assert scale_patches(kapi) == []


def test_the_scale_patch_is_a_precondition_on_the_version_just_read(kapi: KubeApi) -> None:
    kapi.put(DEPLOYMENTS, deployment(8, version="100"))
    actuator = KubeReplicaActuator(Workloads(kapi.client()))
    assert actuator.scale(QWEN, 7, expected=8).changed
    (patch,) = scale_patches(kapi)
    assert patch.data == {"metadata": {"resourceVersion": "100"}, "spec": {"replicas": 7}}


def test_a_concurrent_scale_during_a_drain_is_re_planned_never_overwritten(kapi: KubeApi) -> None:
    kapi.put(DEPLOYMENTS, deployment(8))
    scaled = []

    def someone_scales_to_twelve() -> None:
        if not scaled:
            kapi.put(DEPLOYMENTS, deployment(12, version="101"))
            scaled.append(12)

    drainer = SlowDrainer(someone_scales_to_twelve)
    fleet = FleetActuator(KubeReplicaActuator(Workloads(kapi.client())), drainer=drainer)
    controller = Controller([Binding(make_slo("qwen"), Fixed(), FakeSource.whole(), fleet)],
                            Auditor(ControllerMetrics()), leader=_Always())  # fmt: skip
    assert controller.tick_target("qwen", 0.0) == Outcome.DECIDED
    # First plan (8 -> 4, drained 4) refused; the re-plan from 12 drains 8 and writes 4.
    assert [len(names) for _, names in drainer.drained] == [4, 8]
    assert drainer.resumed == [("infer/qwen", drainer.drained[0][1])]
    assert [p.data["spec"]["replicas"] for p in scale_patches(kapi)] == [4]
    assert kapi.get(DEPLOYMENTS, "infer", "qwen")["spec"]["replicas"] == 4


class _Always:
    def is_leader(self) -> bool:
        return True

    def fence(self) -> float:
        return float("inf")
