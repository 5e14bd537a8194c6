"""``replicas.actuator: external``: fleetslo decides and publishes, a KEDA ScaledObject or an HPA it
generated writes the count. On kmock with the real client: the workload's /scale is never written,
the desired count is on the controller's /metrics (what the follower's query reads), the generated
follower is no Conflict, and the generated HPA is a valid Kubernetes object."""

from __future__ import annotations

import io
import time
from contextlib import redirect_stdout
from pathlib import Path

import httpx
import kubernetes_validate
import pytest
import yaml
from fleetslo.cli import main
from fleetslo.control.kube.fleetslo_resources import FleetSLOResources
from fleetslo.control.service import Service, build
from fleetslo.control.watch import held_specs
from fleetslo.generate.autoscalers import horizontal_pod_autoscaler, leader_query, scaled_object

from tests.adapters.kube.kapi import KubeApi
from tests.adapters.kube.test_fleetslo_resources import (
    ENV,
    FLEETSLOS,
    HPAS,
    SCALEDOBJECTS,
    conditions,
    put_deployment,
    resource,
    settings,
    status_of,
)


def external(**kw: object) -> dict[str, object]:
    doc = resource(**kw)
    doc["spec"]["replicas"]["actuator"] = "external"  # type: ignore[index]
    return doc


def test_fleetslo_publishes_and_the_generated_follower_writes(kapi: KubeApi) -> None:
    put_deployment(kapi, 2)
    kapi.put(FLEETSLOS, external())
    api = kapi.client()
    (first,) = held_specs(settings(), [], api)
    kapi.put(
        SCALEDOBJECTS, scaled_object(first.slo, "http://prometheus:9090")
    )  # what `autoscaler build` wrote
    kapi.put(HPAS, horizontal_pod_autoscaler(first.slo))
    held = held_specs(settings(), [], api)
    assert held[0].conflict is None  # the follower is fleetslo's hands, not a rival
    service = Service(build(settings(), [h.slo for h in held], ENV, api, status=FleetSLOResources(api),
                            held=held), settings())  # fmt: skip
    service.running.controller.tick(time.time())
    try:
        service.start()
        page = httpx.get(f"http://127.0.0.1:{service.port}/metrics", timeout=5).text
    finally:
        service.stop()
    assert 'fleetslo_controller_desired_replicas{target="qwen"} 3.0' in page  # static: replicas.min
    assert kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["replicas"] == 2  # /scale untouched
    assert not [r for r in kapi.requests("patch") if str(r.url).endswith("/scale")]
    status = status_of(kapi)
    assert status["mode"] == "external" and status["replicas"]["desired"] == 3
    assert conditions(status)["Conflict"] == "False"


def test_the_follower_objects_carry_the_bounds_and_follow_the_leader(kapi: KubeApi) -> None:
    kapi.put(FLEETSLOS, external(min_replicas=2))
    (h,) = held_specs(settings(), [], kapi.client())
    keda = scaled_object(h.slo, "http://prometheus:9090")
    assert keda["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "qwen"}
    assert (keda["spec"]["minReplicaCount"], keda["spec"]["maxReplicaCount"]) == (2, 10)
    (trigger,) = keda["spec"]["triggers"]
    assert trigger["metricType"] == "AverageValue" and trigger["metadata"]["threshold"] == "1"
    assert trigger["metadata"]["ignoreNullValues"] == "false"  # no series: hold, never drop to min
    assert trigger["metadata"]["query"] == leader_query("qwen")
    assert 'target="qwen"' in leader_query("qwen") and "fleetslo_controller_leader == 1" in leader_query(
        "qwen"
    )
    hpa = horizontal_pod_autoscaler(h.slo)
    assert hpa["metadata"]["namespace"] == "infer"
    for version in ("1.27.0", "1.37.0"):
        kubernetes_validate.validate(hpa, version, strict=True)


@pytest.mark.parametrize("kind", ["keda", "hpa"])
def test_autoscaler_build_writes_one_follower_per_spec(tmp_path: Path, kind: str) -> None:
    doc = external()
    doc["metadata"].pop("generation")  # type: ignore[attr-defined]
    spec_file = tmp_path / "fleetslos.yaml"
    spec_file.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [doc]}), encoding="utf-8"
    )
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["autoscaler", "build", "--slo", str(spec_file), "--kind", kind]) == 0
    (obj,) = list(yaml.safe_load_all(out.getvalue()))
    assert obj["kind"] == {"keda": "ScaledObject", "hpa": "HorizontalPodAutoscaler"}[kind]
    assert obj["metadata"]["name"] == "qwen-fleetslo"
