"""The learned capacity model survives a leader change, through the FleetSLO's status (kmock).

Two controllers share a Lease, the real client and the real status writes. Controller A learns the
engine (three times faster than the conservative prior) over 40 virtual minutes, and keeps what it
learned in ``status.capacityModel``. Then A goes silent, B takes the Lease and reads the record
back: its first decisions are A's learned size. Without the record (the control), B starts from
the prior and buys more replicas than the fleet needs. A record of another schema, another policy
or one that does not parse is a logged, marked degraded start from the prior, never a crash.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from unittest.mock import ANY

import pytest
from fleetslo.control.actuators.fleet import FleetActuator
from fleetslo.control.actuators.kubernetes import KubeReplicaActuator
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.kube.fleetslo_resources import FleetSLOResources
from fleetslo.control.kube.lease import KubeLeaseLock
from fleetslo.control.kube.workloads import Workloads
from fleetslo.control.leader import LeaderElector
from fleetslo.control.loop import Binding, Controller, Outcome
from fleetslo.control.resources import Held, StatusAuditor, load_resources
from fleetslo.control.service import Environment, build
from fleetslo.control.settings import ControllerSettings
from fleetslo.control.state import SCHEMA, Restorer, StatusStateStore, encode
from fleetslo.control.watch import held_specs
from fleetslo.core.config import load
from fleetslo.core.spec import RESOURCE_API_VERSION
from fleetslo.policy.fleetslo import FleetSLOPolicy
from fleetslo.policy.registry import make_policy
from fleetslo.testing import FakeClock

from tests.adapters.kube.kapi import KubeApi
from tests.prometheus import free_port
from tests.restart_support import ModelFleet

FLEETSLOS = "fleetslo.io/v1alpha1/fleetslos"
DEPLOYMENTS = "apps/v1/deployments"
WALL = 1_800_000_000.0
#: The policy decides once a minute here (every window is then a new one): 40 decisions teach it
#: the engine, few enough API calls to keep the emulator quick.
STEP = 60.0


def resource() -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API_VERSION, "kind": "FleetSLO",
        "metadata": {"name": "qwen", "namespace": "infer", "generation": 1},
        "spec": {
            "target": {"name": "qwen", "model_name": "qwen"},
            "objectives": {"ttft": {"threshold": "2s"}, "tpot": {"threshold": "50ms"}},
            "replicas": {"min": 1, "max": 60, "cold_start": "5m"},
        },
    }  # fmt: skip


def deployment(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "qwen", "namespace": "infer", "resourceVersion": "1"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "qwen"}}},
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }  # fmt: skip


def settle(kapi: KubeApi) -> int:
    """Every replica asked for is ready (the cold start is not what these tests are about)."""
    obj = kapi.get(DEPLOYMENTS, "infer", "qwen")
    replicas = int(obj["spec"]["replicas"])
    kapi.objects[DEPLOYMENTS, "infer", "qwen"].patch(
        {"status": {"replicas": replicas, "readyReplicas": replicas}}
    )
    return replicas


class Member:
    """One controller of the pair: its elector, and its controller with or without the restorer."""

    def __init__(self, kapi: KubeApi, identity: str, clock: FakeClock, *, restore: bool = True) -> None:
        api = kapi.client()
        self.elector = LeaderElector(
            KubeLeaseLock(api, "fleetslo", "fleetslo-controller"), identity, clock=clock,
            wall=lambda: WALL + clock(),
        )  # fmt: skip
        resources = FleetSLOResources(api)
        loaded = load_resources(resources.find(["infer"]))
        held: list[Held] = loaded.held
        slo = held[0].slo
        metrics = ControllerMetrics(self.elector.is_leader)
        auditor = StatusAuditor(metrics, None, None, resources, held)
        restorer = None
        if restore:
            store = StatusStateStore(resources, {"qwen": ("infer", "qwen")})
            auditor.capacity_state = store.pending
            restorer = Restorer({"qwen": store})
        fleet = FleetActuator(KubeReplicaActuator(Workloads(api)))
        binding = Binding(slo, make_policy("fleetslo", slo.spec, interval=STEP), ModelFleet(20.0), fleet)
        self.restorer = restorer
        self.controller = Controller([binding], auditor, leader=self.elector, restorer=restorer)


def lead(kapi: KubeApi, member: Member, clock: FakeClock, seconds: float) -> list[int]:
    """``member`` renews and reconciles every minute for ``seconds``; the replica count after each."""
    sizes = []
    for _ in range(int(seconds / STEP)):
        clock.advance(STEP)
        member.elector.step()  # renewed just before the reconcile (nobody else contends meanwhile)
        assert member.controller.tick_target("qwen", clock()) in (Outcome.DECIDED, Outcome.NOT_DUE)
        sizes.append(settle(kapi))
    return sizes


def take_over(member: Member, clock: FakeClock) -> None:
    """The leader went silent: ``member`` gets the Lease once it has expired."""
    for _ in range(20):
        if member.elector.step():
            return
        clock.advance(2.0)
    raise AssertionError("the Lease never passed")


def learned_leader(kapi: KubeApi) -> tuple[FakeClock, list[int]]:
    kapi.put(FLEETSLOS, resource())
    kapi.put(DEPLOYMENTS, deployment(8))
    clock = FakeClock(0.0)
    a = Member(kapi, "a", clock)
    return clock, lead(kapi, a, clock, 2400.0)


def test_a_new_leader_starts_from_what_the_old_one_learned(kapi: KubeApi) -> None:
    clock, before = learned_leader(kapi)
    learned_size = before[-1]
    assert (
        max(before) > 2 * learned_size
    )  # the prior did over-provision at first: there was something to learn
    record = kapi.get(FLEETSLOS, "infer", "qwen")["status"]["capacityModel"]
    assert record["schema"] == SCHEMA and record["policy"] == "fleetslo"
    assert record["learned"]["model"]["windows"] > 30 and record["start"]["learned"] == "prior"

    b = Member(kapi, "b", clock)
    take_over(b, clock)
    after = lead(kapi, b, clock, 900.0)
    assert b.restorer is not None and b.restorer.started["qwen"].learned == "resumed"
    assert after == [learned_size] * len(after)  # no relearning, no over-provisioning
    assert kapi.get(FLEETSLOS, "infer", "qwen")["status"]["capacityModel"]["start"]["learned"] == "resumed"


def test_without_the_record_a_new_leader_relearns_by_over_provisioning(kapi: KubeApi) -> None:
    clock, before = learned_leader(kapi)
    b = Member(kapi, "b", clock, restore=False)
    take_over(b, clock)
    after = lead(kapi, b, clock, 900.0)
    assert max(after) > before[-1]  # what the record saves: the relearning costs replicas


def _spoil(record: dict[str, Any], how: str) -> dict[str, Any]:
    """``record`` made unusable (the CRD's schema keeps ``capacityModel`` an object: a string or a
    list never reaches the controller from the API server; the state-file tests cover those)."""
    not_parsing = {"version": 1, "model": {"prior": {"overhead_s": "fast"}}}
    spoilt: dict[str, Callable[[], dict[str, Any]]] = {
        "another schema": lambda: {**record, "schema": SCHEMA + 1},
        "another policy": lambda: {**record, "policy": "hpa-util"},
        "a foreign learned version": lambda: {**record, "learned": {**record["learned"], "version": 99}},
        "a model that does not parse": lambda: {**record, "learned": not_parsing},
    }
    return spoilt[how]()


@pytest.mark.parametrize(
    "how", ["another schema", "another policy", "a foreign learned version", "a model that does not parse"]
)
def test_an_unusable_record_is_a_marked_degraded_start_from_the_prior(
    kapi: KubeApi, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    spec = load_resources([resource()]).held[0].slo.spec
    good = encode("fleetslo", FleetSLOPolicy().initial_state(spec).learned(), WALL, None)
    kapi.put(FLEETSLOS, {**resource(), "status": {"capacityModel": _spoil(good, how)}})
    kapi.put(DEPLOYMENTS, deployment(8))
    clock = FakeClock(0.0)
    b = Member(kapi, "b", clock)
    take_over(b, clock)
    with caplog.at_level(logging.WARNING, logger="fleetslo.state"):
        after = lead(kapi, b, clock, 120.0)
    assert b.restorer is not None and b.restorer.started["qwen"].learned == "discarded"
    assert any("persisted state was discarded" in r.getMessage() for r in caplog.records)
    written = kapi.get(FLEETSLOS, "infer", "qwen")["status"]["capacityModel"]
    assert (
        written["schema"] == SCHEMA and written["start"]["learned"] == "discarded"
    )  # marked where the model is
    assert written["learned"]["model"]["windows"] <= 2  # the new leader's own, from the prior
    assert after  # it decided every tick: no crash


def test_fleetslo_run_s_build_keeps_the_record_in_the_status_and_a_rebuild_resumes_it(kapi: KubeApi) -> None:
    """The wiring ``fleetslo run`` uses (``service.build``): the status store, the auditor's hook,
    the restorer; Prometheus is down, so the policy holds on no data and the history is empty."""
    kapi.put(FLEETSLOS, resource())
    kapi.put(DEPLOYMENTS, deployment(3))
    api = kapi.client()
    config = load(ControllerSettings, {
        "listen": "127.0.0.1:0", "policy": "fleetslo", "leader_election": {"enabled": False},
        "source": {"prometheus": {"url": f"http://127.0.0.1:{free_port()}", "timeout": "1s"}},
        "resources": {"enabled": True, "namespaces": ["infer"]},
    })  # fmt: skip
    env = Environment(in_pod=False, identity="ctl")

    def built() -> Controller:
        held = held_specs(config, [], api, env=env)
        return build(
            config, [h.slo for h in held], env, api, status=FleetSLOResources(api), held=held
        ).controller

    first = built()
    assert first.tick(WALL) == {"qwen": Outcome.DECIDED}
    record = kapi.get(FLEETSLOS, "infer", "qwen")["status"]["capacityModel"]
    assert record["schema"] == SCHEMA and record["start"] == {"learned": "prior", "why": ANY, "history": 0}
    again = built()  # a spec edit, a restart: the same resource read again
    assert again.tick(WALL + 60) == {"qwen": Outcome.DECIDED}
    assert again.restorer is not None and again.restorer.started["qwen"].learned == "resumed"
