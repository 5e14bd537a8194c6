"""Drains are leases: they carry an owner, expire unless renewed, and a new leader resumes orphans.

Defect 4 of issue 15: a drain left by a killed controller was never undone; 45 s after the
controller died the gate was still refusing. Real gates on loopback, the real ``GateActuator``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from fleetslo.control.actuators.gate import GateActuator

from tests.adapters.gate.harness import TOKEN
from tests.adapters.gate.test_actuator_gates import TARGET, fleet


def wait_until(condition: Callable[[], bool], limit: float = 10.0) -> bool:
    """Poll ``condition()`` until true or ``limit`` seconds passed (a bound, not a measurement)."""
    give_up = time.monotonic() + limit
    while time.monotonic() < give_up:
        if condition():
            return True
        threading.Event().wait(0.02)
    return False


def test_a_drain_left_by_a_killed_controller_expires_by_itself() -> None:
    with fleet() as (f, _, directory):
        killed = GateActuator(directory, TOKEN, admin_url=f.admin_url, drain_ttl=0.3, owner="controller-a",
                              poll_interval=0.05)  # fmt: skip
        assert killed.drain(TARGET, 1) == ["llm-0"]
        assert f.gates[0].admission.draining
        killed.close()  # the controller dies here: no scale-down, no resume, no renewal
        assert wait_until(lambda: not f.gates[0].admission.draining)
        assert f.gates[0].not_ready() is None  # serving again


def test_the_drain_is_renewed_while_the_controller_waits_for_in_flight_requests() -> None:
    with fleet() as (f, _, directory):
        busy = asyncio.run_coroutine_threadsafe(f.stream(f.gates[0]), f.loop)  # ~0.4 s of tokens
        assert wait_until(lambda: f.gates[0].admission.inflight == 1)
        directory.set(TARGET, f.pods()[:1])
        waiting = GateActuator(directory, TOKEN, admin_url=f.admin_url, drain_ttl=0.15, drain_timeout=10,
                               poll_interval=0.05, owner="controller-a")  # fmt: skip
        try:
            # The drain outlives its ttl of 0.15 s because every poll renews it.
            assert waiting.drain(TARGET, 1) == ["llm-0"]
        finally:
            waiting.close()
        assert busy.result(timeout=5) == 200


def test_a_new_leader_resumes_orphaned_drains_and_leaves_a_pods_own_drain() -> None:
    with fleet() as (f, old, directory):
        old.owner, old.drain_ttl = "controller-a", 300.0
        assert old.drain(TARGET, 1) == ["llm-0"]
        f.gates[2].admission.drain()  # the pod's preStop hook: no owner, the pod is going
        new = GateActuator(directory, TOKEN, admin_url=f.admin_url, owner="controller-b")
        try:
            assert new.resume_orphans(TARGET) == ["llm-0"]
        finally:
            new.close()
        assert not f.gates[0].admission.draining
        assert f.gates[2].admission.draining


@pytest.mark.parametrize("body", [{"ttl": 0}, {"ttl": -1}, {"ttl": "30"}, {"ttl": True}, {"ttl": 1e9},
                                  {"owner": ""}, {"owner": 7}, [1]])  # fmt: skip
def test_a_bad_drain_lease_is_refused_and_drains_nothing(body: object) -> None:
    with fleet() as (f, actuator, directory):
        pod = directory.pods(TARGET)[0]
        with pytest.raises(Exception, match="HTTP 400"):
            actuator._call(pod, "POST", "/admin/drain", body)
        assert not f.gates[0].admission.draining
