"""The pods of a target: listed by the workload's own selector, and marked for removal.

``KubePodDirectory`` implements ``PodDirectory`` (the direct source scrapes the pods it lists; the
gate actuator talks to them). ``KubePodMarker`` sets ``controller.kubernetes.io/pod-deletion-cost``
on drained pods of a Deployment, so the ReplicaSet removes exactly those on the next scale-down
(StatefulSets and LeaderWorkerSets always remove the highest ordinals; nothing to mark).

A pod is ready when its ``Ready`` condition is ``True`` and it is not being deleted.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubernetes import client

from fleetslo.control.kube.client import api_call
from fleetslo.control.kube.workloads import Workloads, pod_selector, where
from fleetslo.control.ports import PodEndpoint
from fleetslo.core.spec import Target, TargetKind

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


class KubePodDirectory:
    """Lists a target's pods; the selector is read once per target (it is immutable)."""

    def __init__(self, api: client.ApiClient, workloads: Workloads) -> None:
        self._core = client.CoreV1Api(api)
        self._workloads = workloads
        self._selectors: dict[tuple[str, str, str], str] = {}

    def pods(self, target: Target) -> list[PodEndpoint]:
        selector = self._selector(target)
        with api_call(f"list pods of {where(target)}") as timeout:
            listed = self._core.list_namespaced_pod(
                target.namespace, label_selector=selector, _request_timeout=timeout
            )
        return sorted((endpoint(pod) for pod in listed.items), key=lambda p: p.name)

    def _selector(self, target: Target) -> str:
        key = (target.kind.value, target.namespace, target.name)
        if key not in self._selectors:
            self._selectors[key] = pod_selector(target, self._workloads.get(target))
        return self._selectors[key]


def endpoint(pod: client.V1Pod) -> PodEndpoint:
    """What the controller needs of a pod: its name, its IP and whether it serves."""
    meta, status = pod.metadata or client.V1ObjectMeta(), pod.status or client.V1PodStatus()
    ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions or [])
    terminating = meta.deletion_timestamp is not None
    return PodEndpoint(
        name=meta.name or "", ip=status.pod_ip or "", ready=ready and not terminating, terminating=terminating
    )


class KubePodMarker:
    """Marks drained pods as the first to remove (Deployments only) and unmarks kept ones."""

    def __init__(self, api: client.ApiClient, cost: int = -1000) -> None:
        self._core = client.CoreV1Api(api)
        self.cost = cost

    def mark(self, target: Target, names: Sequence[str]) -> None:
        self._annotate(target, names, str(self.cost))

    def unmark(self, target: Target, names: Sequence[str]) -> None:
        self._annotate(target, names, None)

    def _annotate(self, target: Target, names: Sequence[str], value: str | None) -> None:
        if target.kind != TargetKind.DEPLOYMENT:
            return  # ordinal workloads remove the highest ordinals, whatever the annotations say
        body = {"metadata": {"annotations": {DELETION_COST: value}}}
        for name in names:
            with api_call(f"annotate pod {target.namespace}/{name}") as timeout:
                self._core.patch_namespaced_pod(name, target.namespace, body, _request_timeout=timeout)
