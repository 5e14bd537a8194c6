"""``/healthz`` is progress and ``/readyz`` needs the API server (defect 15 of issue 15)."""

from __future__ import annotations

import httpx
from fleetslo.control.actuators.fleet import FleetActuator
from fleetslo.control.audit import Auditor
from fleetslo.control.health import Health, Heartbeat
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.leader import AlwaysLeader
from fleetslo.control.loop import Binding, Controller
from fleetslo.control.service import Running, Service
from fleetslo.control.settings import ControllerSettings
from fleetslo.core.config import load
from fleetslo.policy.registry import make_policy
from fleetslo.testing import FakeClock, FakeReplicaActuator, FakeSource

from tests.loop_support import make_slo
from tests.unit.loop.test_service import wait_for


def test_a_long_drain_is_progress_not_a_stall() -> None:
    clock = FakeClock(0.0)
    heartbeat = Heartbeat(["a"], clock)
    heartbeat.start("a")
    heartbeat.beat("a")
    clock.advance(5.0)
    heartbeat.start("a")  # a scale-down that waits on a drain for up to a minute
    clock.advance(75.0)
    assert heartbeat.healthy(max_silence=60.0, max_running=90.0)  # nothing finished for 80 s, yet alive
    clock.advance(20.0)
    assert heartbeat.stalled(max_silence=60.0, max_running=90.0) == ["a"]  # stuck past any honest run


def test_a_loop_that_stops_finishing_ticks_is_not_healthy() -> None:
    clock = FakeClock(0.0)
    heartbeat = Heartbeat(["a", "b"], clock)
    for name in ("a", "b"):
        heartbeat.start(name)
        heartbeat.beat(name)
    clock.advance(61.0)
    heartbeat.beat("b")
    assert heartbeat.stalled(max_silence=60.0, max_running=90.0) == ["a"]


def test_the_longest_honest_reconcile_comes_from_the_settings() -> None:
    health = Health.of(load(ControllerSettings, {}))
    # API budget 20 s + drain timeout 60 s + one Prometheus query 5 s + one interval 5 s.
    assert (health.max_silence, health.max_running) == (60.0, 90.0)
    assert Health.of(load(ControllerSettings, {"drain": {"enabled": False}})).max_running == 30.0


def test_readyz_is_not_ready_while_the_api_server_is_unreachable() -> None:
    settings = load(ControllerSettings, {"listen": "127.0.0.1:0", "interval": "200ms", "policy": "static"})
    slo = make_slo("a", replicas=(2, 5))
    metrics = ControllerMetrics()
    binding = Binding(
        slo, make_policy("static", slo.spec), FakeSource(), FleetActuator(FakeReplicaActuator())
    )
    controller = Controller([binding], Auditor(metrics), leader=AlwaysLeader())
    reachable: list[bool | None] = [False]
    service = Service(
        Running(controller, metrics, None, api_reachable=lambda: reachable[0]), settings
    ).start()
    try:
        base = f"http://127.0.0.1:{service.port}"
        answer = wait_for(f"{base}/readyz", status=503)
        assert answer.status_code == 503 and "unreachable" in answer.text
        assert httpx.get(f"{base}/healthz").status_code == 200  # alive: restarting would not help
        reachable[0] = True
        assert wait_for(f"{base}/readyz").status_code == 200
    finally:
        service.stop()
