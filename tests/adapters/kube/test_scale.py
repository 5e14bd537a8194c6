"""Scaling Deployments, StatefulSets and LeaderWorkerSets with the official client against kmock."""

from __future__ import annotations

from typing import Any

import kmock
import pytest
from fleetslo.control.actuators.kubernetes import KubeReplicaActuator
from fleetslo.control.kube.workloads import Workloads
from fleetslo.core.errors import ApiUnavailable, Conflict, Forbidden, Invalid, NotFound, RateLimited
from fleetslo.core.model import ReplicaCounts
from fleetslo.core.spec import Target, TargetKind

from tests.adapters.kube.kapi import KubeApi

RESOURCES = {
    TargetKind.DEPLOYMENT: "apps/v1/deployments",
    TargetKind.STATEFULSET: "apps/v1/statefulsets",
    TargetKind.LEADERWORKERSET: "leaderworkerset.x-k8s.io/v1/leaderworkersets",
}

DEPLOYMENTS = RESOURCES[TargetKind.DEPLOYMENT]
QWEN = Target(namespace="infer", name="qwen", model_name="qwen")


def workload(kind: TargetKind, replicas: int, ready: int, existing: int | None = None) -> dict[str, Any]:
    return {
        "apiVersion": RESOURCES[kind].rsplit("/", 1)[0], "kind": kind.value,
        "metadata": {"name": "qwen", "namespace": "infer"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "qwen"}}},
        "status": {"replicas": existing if existing is not None else replicas, "readyReplicas": ready},
    }  # fmt: skip


@pytest.mark.parametrize("kind", list(RESOURCES))  # the kinds with a scale subresource
def test_reads_counts_and_scales_through_the_scale_subresource(kapi: KubeApi, kind: TargetKind) -> None:
    kapi.put(RESOURCES[kind], workload(kind, replicas=4, ready=3))
    target = Target(kind=kind, namespace="infer", name="qwen", model_name="qwen")
    actuator = KubeReplicaActuator(Workloads(kapi.client()))
    state = actuator.read(target)
    assert state.desired == 4 and state.counts == ReplicaCounts(ready=3, starting=1, draining=0)
    result = actuator.scale(target, 6)
    assert result.changed
    assert kapi.get(RESOURCES[kind], "infer", "qwen")["spec"]["replicas"] == 6
    patch = kapi.requests("patch")[-1]
    plural = RESOURCES[kind].rsplit("/", 1)[1]
    assert str(patch.url.path).endswith(f"/namespaces/infer/{plural}/qwen/scale")
    assert patch.headers["Content-Type"] == "application/merge-patch+json"
    assert patch.data == {"spec": {"replicas": 6}}


def test_no_write_when_the_desired_count_is_already_there(kapi: KubeApi) -> None:
    kapi.put(RESOURCES[TargetKind.DEPLOYMENT], workload(TargetKind.DEPLOYMENT, replicas=5, ready=5))
    actuator = KubeReplicaActuator(Workloads(kapi.client()))
    result = actuator.scale(Target(namespace="infer", name="qwen", model_name="qwen"), 5)
    assert not result.changed
    assert kapi.requests("patch") == []


def test_pods_beyond_the_desired_count_are_draining(kapi: KubeApi) -> None:
    kapi.put(DEPLOYMENTS, workload(TargetKind.DEPLOYMENT, replicas=3, ready=5, existing=5))
    state = KubeReplicaActuator(Workloads(kapi.client())).read(QWEN)
    assert state.counts == ReplicaCounts(ready=3, starting=0, draining=2)


def test_a_missing_workload_is_not_found(kapi: KubeApi) -> None:
    actuator = KubeReplicaActuator(Workloads(kapi.client()))
    with pytest.raises(NotFound) as caught:
        actuator.read(Target(namespace="infer", name="ghost", model_name="q"))
    assert "Deployment infer/ghost" in str(caught.value)
    assert caught.value.__cause__ is not None  # the ApiException stays attached


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, Forbidden), (403, Forbidden), (404, NotFound), (409, Conflict), (422, Invalid), (400, Invalid),
     (429, RateLimited), (500, ApiUnavailable), (503, ApiUnavailable)],
)  # fmt: skip
def test_api_errors_map_to_the_error_tree(kapi: KubeApi, status: int, error: type[Exception]) -> None:
    kapi.put(RESOURCES[TargetKind.DEPLOYMENT], workload(TargetKind.DEPLOYMENT, replicas=2, ready=2))
    kapi.react(kmock.method.PATCH, kmock.KubernetesError(status, "Injected", f"injected {status}"))
    with pytest.raises(error) as caught:
        KubeReplicaActuator(Workloads(kapi.client())).scale(QWEN, 3)
    assert f"injected {status}" in str(caught.value)


def test_retry_after_is_kept_for_the_back_off(kapi: KubeApi) -> None:
    kapi.put(RESOURCES[TargetKind.DEPLOYMENT], workload(TargetKind.DEPLOYMENT, replicas=2, ready=2))
    status = {"kind": "Status", "apiVersion": "v1", "code": 429, "message": "slow down"}
    kapi.react(kmock.method.PATCH, kmock.Response(status=429, headers={"Retry-After": "7"}, payload=status))
    with pytest.raises(RateLimited) as caught:
        KubeReplicaActuator(Workloads(kapi.client())).scale(QWEN, 3)
    assert caught.value.retry_after == 7.0


def test_an_api_server_that_is_gone_is_transient() -> None:
    from fleetslo.control.kube.client import client_for

    from tests.prometheus import free_port

    api = client_for(f"http://127.0.0.1:{free_port()}")
    api.configuration.retries = 0
    with pytest.raises(ApiUnavailable):
        Workloads(api).get(Target(namespace="infer", name="qwen", model_name="q"))
