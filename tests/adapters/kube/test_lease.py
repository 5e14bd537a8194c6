"""Leader election on a real ``coordination.k8s.io/v1`` Lease (kmock + resourceVersion), two controllers.

Virtual time: each controller's clock is a ``FakeClock`` that the test moves, so "the leader died
15 seconds ago" takes microseconds. One real-time test runs both electors on threads and checks that
there is never more than one leader at once.
"""

from __future__ import annotations

import threading
import time

import pytest
from fleetslo.control.actuators.fleet import FleetActuator
from fleetslo.control.audit import Auditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.kube.lease import KubeLeaseLock, LeaseRecord
from fleetslo.control.leader import LeaderElector
from fleetslo.control.loop import Binding, Controller, Outcome
from fleetslo.core.errors import Conflict
from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.testing import FakeClock, FakeReplicaActuator, FakeSource

from tests.adapters.kube.kapi import KubeApi
from tests.loop_support import make_slo


def elector(kapi: KubeApi, identity: str, clock: FakeClock, **timing: float) -> LeaderElector:
    lock = KubeLeaseLock(kapi.client(), "fleetslo", "fleetslo-controller")
    return LeaderElector(lock, identity, clock=clock, wall=lambda: 1_800_000_000.0 + clock(), **timing)


def test_the_first_candidate_creates_the_lease_and_the_second_follows(kapi: KubeApi) -> None:
    clock = FakeClock(0.0)
    a, b = elector(kapi, "a", clock), elector(kapi, "b", clock)
    assert a.step() and not b.step()
    lease = kapi.get("coordination.k8s.io/v1/leases", "fleetslo", "fleetslo-controller")
    assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["metadata"]["resourceVersion"]


def test_a_follower_takes_over_within_the_lease_duration_of_the_leaders_last_renewal(kapi: KubeApi) -> None:
    clock = FakeClock(0.0)
    a, b = elector(kapi, "a", clock), elector(kapi, "b", clock)
    for _ in range(5):  # a leads and renews every 2 s; b watches
        assert a.step() and not b.step()
        clock.advance(2.0)
    last_renewal = clock() - 2.0
    a_stepped_down_at = b_took_over_at = None
    while b_took_over_at is None:  # a is gone (no renewals, no release); b keeps trying every 2 s
        if a_stepped_down_at is None and not a.is_leader():
            a_stepped_down_at = clock()
        if b.step():
            b_took_over_at = clock()
        clock.advance(2.0)
    assert a_stepped_down_at is not None and a_stepped_down_at < b_took_over_at  # never two leaders
    assert b_took_over_at - last_renewal <= 15.0 + 2.0  # lease duration + one retry period
    spec = kapi.get("coordination.k8s.io/v1/leases", "fleetslo", "fleetslo-controller")["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


def test_a_released_lease_is_taken_at_the_next_try(kapi: KubeApi) -> None:
    clock = FakeClock(0.0)
    a, b = elector(kapi, "a", clock), elector(kapi, "b", clock)
    assert a.step() and not b.step()
    a.release()
    assert not a.is_leader()
    clock.advance(2.0)
    assert b.step()


def test_of_two_writers_with_the_same_resource_version_only_one_wins(kapi: KubeApi) -> None:
    first = KubeLeaseLock(kapi.client(), "fleetslo", "lock")
    second = KubeLeaseLock(kapi.client(), "fleetslo", "lock")
    first.create(LeaseRecord("a", 15.0))
    current = first.get()
    assert current is not None
    _, version = current
    first.update(LeaseRecord("a", 15.0, transitions=1), version)
    with pytest.raises(Conflict):
        second.update(LeaseRecord("b", 15.0, transitions=1), version)


def test_two_electors_on_threads_never_lead_at_once(kapi: KubeApi) -> None:
    timing = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}
    electors = [
        LeaderElector(
            KubeLeaseLock(kapi.client(), "fleetslo", "race"),
            name,
            clock=time.monotonic,
            wall=time.time,
            **timing,
        )
        for name in ("a", "b")
    ]
    alive = {e.identity: threading.Event() for e in electors}

    def campaign(e: LeaderElector) -> None:
        while alive[e.identity].is_set():
            e.step()
            time.sleep(e.retry_period)

    for e in electors:
        alive[e.identity].set()
        threading.Thread(target=campaign, args=(e,), daemon=True).start()
    overlaps, leaders_seen = 0, set()
    deadline = time.monotonic() + 4.0
    killed = False
    while time.monotonic() < deadline:
        leading = [e.identity for e in electors if e.is_leader()]
        overlaps += len(leading) > 1
        leaders_seen.update(leading)
        if leading and not killed and time.monotonic() > deadline - 3.0:
            alive[leading[0]].clear()  # the leader crashes: no more renewals, no release
            killed = True
        time.sleep(0.01)
    for event in alive.values():
        event.clear()
    assert overlaps == 0
    assert leaders_seen == {"a", "b"}  # the survivor took over after the crash


class Fixed:
    name, interval = "fixed", 5.0

    def initial_state(self, spec: FleetSLOSpec) -> None:
        return None

    def decide(self, obs: Observation, state: None, spec: FleetSLOSpec, now: float) -> tuple[Decision, None]:
        return Decision(4, None, Reason.FIXED_SIZE, "four"), None


def test_only_the_leader_of_two_controllers_scales(kapi: KubeApi) -> None:
    clock = FakeClock(0.0)
    slo = make_slo("qwen", replicas=(1, 10))
    workloads = {"a": FakeReplicaActuator(initial=2), "b": FakeReplicaActuator(initial=2)}
    electors = {n: elector(kapi, n, clock) for n in ("a", "b")}
    controllers = {
        n: Controller(
            [Binding(slo, Fixed(), FakeSource(), FleetActuator(workloads[n]))],
            Auditor(ControllerMetrics()),
            leader=electors[n],
        )
        for n in ("a", "b")
    }
    electors["a"].step()
    electors["b"].step()
    assert controllers["a"].tick_target("qwen", clock()) == Outcome.DECIDED
    assert controllers["b"].tick_target("qwen", clock()) == Outcome.FOLLOWER
    assert workloads["a"].writes and not workloads["b"].writes
    for _ in range(10):  # a dies; b keeps campaigning and ticking
        clock.advance(2.0)
        electors["b"].step()
        controllers["b"].tick_target("qwen", clock())
    assert workloads["b"].writes == [("infer/qwen", 4)]
