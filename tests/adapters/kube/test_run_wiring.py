"""``fleetslo run``'s wiring end to end against kmock: the real Kubernetes actuators, Events and Lease,
with the Prometheus source pointing at a Prometheus that is down (so every decision is made blind)."""

from __future__ import annotations

import time

from fleetslo.control.loop import Outcome
from fleetslo.control.service import Environment, build
from fleetslo.control.settings import ControllerSettings
from fleetslo.core.config import load

from tests.adapters.kube.kapi import KubeApi
from tests.loop_support import make_slo
from tests.prometheus import free_port

SLO = make_slo("qwen", replicas=(3, 10))


def settings(**extra: object) -> ControllerSettings:
    return load(ControllerSettings, {
        "listen": "127.0.0.1:0", "policy": "static",
        "source": {"prometheus": {"url": f"http://127.0.0.1:{free_port()}", "timeout": "1s"}},
        "leader_election": {"namespace": "fleetslo"}, **extra,
    })  # fmt: skip


def put_deployment(kapi: KubeApi, replicas: int) -> None:
    kapi.put("apps/v1/deployments", {
        "metadata": {"name": "qwen", "namespace": "infer"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "qwen"}}},
        "status": {"replicas": replicas, "readyReplicas": replicas},
    })  # fmt: skip


def test_the_leader_scales_records_an_event_and_holds_the_lease(kapi: KubeApi) -> None:
    put_deployment(kapi, 2)
    running = build(settings(), [SLO], Environment(in_pod=False, identity="ctl-a"), api=kapi.client())
    assert running.elector is not None
    assert running.controller.tick(time.time()) == {"qwen": Outcome.FOLLOWER}
    assert running.elector.step()
    assert running.controller.tick(time.time()) == {"qwen": Outcome.DECIDED}
    assert kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["replicas"] == 3  # static: replicas.min
    events = [dict(o) for k, o in kapi.objects.items() if k[0].plural == "events"]
    assert [e["reason"] for e in events] == ["FixedSize"]
    lease = kapi.get("coordination.k8s.io/v1/leases", "fleetslo", "fleetslo-controller")
    assert lease["spec"]["holderIdentity"] == "ctl-a"
    for close in running.closers:
        close()


def test_dry_run_writes_nothing_to_the_cluster(kapi: KubeApi) -> None:
    put_deployment(kapi, 2)
    config = settings(dry_run=True, leader_election={"enabled": False})
    running = build(config, [SLO], Environment(in_pod=False, identity="ctl-a"), api=kapi.client())
    assert running.controller.tick(time.time()) == {"qwen": Outcome.DECIDED}
    assert kapi.requests("patch") == [] and kapi.requests("post") == []
    assert kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["replicas"] == 2
