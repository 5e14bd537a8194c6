"""The scaled workloads (Deployment, StatefulSet, LeaderWorkerSet) as the Kubernetes API shows them.

One table says where each kind lives (group, version, plural), where its pod templates are and how
its pods are selected; every kind is then read and written the same way through the generic object
endpoints, ``/scale`` included (LeaderWorkerSet is a custom resource with a scale subresource).
Writes are patches, never replaces: a merge patch of ``spec.replicas`` on ``/scale`` (the only field
an autoscaler should own) and JSON patches with a ``test`` guard for pod templates. The scale patch
carries the ``metadata.resourceVersion`` it was planned against when given, so the API server
answers 409 Conflict instead of writing over a change made since (optimistic concurrency).

This module talks to the API and returns plain data; it decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from fleetslo.control.kube.client import api_call
from fleetslo.core.errors import Invalid
from fleetslo.core.model import ReplicaCounts
from fleetslo.core.spec import Target, TargetKind

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"


@dataclass(frozen=True, slots=True)
class Kind:
    group: str
    version: str
    plural: str
    #: JSON pointers of the pod templates whose containers run vLLM.
    templates: tuple[str, ...]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


KINDS: dict[TargetKind, Kind] = {
    TargetKind.DEPLOYMENT: Kind("apps", "v1", "deployments", ("/spec/template",)),
    TargetKind.STATEFULSET: Kind("apps", "v1", "statefulsets", ("/spec/template",)),
    TargetKind.LEADERWORKERSET: Kind(
        "leaderworkerset.x-k8s.io",
        "v1",
        "leaderworkersets",
        ("/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate"),
    ),
}


def where(target: Target) -> str:
    """``Deployment infer/vllm`` — how messages name a target."""
    return f"{target.kind.value} {target.namespace}/{target.name}"


class Workloads:
    """Reads and patches scaled workloads through the generic object API."""

    def __init__(self, api: client.ApiClient) -> None:
        self._objects = client.CustomObjectsApi(api)

    def get(self, target: Target) -> dict[str, Any]:
        kind = KINDS[target.workload_kind]
        with api_call(f"read {where(target)}") as timeout:
            obj = self._objects.get_namespaced_custom_object(
                kind.group, kind.version, target.namespace, kind.plural, target.name,
                _request_timeout=timeout,
            )  # fmt: skip
        if not isinstance(obj, dict):
            raise Invalid(f"read {where(target)}: expected an object, got {type(obj).__name__}")
        return obj

    def scale(self, target: Target, replicas: int, resource_version: str | None = None) -> None:
        kind = KINDS[target.workload_kind]
        body: dict[str, Any] = {"spec": {"replicas": replicas}}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        with api_call(f"scale {where(target)} to {replicas}") as timeout:
            self._objects.patch_namespaced_custom_object_scale(
                kind.group, kind.version, target.namespace, kind.plural, target.name,
                body, _request_timeout=timeout,
            )  # fmt: skip

    def json_patch(self, target: Target, operations: Sequence[Mapping[str, Any]], what: str) -> None:
        kind = KINDS[target.workload_kind]
        with api_call(f"{what} on {where(target)}") as timeout:
            self._objects.patch_namespaced_custom_object(
                kind.group, kind.version, target.namespace, kind.plural, target.name,
                [dict(op) for op in operations], _request_timeout=timeout,
                _content_type="application/json-patch+json",
            )  # fmt: skip


def replica_counts(obj: Mapping[str, Any]) -> tuple[int, ReplicaCounts]:
    """``(desired, counts)`` from a workload's spec and status.

    Ready replicas are the status's ``readyReplicas``; replicas wanted but not ready yet are
    *starting* (a pod being created counts: it is coming); replicas beyond the desired count are
    *draining* (on their way out). A missing status (just created) means nothing is ready yet.
    """
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    desired = int(spec.get("replicas", 1))
    ready = int(status.get("readyReplicas") or 0)
    existing = int(status.get("replicas") or 0)
    counts = ReplicaCounts(
        ready=min(ready, desired),
        starting=max(0, desired - ready),
        draining=max(0, existing - desired),
    )
    return desired, counts


def resource_version(obj: Mapping[str, Any]) -> str | None:
    """The object's ``metadata.resourceVersion`` (``None`` if the API gave none)."""
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version is not None else None


def pod_selector(target: Target, obj: Mapping[str, Any]) -> str:
    """The label selector of the pods that serve ``target`` (for LeaderWorkerSet: the leaders)."""
    if target.kind == TargetKind.LEADERWORKERSET:
        return f"{LWS_NAME_LABEL}={target.name},{LWS_WORKER_INDEX_LABEL}=0"
    selector = (obj.get("spec") or {}).get("selector") or {}
    return label_selector(selector)


def label_selector(selector: Mapping[str, Any]) -> str:
    """A ``LabelSelector`` object as the string the list API takes."""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], sorted(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
