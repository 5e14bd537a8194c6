"""What the controller reports on a FleetSLO resource (``status``), as ``kubectl get fleetslo`` shows it.

Field names follow Kubernetes' convention (camelCase) because only the controller writes them;
the spec keeps the file format's names so one document works as a file and as a resource.
Every measured value is optional: a value that could not be measured is left out, never 0.
The CRD's status schema is generated from these models (``fleetslo.core.spec.crd``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from fleetslo.core.config import Frozen


class ConditionType(StrEnum):
    """The conditions a FleetSLO carries (``status.conditions[].type``)."""

    #: The controller holds this target: spec valid, workload found, reconciles running.
    READY = "Ready"
    #: It decides on partial, stale or missing data, or the spec cannot be served as written.
    DEGRADED = "Degraded"
    #: It decides and reports but writes nothing (``mode: advisory``, ``--dry-run`` or a conflict).
    ADVISORY = "Advisory"
    #: Writes to the workload or the gates fail.
    ACTUATION_FAILING = "ActuationFailing"
    #: Another autoscaler (an HPA, a KEDA ScaledObject) already scales the workload.
    CONFLICT = "Conflict"


class Condition(Frozen):
    """A ``metav1.Condition``."""

    type: ConditionType
    status: str = Field(pattern="^(True|False|Unknown)$")
    reason: str = Field(min_length=1, max_length=1024, pattern="^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = Field(default="", max_length=32768)
    lastTransitionTime: str
    observedGeneration: int | None = Field(default=None, ge=0)


class ReplicaStatus(Frozen):
    current: int | None = Field(default=None, ge=0)
    desired: int | None = Field(default=None, ge=0)
    ready: int | None = Field(default=None, ge=0)


class ObservedLatency(Frozen):
    """The latest observation, at each objective's quantile (p90 unless the spec says otherwise)."""

    ttftSeconds: float | None = Field(default=None, ge=0)
    tpotSeconds: float | None = Field(default=None, ge=0)
    #: The share of requests within both thresholds over the objective window (the lower of the two).
    attainment: float | None = Field(default=None, ge=0, le=1)
    requestsPerSecond: float | None = Field(default=None, ge=0)


class LastDecision(Frozen):
    time: str
    reason: str
    message: str = ""
    replicas: int | None = Field(default=None, ge=0)
    batchLimit: int | None = Field(default=None, ge=0)
    #: Whether it was written (False in advisory mode, or when nothing changed).
    applied: bool = False


class FleetSLOStatus(Frozen):
    observedGeneration: int | None = Field(default=None, ge=0)
    #: What the controller actually does: enforce, or advisory (by spec, dry run or conflict).
    mode: str | None = None
    replicas: ReplicaStatus = ReplicaStatus()
    batchLimit: int | None = Field(default=None, ge=0)
    observed: ObservedLatency = ObservedLatency()
    lastDecision: LastDecision | None = None
    #: The autoscaler the controller found on the workload (``HorizontalPodAutoscaler ns/name``).
    conflictsWith: str | None = None
    conditions: tuple[Condition, ...] = ()
    #: What the policy learned (``fleetslo.control.state``: ``{schema, policy, savedAt, start,
    #: learned}``, at most 16 KiB), so a restarted controller or a new leader starts warm;
    #: ``start.learned: discarded`` marks a start from the prior because the record was unusable.
    capacityModel: dict[str, Any] | None = None
