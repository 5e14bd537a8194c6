"""FleetSLO custom resources (``fleetslo.io/v1alpha1``), and the other autoscalers on a workload.

``FleetSLOResources`` lists the resources (in the watched namespaces, or cluster-wide), writes
their ``status`` subresource with a merge patch — the only part of the object the controller owns —
and reads one back (a new leader resumes the learned state the old one kept there).
``Autoscalers`` finds an HPA (``autoscaling/v2``) or a KEDA ScaledObject (``keda.sh/v1alpha1``)
whose ``scaleTargetRef`` is a FleetSLO's target: two controllers writing one replica count fight,
so the caller refuses to enforce there. A cluster without KEDA answers 404 for ScaledObjects,
which means "none", not an error.

This module talks to the API and returns plain data; it decides nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from fleetslo.control.kube.client import REQUEST_TIMEOUT, api_call
from fleetslo.control.kube.workloads import where
from fleetslo.core.errors import Forbidden, NotFound
from fleetslo.core.spec import Target
from fleetslo.core.spec.crd import GROUP, PLURAL, VERSION
from fleetslo.core.spec.status import FleetSLOStatus


class FleetSLOResources:
    """Lists FleetSLO resources and writes their status."""

    def __init__(self, api: client.ApiClient) -> None:
        self._objects = client.CustomObjectsApi(api)

    def find(self, namespaces: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Every FleetSLO in ``namespaces`` (empty: in every namespace), as the API returns them."""
        try:
            return self._list(namespaces)
        except NotFound as exc:  # the API server does not serve the kind at all
            raise NotFound(f"{exc} (is the FleetSLO CRD installed? kubectl apply -f "
                           "helm/fleetslo/crds/; or set resources.enabled: false)") from exc  # fmt: skip

    def _list(self, namespaces: Sequence[str]) -> list[dict[str, Any]]:
        if not namespaces:
            with api_call("list FleetSLOs in all namespaces"):
                listed = self._objects.list_cluster_custom_object(
                    GROUP, VERSION, PLURAL, _request_timeout=REQUEST_TIMEOUT
                )
            return _items(listed)
        items: list[dict[str, Any]] = []
        for namespace in namespaces:
            with api_call(f"list FleetSLOs in {namespace}"):
                listed = self._objects.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, _request_timeout=REQUEST_TIMEOUT
                )
            items.extend(_items(listed))
        return items

    def read_status(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The status the resource holds now (what the last leader wrote), ``None`` without one.

        Read with a ``list`` narrowed to the one name (``metadata.name`` field selector), the verb
        the controller's Role already grants for the resync, rather than a ``get`` it may not have.
        """
        with api_call(f"read the status of FleetSLO {namespace}/{name}"):
            listed = self._objects.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, field_selector=f"metadata.name={name}",
                _request_timeout=REQUEST_TIMEOUT,
            )  # fmt: skip
        for item in _items(listed):
            if (item.get("metadata") or {}).get("name") == name:
                status = item.get("status")
                return status if isinstance(status, dict) else None
        return None

    def write_status(self, namespace: str, name: str, status: FleetSLOStatus) -> None:
        body = {"status": status.model_dump(mode="json", exclude_none=True)}
        with api_call(f"write the status of FleetSLO {namespace}/{name}"):
            self._objects.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, name, body, _request_timeout=REQUEST_TIMEOUT,
                _content_type="application/merge-patch+json",
            )  # fmt: skip


log = logging.getLogger("fleetslo.kube")


@dataclass(frozen=True, slots=True)
class Scaler:
    """Another autoscaler on a workload: ``HorizontalPodAutoscaler llm/qwen``."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


#: (kind, group, version, plural) of the autoscalers that write a workload's replica count.
_SCALERS = (
    ("HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers"),
    ("ScaledObject", "keda.sh", "v1alpha1", "scaledobjects"),
)


class Autoscalers:
    """Finds the autoscalers that already scale a target."""

    def __init__(self, api: client.ApiClient) -> None:
        self._objects = client.CustomObjectsApi(api)

    def scaling(self, target: Target) -> list[Scaler]:
        found: list[Scaler] = []
        for kind, group, version, plural in _SCALERS:
            try:
                with api_call(f"list {plural} beside {where(target)}"):
                    listed = self._objects.list_namespaced_custom_object(
                        group, version, target.namespace, plural, _request_timeout=REQUEST_TIMEOUT
                    )
            except NotFound:
                continue  # the API is not served here (no KEDA): nothing of that kind scales it
            except Forbidden as exc:
                # No RBAC to look (an older chart): the guard cannot run, which must be visible.
                log.warning(
                    "cannot check for a %s on %s (%s): grant list on %s", kind, where(target), exc, plural
                )
                continue
            for item in _items(listed):
                if _targets(item, target):
                    meta = item.get("metadata") or {}
                    found.append(Scaler(kind, target.namespace, str(meta.get("name", ""))))
        return found


def _items(listed: object) -> list[dict[str, Any]]:
    items = listed.get("items") if isinstance(listed, dict) else None
    return [i for i in items or [] if isinstance(i, dict)]


def _targets(autoscaler: dict[str, Any], target: Target) -> bool:
    """Whether ``autoscaler``'s scaleTargetRef names ``target`` (KEDA's kind defaults to Deployment)."""
    ref = (autoscaler.get("spec") or {}).get("scaleTargetRef") or {}
    return ref.get("name") == target.name and ref.get("kind", "Deployment") == target.kind.value
