"""GateActuator against scripted admin APIs (httpx.MockTransport): choices, partial failures, errors."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from fleetslo.control.actuators.gate import (
    GateActuator,
    GateForbidden,
    GateRequestRefused,
    GateServerError,
    GateUnreachable,
    StaticPodDirectory,
)
from fleetslo.control.ports import PodEndpoint
from fleetslo.core.errors import Permanent, Transient
from fleetslo.core.spec import Target, TargetKind
from fleetslo.testing import FakeClock, FakePodDirectory

TOKEN = "tok-xyz"
DEPLOY = Target(name="llm", model_name="m")
STS = Target(kind=TargetKind.STATEFULSET, name="llm", model_name="m")


class FakeGates:
    """Admin APIs of several pods, keyed by pod IP; records every call."""

    def __init__(self, **inflight: int) -> None:
        self.state = {
            ip: {"limit": 8, "inflight": n, "queued": 0, "draining": False} for ip, n in inflight.items()
        }
        self.calls: list[tuple[str, str, str]] = []
        self.fail: dict[str, Callable[[], httpx.Response]] = {}
        self.finish_after_polls = 0  # draining pods report drained after this many status polls
        self.leases: list[dict[str, object]] = []  # the bodies of POST /admin/drain (owner, ttl)

    def handler(self, request: httpx.Request) -> httpx.Response:
        ip, path, method = request.url.host, request.url.path, request.method
        self.calls.append((ip, method, path))
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        if ip in self.fail:
            return self.fail[ip]()
        pod = self.state[ip]
        if path == "/admin/limit" and method == "PUT":
            previous, pod["limit"] = pod["limit"], json.loads(request.content)["limit"]
            return httpx.Response(200, json={"limit": pod["limit"], "previous": previous})
        if path == "/admin/limit":
            return httpx.Response(200, json={"limit": pod["limit"]})
        if path == "/admin/drain":
            pod["draining"] = method == "POST"
            if method == "POST":
                self.leases.append(json.loads(request.content))
        # A drain is polled by renewing it (POST answers with the status) or by reading the status.
        if pod["draining"] and (path == "/admin/status" or (path, method) == ("/admin/drain", "POST")):
            pod["polls"] = pod.get("polls", 0) + 1
            if pod["polls"] > self.finish_after_polls:
                pod["inflight"] = 0
        drained = pod["draining"] and pod["inflight"] == 0
        return httpx.Response(200, json={**pod, "drained": drained})


def rig(
    gates: FakeGates, pods: list[PodEndpoint], target: Target = DEPLOY, **options: object
) -> GateActuator:
    directory = FakePodDirectory()
    directory.set(target, pods)
    clock = FakeClock()
    client = httpx.Client(transport=httpx.MockTransport(gates.handler))
    return GateActuator(directory, TOKEN, client=client, clock=clock, sleep=clock.advance, **options)  # type: ignore[arg-type]


def pod(name: str, ip: str, ready: bool = True) -> PodEndpoint:
    return PodEndpoint(name=name, ip=ip, ready=ready)


def test_set_limit_reaches_every_ready_pod_and_says_how_many_changed() -> None:
    gates = FakeGates(a=0, b=0, c=0)
    actuator = rig(gates, [pod("p-a", "a"), pod("p-b", "b"), pod("p-c", "c", ready=False)])
    gates.state["b"]["limit"] = 4
    result = actuator.set_limit(DEPLOY, 4)
    assert result.changed and "4 on 2/2 pods (1 changed)" in result.message
    assert {ip for ip, m, _ in gates.calls if m == "PUT"} == {"a", "b"}
    assert not actuator.set_limit(DEPLOY, 4).changed


def test_read_limit_is_the_shared_limit_or_none_when_pods_disagree() -> None:
    gates = FakeGates(a=0, b=0)
    actuator = rig(gates, [pod("p-a", "a"), pod("p-b", "b")])
    assert actuator.read_limit(DEPLOY) == 8
    gates.state["b"]["limit"] = None
    assert actuator.read_limit(DEPLOY) is None
    assert rig(gates, []).read_limit(DEPLOY) is None


def test_a_failing_pod_does_not_stop_the_others_and_the_worst_error_is_raised() -> None:
    gates = FakeGates(a=0, b=0, c=0)
    gates.fail["a"] = lambda: httpx.Response(503, text="busy")
    gates.fail["b"] = lambda: httpx.Response(401, json={"error": {}})
    actuator = rig(gates, [pod("p-a", "a"), pod("p-b", "b"), pod("p-c", "c")])
    with pytest.raises(GateForbidden) as raised:
        actuator.set_limit(DEPLOY, 2)
    assert gates.state["c"]["limit"] == 2
    assert "1/3 pods" in str(raised.value) and "2 failed" in str(raised.value)
    assert TOKEN not in str(raised.value) and TOKEN not in repr(actuator)


@pytest.mark.parametrize(
    ("answer", "error", "kind"),
    [
        (lambda: httpx.Response(401), GateForbidden, Permanent),
        (lambda: httpx.Response(403), GateForbidden, Permanent),
        (lambda: httpx.Response(400, json={}), GateRequestRefused, Permanent),
        (lambda: httpx.Response(500), GateServerError, Transient),
        (lambda: httpx.Response(200, text="<html>"), GateServerError, Transient),
    ],
)
def test_http_failures_map_to_transient_or_permanent(
    answer: Callable[[], httpx.Response], error: type[Exception], kind: type[Exception]
) -> None:
    gates = FakeGates(a=0)
    gates.fail["a"] = answer
    with pytest.raises(error) as raised:
        rig(gates, [pod("p-a", "a")]).read_limit(DEPLOY)
    assert isinstance(raised.value, kind)


def test_an_unreachable_pod_is_transient() -> None:
    actuator = GateActuator(StaticPodDirectory({"default/llm": [pod("p", "127.0.0.1")]}), TOKEN,
                            admin_port=1, timeout=0.5)  # fmt: skip
    with pytest.raises(GateUnreachable) as raised:
        actuator.set_limit(DEPLOY, 3)
    assert isinstance(raised.value, Transient)
    assert isinstance(raised.value.__cause__, GateUnreachable)


def test_a_deployment_drains_its_least_busy_pods() -> None:
    gates = FakeGates(a=5, b=1, c=3)
    actuator = rig(gates, [pod("p-a", "a"), pod("p-b", "b"), pod("p-c", "c")])
    assert actuator.drain(DEPLOY, 2) == ["p-b", "p-c"]
    assert {ip for ip, method, _ in gates.calls if method == "POST"} == {"b", "c"}
    assert not gates.state["a"]["draining"]


def test_a_statefulset_drains_its_highest_ordinals() -> None:
    gates = FakeGates(a=0, b=9, c=9)
    actuator = rig(gates, [pod("llm-0", "a"), pod("llm-10", "b"), pod("llm-2", "c")], STS)
    assert actuator.drain(STS, 2) == ["llm-10", "llm-2"]


def test_a_pod_still_busy_at_the_drain_timeout_is_resumed_not_returned() -> None:
    gates = FakeGates(a=2, b=2)
    gates.finish_after_polls = 1_000
    actuator = rig(gates, [pod("p-a", "a"), pod("p-b", "b")], drain_timeout=5.0, poll_interval=1.0)
    assert actuator.drain(DEPLOY, 1) == []
    assert ("a", "DELETE", "/admin/drain") in gates.calls
    assert not gates.state["a"]["draining"]


def test_a_drain_that_takes_a_few_polls_waits_for_it() -> None:
    gates = FakeGates(a=2)
    gates.finish_after_polls = 3
    actuator = rig(gates, [pod("p-a", "a")], drain_timeout=60.0, poll_interval=1.0)
    assert actuator.drain(DEPLOY, 1) == ["p-a"]
    assert sum(1 for c in gates.calls if c[1:] == ("GET", "/admin/status")) == 1  # to choose the pod
    renewals = sum(1 for c in gates.calls if c[1:] == ("POST", "/admin/drain"))
    assert renewals == 4  # the drain, then renewed at each poll until the 4th reports drained
    assert gates.leases == [{"owner": "fleetslo-controller", "ttl": 30.0}] * 4


def test_below_a_pod_that_failed_to_drain_statefulset_pods_are_resumed() -> None:
    gates = FakeGates(a=0, b=0)
    gates.fail["b"] = lambda: httpx.Response(500)
    actuator = rig(gates, [pod("llm-0", "a"), pod("llm-1", "b")], STS)
    assert actuator.drain(STS, 2) == []  # llm-1 goes first on scale-down and did not drain
    assert not gates.state["a"]["draining"]


def test_an_unready_unreachable_top_pod_counts_as_drained() -> None:
    gates = FakeGates(a=1, b=0)
    gates.fail["b"] = lambda: httpx.Response(502)
    actuator = rig(gates, [pod("llm-0", "a"), pod("llm-1", "b", ready=False)], STS)
    assert actuator.drain(STS, 2) == ["llm-1", "llm-0"]


def test_resume_reaches_drained_pods_even_though_they_are_not_ready() -> None:
    gates = FakeGates(a=0, b=0)
    gates.state["a"]["draining"] = True
    actuator = rig(gates, [pod("p-a", "a", ready=False), pod("p-b", "b")])
    actuator.resume(DEPLOY, ["p-a"])
    assert gates.calls == [("a", "DELETE", "/admin/drain")]
    assert not gates.state["a"]["draining"]
