"""The autoscaler that follows fleetslo, for teams whose platform mandates KEDA or an HPA.

With ``replicas.actuator: external`` fleetslo is the brain and another autoscaler the hands: the
controller decides as always and publishes the count on its ``/metrics`` as
``fleetslo_controller_desired_replicas{target}``, and writes nothing to ``/scale``. This module
writes the object that follows that number:

* ``keda``: a ScaledObject with a Prometheus trigger on the leader's gauge. ``AverageValue`` with
  threshold 1 makes the HPA under it ask for exactly ``ceil(value / 1)`` replicas;
* ``hpa``: an ``autoscaling/v2`` HPA on the same series as an External metric (served by
  prometheus-adapter or KEDA's metrics server; the adapter rule is the cluster's).

Both carry the FleetSLO's replica bounds and no stabilization of their own (fleetslo already
limits, stabilizes and cools down). When the series is missing — the controller is down —
the query fails (``ignoreNullValues: false``) and the HPA holds the current count, as fleetslo
holds on missing data; it never drops to the minimum. Beyond about ten replicas the HPA's
cluster-wide 10 % tolerance can leave the count one short of fleetslo's; Kubernetes 1.33's
per-HPA tolerance (``behavior.*.tolerance``, alpha) removes that where it is enabled.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from fleetslo.core import conventions as cv
from fleetslo.core.spec import FleetSLO

KIND_API_VERSION = {"Deployment": "apps/v1", "StatefulSet": "apps/v1",
                    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1"}  # fmt: skip
MANAGED_BY = {"app.kubernetes.io/managed-by": "fleetslo", "fleetslo.io/follows": "desired-replicas"}


class AutoscalerKind(StrEnum):
    KEDA = "keda"
    HPA = "hpa"


def leader_query(name: str) -> str:
    """The desired count of ``name`` as the leading controller publishes it (a follower's gauge
    may be stale from before it lost the lease)."""
    return (f'max({cv.CONTROLLER_DESIRED_REPLICAS}{{target="{name}"}} '
            f"and on(instance) ({cv.CONTROLLER_LEADER} == 1))")  # fmt: skip


def _target_ref(slo: FleetSLO) -> dict[str, str]:
    t = slo.spec.target
    return {"apiVersion": KIND_API_VERSION[t.kind.value], "kind": t.kind.value, "name": t.name}


def _metadata(slo: FleetSLO) -> dict[str, Any]:
    t = slo.spec.target
    return {"name": f"{slo.metadata.name}-fleetslo", "namespace": t.namespace, "labels": dict(MANAGED_BY)}


def _no_stabilization() -> dict[str, Any]:
    return {"scaleUp": {"stabilizationWindowSeconds": 0}, "scaleDown": {"stabilizationWindowSeconds": 0}}


def scaled_object(slo: FleetSLO, prometheus_url: str, polling_interval: int = 15) -> dict[str, Any]:
    """A KEDA ScaledObject whose replica count is fleetslo's desired count for ``slo``."""
    r = slo.spec.replicas
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _metadata(slo),
        "spec": {
            "scaleTargetRef": _target_ref(slo),
            "minReplicaCount": r.min,
            "maxReplicaCount": r.max,
            "pollingInterval": polling_interval,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": _no_stabilization()}},
            "triggers": [{
                "type": "prometheus",
                "metricType": "AverageValue",
                "metadata": {"serverAddress": prometheus_url, "query": leader_query(slo.metadata.name),
                             "threshold": "1", "ignoreNullValues": "false"},
            }],
        },
    }  # fmt: skip


def horizontal_pod_autoscaler(slo: FleetSLO) -> dict[str, Any]:
    """An ``autoscaling/v2`` HPA on fleetslo's desired count as an External metric."""
    r = slo.spec.replicas
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _metadata(slo),
        "spec": {
            "scaleTargetRef": _target_ref(slo),
            "minReplicas": max(1, r.min),  # an HPA cannot hold 0
            "maxReplicas": r.max,
            "metrics": [{
                "type": "External",
                "external": {
                    "metric": {"name": cv.CONTROLLER_DESIRED_REPLICAS,
                               "selector": {"matchLabels": {"target": slo.metadata.name}}},
                    "target": {"type": "AverageValue", "averageValue": "1"},
                },
            }],
            "behavior": _no_stabilization(),
        },
    }  # fmt: skip


def follower(slo: FleetSLO, kind: AutoscalerKind, prometheus_url: str) -> dict[str, Any]:
    return (
        scaled_object(slo, prometheus_url) if kind == AutoscalerKind.KEDA else horizontal_pod_autoscaler(slo)
    )
