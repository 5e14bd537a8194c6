"""The control loop in virtual time with fakes: isolation, back-off, dry run, outages, leadership.

Every scenario runs the real ``Controller`` with the real ``Auditor`` and real policies from the
registry; only the source, the workload and the clock are fakes. Thousands of ticks take
milliseconds because ``now`` is a parameter.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable

import pytest
from fleetslo.control.audit import Auditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.loop import Binding, Controller, Outcome
from fleetslo.control.ports import Deposed
from fleetslo.control.service import Actuators, make_fleet
from fleetslo.core.errors import ApiUnavailable, BadQuery, Forbidden, RateLimited, SourceUnavailable
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.core.spec import FleetSLO
from fleetslo.policy.registry import make_policy
from fleetslo.testing import FakeEventSink, FakeReplicaActuator, FakeSource

from tests.loop_support import make_slo


class Leader:
    def __init__(self) -> None:
        self.leading = True

    def is_leader(self) -> bool:
        return self.leading

    def fence(self) -> float:
        if not self.leading:
            raise Deposed("test: not leading")
        return float("inf")


def busy(utilization: Callable[[int], float]) -> FakeSource:
    """A source reporting GPU utilization as a function of the ready replicas."""

    def observe(slo: FleetSLO, replicas: ReplicaCounts, limit: int | None, now: float) -> Observation:
        return Observation(slo.metadata.name, now, 60.0, replicas, batch_limit=limit,
                           replicas_reporting=replicas.ready, data_age=1.0,
                           gpu_utilization=utilization(replicas.ready))  # fmt: skip

    return FakeSource(observe)


class Harness:
    def __init__(
        self, slos: list[FleetSLO], policy: str = "hpa-util", *, dry_run: bool = False,
        source: FakeSource | None = None,
    ) -> None:  # fmt: skip
        self.metrics = ControllerMetrics()
        self.events = FakeEventSink()
        self.workload = FakeReplicaActuator(initial=4)
        self.source = source or busy(lambda ready: 0.8)
        self.leader = Leader()
        bindings = [
            Binding(slo, make_policy(policy, slo.spec), self.source,
                    make_fleet(slo, Actuators(self.workload), self.metrics, dry_run=dry_run, drain=True))
            for slo in slos
        ]  # fmt: skip
        self.controller = Controller(bindings, Auditor(self.metrics, self.events), leader=self.leader,
                                     backoff=(1, 2, 5, 10, 30, 60), permanent_retry=600)  # fmt: skip

    def run(self, start: float, seconds: float, step: float = 1.0) -> list[dict[str, Outcome]]:
        return [self.controller.tick(start + i * step) for i in range(int(seconds / step))]

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


A, B = make_slo("a", replicas=(1, 20)), make_slo("b", replicas=(1, 20))


def test_one_failing_target_never_stops_the_others() -> None:
    h = Harness([A, B])
    h.workload.errors[("read", "infer/a")] = ApiUnavailable("api down")
    outcomes = h.run(0.0, 120.0)
    assert all(o["b"] in (Outcome.DECIDED, Outcome.NOT_DUE) for o in outcomes)
    assert sum(o["b"] == Outcome.DECIDED for o in outcomes) == 120 // 15  # hpa-util decides every 15 s
    assert all(o["a"] in (Outcome.FAILED, Outcome.BACKING_OFF) for o in outcomes)


def test_transient_failures_back_off_and_recover() -> None:
    h = Harness([A])
    h.workload.errors[("read", "infer/a")] = ApiUnavailable("api down")
    outcomes = h.run(0.0, 300.0)
    failed_at = [i for i, o in enumerate(outcomes) if o["a"] == Outcome.FAILED]
    assert failed_at[:7] == [0, 1, 3, 8, 18, 48, 108]  # delays 1, 2, 5, 10, 30, 60, 60 …
    del h.workload.errors[("read", "infer/a")]
    after = h.run(300.0, 120.0)
    assert Outcome.DECIDED in after[-1].values() or any(o["a"] == Outcome.DECIDED for o in after)
    assert h.controller._runtime["a"].throttle.failures == 0
    assert h.sample("fleetslo_controller_actuation_errors_total", target="a", kind="api_unavailable") == len(
        failed_at
    )


def test_rate_limits_wait_at_least_as_long_as_the_api_asks() -> None:
    h = Harness([A])
    h.workload.errors[("read", "infer/a")] = RateLimited("slow down", retry_after=40)
    outcomes = h.run(0.0, 100.0)
    assert [i for i, o in enumerate(outcomes) if o["a"] == Outcome.FAILED] == [0, 40, 80]


def test_permanent_errors_are_reported_once_and_not_hammered() -> None:
    h = Harness([A], policy="static")
    h.workload.set(A.spec.target, 4)
    h.workload.errors[("scale", "infer/a")] = Forbidden("RBAC: cannot patch deployments/scale")
    outcomes = h.run(0.0, 1200.0, step=5.0)
    scale_calls = [c for c in h.workload.calls if c[0] == "scale"]
    assert len(scale_calls) == 2  # at t=0 and again after permanent_retry (600 s)
    assert sum(o["a"] == Outcome.FAILED for o in outcomes) == 2
    warnings = [e for e in h.events.events if e[3]]
    assert [e[1] for e in warnings] == ["FailedRescale", "FailedRescale"]


def test_a_bad_query_is_permanent_too() -> None:
    h = Harness([A])
    h.source.error = BadQuery("HTTP 400: parse error")
    outcomes = h.run(0.0, 700.0, step=5.0)
    assert sum(o["a"] == Outcome.FAILED for o in outcomes) == 2
    assert h.events.events and h.events.events[0][1] == "FailedGetMetrics"


def test_dry_run_decides_and_reports_but_writes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness([make_slo("a", mode="advisory")], source=busy(lambda ready: 1.6))  # twice the target
    with caplog.at_level(logging.INFO):
        h.run(0.0, 60.0)
    assert h.workload.writes == [] and h.events.events == []
    assert any("dry run: would scale a to 8 replicas" in r.getMessage() for r in caplog.records)
    decisions = [r.fields for r in caplog.records if getattr(r, "fields", {}).get("event") == "decision"]
    assert decisions[0]["replicas_wanted"] == 8 and decisions[0]["dry_run"] and not decisions[0]["changed"]
    assert h.sample("fleetslo_controller_desired_replicas", target="a") == 8
    assert h.sample("fleetslo_controller_current_replicas", target="a") == 4


def test_the_dry_run_flag_makes_every_target_advisory() -> None:
    h = Harness([A, B], dry_run=True, source=busy(lambda ready: 2.0))
    h.run(0.0, 120.0)
    assert h.workload.writes == []


def test_prometheus_down_holds_and_never_scales_down() -> None:
    h = Harness([A])
    h.source.error = SourceUnavailable("connection refused")
    outcomes = h.run(0.0, 3600.0, step=5.0)
    assert all(o["a"] in (Outcome.DECIDED, Outcome.NOT_DUE) for o in outcomes)  # a hold is a decision
    assert h.workload.writes == []
    assert h.sample("fleetslo_controller_decisions_total", target="a", reason="HoldNoData") == 3600 / 15
    assert (
        h.sample("fleetslo_controller_observe_errors_total", target="a", reason="source_unavailable") == 240
    )


@pytest.mark.parametrize("policy", ["fleetslo", "hpa-util", "hpa-running", "keda-waiting", "llmd-slo"])
def test_no_policy_scales_down_through_an_hour_without_metrics(policy: str) -> None:
    h = Harness([A], policy=policy)
    h.source.error = SourceUnavailable("connection refused")
    h.run(0.0, 3600.0, step=15.0)
    assert h.workload.desired["infer/a"] >= 4 and all(n >= 4 for _, n in h.workload.writes)


def test_each_policy_decides_at_its_own_interval() -> None:
    h = Harness([A], policy="static")  # static decides every 60 s
    outcomes = h.run(0.0, 300.0, step=5.0)
    assert [i * 5 for i, o in enumerate(outcomes) if o["a"] == Outcome.DECIDED] == [0, 60, 120, 180, 240]


def test_followers_do_nothing_and_a_new_leader_starts_fresh() -> None:
    h = Harness([A])
    h.leader.leading = False
    outcomes = h.run(0.0, 60.0)
    assert all(o["a"] == Outcome.FOLLOWER for o in outcomes) and h.source.calls == []
    h.leader.leading = True
    assert h.controller.tick(60.0)["a"] == Outcome.DECIDED


def test_a_thousand_ticks_of_a_closed_loop_settle_without_oscillating() -> None:
    """Load of 6.4 replica-equivalents; hpa-util at 80 % needs 8. Replicas start in 300 s."""
    h = Harness([A], source=busy(lambda ready: 6.4 / max(ready, 1)))
    started: dict[int, float] = {}
    h.workload.set(A.spec.target, 4)
    sizes = []
    for i in range(1000):
        now = float(i * 5)
        h.controller.tick(now)
        desired = h.workload.desired["infer/a"]
        started.setdefault(desired, now)
        if now - started[desired] >= 300:
            h.workload.settle()
        sizes.append(desired)
    assert sizes[-1] == math.ceil(6.4 / 0.8)
    changes = [b for a, b in itertools.pairwise(sizes) if a != b]
    assert changes == sorted(changes)  # only ever up: no flapping on the way
