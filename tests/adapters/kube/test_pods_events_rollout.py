"""Pods by selector, the deletion-cost mark, Events on the target, and the engine-args rollout — on kmock."""

from __future__ import annotations

from typing import Any

import pytest
from fleetslo.control.actuators.engine_args import EngineArgsActuator
from fleetslo.control.kube.events import KubeEventRecorder
from fleetslo.control.kube.pods import DELETION_COST, KubePodDirectory, KubePodMarker
from fleetslo.control.kube.workloads import Workloads
from fleetslo.control.ports import PodEndpoint
from fleetslo.core.spec import Target, TargetKind
from fleetslo.testing import FakeClock

from tests.adapters.kube.kapi import KubeApi

DEPLOYMENT = Target(namespace="infer", name="qwen", model_name="qwen")
LWS_RESOURCE = "leaderworkerset.x-k8s.io/v1/leaderworkersets"
LWS = Target(kind=TargetKind.LEADERWORKERSET, namespace="infer", name="big", model_name="big")


def pod(name: str, labels: dict[str, str], ip: str, ready: bool, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "infer", "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    conditions = [{"type": "Ready", "status": str(ready)}]
    return {"metadata": meta, "status": {"podIP": ip, "conditions": conditions}}


def deployment(args: list[str]) -> dict[str, Any]:
    container = {"name": "vllm", "image": "vllm/vllm-openai", "args": args}
    return {
        "metadata": {"name": "qwen", "namespace": "infer"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "qwen"}},
                 "template": {"spec": {"containers": [{"name": "sidecar", "image": "fleetslo"}, container]}}},
    }  # fmt: skip


def test_lists_the_targets_ready_pods_by_its_selector(kapi: KubeApi) -> None:
    kapi.put("apps/v1/deployments", deployment([]))
    kapi.put("v1/pods", pod("qwen-a", {"app": "qwen"}, "10.0.0.1", True))
    kapi.put("v1/pods", pod("qwen-b", {"app": "qwen"}, "10.0.0.2", False))
    kapi.put("v1/pods", pod("qwen-c", {"app": "qwen"}, "10.0.0.3", True, deleting=True))
    kapi.put("v1/pods", pod("other", {"app": "other"}, "10.0.0.9", True))
    api = kapi.client()
    pods = KubePodDirectory(api, Workloads(api)).pods(DEPLOYMENT)
    assert pods == [
        PodEndpoint("qwen-a", "10.0.0.1", True),
        PodEndpoint("qwen-b", "10.0.0.2", False),
        PodEndpoint("qwen-c", "10.0.0.3", False, terminating=True),  # not serving: leaving
    ]
    assert kapi.requests("get")[-1].params["labelSelector"] == "app=qwen"


def test_leaderworkerset_pods_are_its_group_leaders(kapi: KubeApi) -> None:
    kapi.put(LWS_RESOURCE, {"metadata": {"name": "big", "namespace": "infer"}})
    name, index = "leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/worker-index"
    kapi.put("v1/pods", pod("big-0", {name: "big", index: "0"}, "10.0.1.1", True))
    kapi.put("v1/pods", pod("big-0-1", {name: "big", index: "1"}, "10.0.1.2", True))
    api = kapi.client()
    assert [p.name for p in KubePodDirectory(api, Workloads(api)).pods(LWS)] == ["big-0"]


def test_drained_deployment_pods_get_the_lowest_deletion_cost_and_lose_it_when_kept(kapi: KubeApi) -> None:
    kapi.put("v1/pods", pod("qwen-a", {"app": "qwen"}, "10.0.0.1", True))
    marker = KubePodMarker(kapi.client())
    marker.mark(DEPLOYMENT, ["qwen-a"])
    assert kapi.get("v1/pods", "infer", "qwen-a")["metadata"]["annotations"][DELETION_COST] == "-1000"
    marker.unmark(DEPLOYMENT, ["qwen-a"])
    assert DELETION_COST not in kapi.get("v1/pods", "infer", "qwen-a")["metadata"].get("annotations", {})


def test_ordinal_workloads_are_never_annotated(kapi: KubeApi) -> None:
    KubePodMarker(kapi.client()).mark(LWS, ["big-3"])
    assert kapi.requests("patch") == []


def test_events_land_on_the_target_and_repeats_are_counted(kapi: KubeApi) -> None:
    clock = FakeClock(1_800_000_000.0)
    recorder = KubeEventRecorder(kapi.client(), "fleetslo-controller", clock)
    recorder.event(DEPLOYMENT, "ScaleUpSLOBreach", "p90 TTFT 3.1s > 2s: 4 -> 6 replicas")
    recorder.event(DEPLOYMENT, "FailedRescale", "forbidden", warning=True)
    clock.advance(30)
    recorder.event(DEPLOYMENT, "FailedRescale", "forbidden", warning=True)
    events = {key[2]: dict(obj) for key, obj in kapi.objects.items() if key[0].plural == "events"}
    assert len(events) == 2
    scale = next(e for e in events.values() if e["reason"] == "ScaleUpSLOBreach")
    assert scale["involvedObject"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "qwen",
                                       "namespace": "infer"}  # fmt: skip
    assert scale["type"] == "Normal" and scale["source"] == {"component": "fleetslo-controller"}
    failed = next(e for e in events.values() if e["reason"] == "FailedRescale")
    assert failed["type"] == "Warning" and failed["count"] == 2


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model", "qwen", "--max-num-seqs", "64"], ["--model", "qwen", "--max-num-seqs", "48"]),
        (["--max-num-seqs=64", "--port", "8000"], ["--max-num-seqs=48", "--port", "8000"]),
        (["vllm serve q --max-num-seqs 64 --port 8000"], ["vllm serve q --max-num-seqs 48 --port 8000"]),
    ],
)
def test_engine_args_rollout_patches_max_num_seqs_once_the_change_lasts(
    kapi: KubeApi, args: list[str], expected: list[str]
) -> None:
    kapi.put("apps/v1/deployments", deployment(args))
    clock = FakeClock(0.0)
    actuator = EngineArgsActuator(Workloads(kapi.client()), clock, lasting=600, min_interval=1800)
    assert actuator.read_limit(DEPLOYMENT) == 64
    first = actuator.set_limit(DEPLOYMENT, 48)
    assert not first.changed and "waits" in first.message
    clock.advance(601)
    rolled = actuator.set_limit(DEPLOYMENT, 48)
    assert rolled.changed
    containers = kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["template"]["spec"]["containers"]
    assert containers[1]["args"] == expected and containers[0] == {"name": "sidecar", "image": "fleetslo"}
    patch = kapi.requests("patch")[-1]
    assert patch.headers["Content-Type"] == "application/json-patch+json"
    assert patch.data[0] == {"op": "test", "path": "/spec/template/spec/containers/1/name", "value": "vllm"}
    assert actuator.read_limit(DEPLOYMENT) == 48


def test_engine_args_rollouts_are_rate_limited_and_skip_unchanged_limits(kapi: KubeApi) -> None:
    kapi.put("apps/v1/deployments", deployment(["--max-num-seqs", "64"]))
    clock = FakeClock(0.0)
    actuator = EngineArgsActuator(Workloads(kapi.client()), clock, lasting=0, min_interval=1800)
    assert not actuator.set_limit(DEPLOYMENT, 64).changed
    assert actuator.set_limit(DEPLOYMENT, 32).changed
    clock.advance(60)
    held = actuator.set_limit(DEPLOYMENT, 64)
    assert not held.changed and "at most one per 1800s" in held.message
    clock.advance(1800)
    assert actuator.set_limit(DEPLOYMENT, 64).changed
    assert len(kapi.requests("patch")) == 2


def test_a_flag_not_set_yet_is_appended(kapi: KubeApi) -> None:
    kapi.put("apps/v1/deployments", deployment(["--model", "qwen"]))
    actuator = EngineArgsActuator(Workloads(kapi.client()), FakeClock(0.0), lasting=0, container="vllm")
    assert actuator.read_limit(DEPLOYMENT) is None
    assert actuator.set_limit(DEPLOYMENT, 32).changed
    containers = kapi.get("apps/v1/deployments", "infer", "qwen")["spec"]["template"]["spec"]["containers"]
    assert containers[1]["args"] == ["--model", "qwen", "--max-num-seqs=32"]
