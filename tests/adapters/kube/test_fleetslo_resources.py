"""FleetSLO resources end to end on kmock with the real client: the controller reads them, holds
them, writes their status; refuses to enforce where an HPA or a KEDA ScaledObject already scales;
and follows resources created and changed while it runs (``fleetslo.control.watch``)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fleetslo.control.kube.fleetslo_resources import Autoscalers, FleetSLOResources
from fleetslo.control.loop import Outcome
from fleetslo.control.service import Environment, build
from fleetslo.control.settings import ControllerSettings
from fleetslo.control.watch import held_specs, serve
from fleetslo.core.config import load
from fleetslo.core.spec import RESOURCE_API_VERSION, Mode

from tests.adapters.kube.kapi import KubeApi
from tests.prometheus import free_port

FLEETSLOS = "fleetslo.io/v1alpha1/fleetslos"
HPAS = "autoscaling/v2/horizontalpodautoscalers"
SCALEDOBJECTS = "keda.sh/v1alpha1/scaledobjects"
ENV = Environment(in_pod=False, identity="ctl-a")


def settings(**extra: object) -> ControllerSettings:
    return load(ControllerSettings, {
        "listen": "127.0.0.1:0", "policy": "static", "interval": "200ms",
        "source": {"prometheus": {"url": f"http://127.0.0.1:{free_port()}", "timeout": "1s"}},
        "leader_election": {"enabled": False},
        "resources": {"enabled": True, "namespaces": ["infer"], "resync": "200ms"}, **extra,
    })  # fmt: skip


def resource(
    name: str = "qwen", *, mode: str = "enforce", min_replicas: int = 3, **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API_VERSION, "kind": "FleetSLO",
        "metadata": {"name": name, "namespace": "infer", "generation": 1, **meta},
        "spec": {
            "target": {"name": "qwen", "model_name": "Qwen/Qwen3"},  # namespace: the resource's own
            "objectives": {"ttft": {"threshold": "2s"}, "tpot": {"threshold": "50ms"}},
            "replicas": {"min": min_replicas, "max": 10},
            "mode": mode,
        },
    }  # fmt: skip


def put_deployment(kapi: KubeApi, replicas: int = 2) -> None:
    kapi.put("apps/v1/deployments", {
        "metadata": {"name": "qwen", "namespace": "infer"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "qwen"}}},
        "status": {"replicas": replicas, "readyReplicas": replicas},
    })  # fmt: skip


def status_of(kapi: KubeApi, name: str = "qwen") -> dict[str, Any]:
    return kapi.get(FLEETSLOS, "infer", name).get("status") or {}


def conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status.get("conditions", [])}


def test_a_resource_is_held_enforced_and_its_status_written(kapi: KubeApi) -> None:
    put_deployment(kapi, 2)
    kapi.put(FLEETSLOS, resource())
    api = kapi.client()
    config = settings()
    held = held_specs(config, [], api)
    assert [h.slo.spec.target.namespace for h in held] == ["infer"]
    running = build(config, [h.slo for h in held], ENV, api, status=FleetSLOResources(api), held=held)
    assert running.controller.tick(time.time()) == {"qwen": Outcome.DECIDED}
    assert kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["replicas"] == 3  # static: replicas.min
    status = status_of(kapi)
    assert status["mode"] == "enforce"
    assert status["replicas"] == {"current": 2, "desired": 3, "ready": 2}
    assert status["lastDecision"]["reason"] == "FixedSize" and status["lastDecision"]["applied"] is True
    assert status["observedGeneration"] == 1
    assert "ttftSeconds" not in status["observed"]  # Prometheus is down: missing, never 0
    assert conditions(status) == {"Ready": "True", "Degraded": "False", "Advisory": "False",
                                  "ActuationFailing": "False", "Conflict": "False"}  # fmt: skip
    status_patches = [r for r in kapi.requests("patch") if str(r.url).endswith("/status")]
    assert status_patches and status_patches[0].headers["Content-Type"] == "application/merge-patch+json"


def test_an_advisory_resource_is_reported_but_never_written(kapi: KubeApi) -> None:
    put_deployment(kapi, 2)
    kapi.put(FLEETSLOS, resource(mode="advisory"))
    api = kapi.client()
    held = held_specs(settings(), [], api)
    running = build(settings(), [h.slo for h in held], ENV, api, status=FleetSLOResources(api), held=held)
    running.controller.tick(time.time())
    assert kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["replicas"] == 2
    status = status_of(kapi)
    assert status["mode"] == "advisory" and status["replicas"]["desired"] == 3
    assert status["lastDecision"]["applied"] is False
    assert conditions(status)["Advisory"] == "True"


@pytest.mark.parametrize(("resource_name", "autoscaler"), [
    (HPAS, {"kind": "Deployment", "name": "qwen", "apiVersion": "apps/v1"}),
    (SCALEDOBJECTS, {"name": "qwen"}),  # KEDA's kind defaults to Deployment
])  # fmt: skip
def test_a_workload_another_autoscaler_scales_is_only_advised_on(
    kapi: KubeApi, resource_name: str, autoscaler: dict[str, str]
) -> None:
    put_deployment(kapi, 2)
    kapi.put(FLEETSLOS, resource())
    kapi.put(resource_name, {"metadata": {"name": "qwen-scaler", "namespace": "infer"},
                             "spec": {"scaleTargetRef": autoscaler}})  # fmt: skip
    api = kapi.client()
    held = held_specs(settings(), [], api)
    assert held[0].slo.spec.mode == Mode.ADVISORY and held[0].conflict is not None
    running = build(settings(), [h.slo for h in held], ENV, api, status=FleetSLOResources(api), held=held)
    running.controller.tick(time.time())
    assert kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["replicas"] == 2  # not touched
    status = status_of(kapi)
    assert conditions(status)["Conflict"] == "True" and conditions(status)["Advisory"] == "True"
    assert status["conflictsWith"].endswith("infer/qwen-scaler")
    events = [dict(o) for k, o in kapi.objects.items() if k[0].plural == "events"]
    assert [(e["reason"], e["type"]) for e in events] == [("Conflict", "Warning")]
    assert events[0]["involvedObject"]["name"] == "qwen"


def test_an_autoscaler_on_another_workload_is_no_conflict(kapi: KubeApi) -> None:
    kapi.put(HPAS, {"metadata": {"name": "other", "namespace": "infer"},
                    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "other"}}})  # fmt: skip
    kapi.put(FLEETSLOS, resource())
    (held,) = held_specs(settings(), [], kapi.client())
    assert held.conflict is None and held.slo.spec.mode == Mode.ENFORCE
    assert Autoscalers(kapi.client()).scaling(held.slo.spec.target) == []


def test_an_invalid_resource_is_not_held_and_says_why(kapi: KubeApi) -> None:
    bad = resource("broken")
    bad["spec"]["replicas"] = {"min": 12, "max": 10}
    kapi.put(FLEETSLOS, bad)
    kapi.put(FLEETSLOS, resource())
    held = held_specs(settings(), [], kapi.client())
    assert [h.slo.metadata.name for h in held] == ["qwen"]
    status = status_of(kapi, "broken")
    assert conditions(status) == {"Ready": "False", "Degraded": "True"}
    assert "min (12) must be <= max (10)" in status["conditions"][0]["message"]


def test_without_the_crd_the_controller_says_so() -> None:
    from fleetslo.core.errors import NotFound

    from tests.adapters.kube.kapi import running_api

    with running_api() as bare, pytest.raises(NotFound, match="is the FleetSLO CRD installed"):
        held_specs(settings(), [], bare.client())


def test_the_controller_follows_resources_created_and_changed_while_it_runs(kapi: KubeApi) -> None:
    put_deployment(kapi, 1)
    kapi.emulator.resources[FLEETSLOS] = {}  # the CRD is installed, no FleetSLO yet
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(settings(), [], ENV, stop, kapi.client()), daemon=True)
    thread.start()
    try:
        kapi.put(FLEETSLOS, resource(min_replicas=3))  # created after the start
        _wait(lambda: kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["replicas"] == 3)
        changed = resource(min_replicas=5)
        changed["metadata"]["generation"] = 2
        kapi.put(FLEETSLOS, changed)
        _wait(lambda: kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["replicas"] == 5)
        _wait(lambda: status_of(kapi).get("observedGeneration") == 2)
    finally:
        stop.set()
        thread.join(20)
    assert not thread.is_alive()


def _wait(check: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except KeyError:
            pass
        time.sleep(0.05)
    raise AssertionError("the controller never got there")


def test_a_lasting_conflict_counts_up_on_one_event(kapi: KubeApi) -> None:
    from fleetslo.control.kube.events import KubeEventRecorder

    kapi.put(FLEETSLOS, resource())
    kapi.put(HPAS, {"metadata": {"name": "qwen-hpa", "namespace": "infer"},
                    "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "qwen"}}})  # fmt: skip
    api = kapi.client()
    events = KubeEventRecorder(api, "fleetslo-controller", time.time)
    for _ in range(3):  # three resyncs
        held_specs(settings(), [], api, events)
    (event,) = [dict(o) for k, o in kapi.objects.items() if k[0].plural == "events"]
    assert event["reason"] == "Conflict" and event["count"] == 3


def test_a_workload_that_is_gone_shows_on_the_resource(kapi: KubeApi) -> None:
    kapi.put(FLEETSLOS, resource())  # no Deployment qwen
    api = kapi.client()
    held = held_specs(settings(), [], api)
    running = build(settings(), [h.slo for h in held], ENV, api, status=FleetSLOResources(api), held=held)
    running.controller.tick(time.time())
    status = status_of(kapi)
    assert conditions(status)["Ready"] == "False"
    (ready,) = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready["reason"] == "NotFound" and "qwen" in ready["message"]
