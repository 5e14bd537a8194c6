"""The FleetSLO spec, version 1 (``apiVersion: fleetslo/v1``, ``kind: FleetSLO``): the contract in DESIGN.md.

One document per scaled target. Each version of the spec lives in its own module (as sloth keeps
``pkg/prometheus/api/v1``) so a future ``v2`` can sit beside it with a conversion; ``fleetslo.core.spec``
re-exports the version the rest of the code is written against.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from fleetslo.core.config import Frozen, PositiveDuration, load
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import resource
from fleetslo.core.spec.resource import RESOURCE_API_VERSION

__all__ = ["RESOURCE_API_VERSION"]  # also served as a custom resource: see fleetslo.core.spec.crd


class CelRule:
    """A cross-field check this model makes in Python, as the API server's CEL rule says it
    (``x-kubernetes-validations``); the CRD generator copies it, a test runs both on the same input."""

    def __init__(self, rule: str, message: str) -> None:
        self.rule, self.message = rule, message


class TargetKind(StrEnum):
    """Kubernetes workloads."""

    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"
    LEADERWORKERSET = "LeaderWorkerSet"


class StandaloneKind(StrEnum):
    """Targets ``fleetslo run`` serves without a Kubernetes cluster."""

    #: Replicas at fixed addresses (VMs, bare metal, Slurm): observed, limited through their gates,
    #: never scaled. ``endpoints`` lists them.
    STATIC = "Static"
    #: Replicas as processes on this machine, started from a command template (``local``).
    LOCAL = "Local"


STANDALONE_KINDS = frozenset(StandaloneKind)


class StaticEndpoint(Frozen):
    """One replica of a ``Static`` target: its sidecar (``/metrics``) and, for the gate actuator
    and drains, its gate's admin API."""

    name: str = Field(min_length=1, max_length=253)
    sidecar_url: str = Field(pattern=r"^https?://")
    admin_url: str | None = Field(default=None, pattern=r"^https?://")


class LocalFleet(Frozen):
    """How a ``Local`` target starts a replica: the engine's command line, with ``{port}``,
    ``{model_name}``, ``{cpus}`` and ``{replica}`` filled in per replica (in ``env`` values too).
    Each replica gets the next entry of ``cpus`` (round robin; ``taskset`` binds it there), and a
    sidecar with the gate in front of its engine. One that is not healthy ``start_timeout`` after
    its start is stopped. The engine answers ``/health`` when ready, as vLLM does."""

    command: tuple[str, ...] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cpus: tuple[str, ...] = ()
    start_timeout: PositiveDuration = 300.0
    #: Replicas started (and waited for) before the first tick.
    warm: int = Field(default=1, ge=0, le=64)
    #: The replicas' logs, the gate token and ``endpoints.json`` (the gates taking requests now);
    #: default: a new temporary folder, named in the controller's log.
    workdir: str | None = None


class Target(Frozen):
    """The workload that serves one model and the name vLLM reports it under."""

    kind: TargetKind | StandaloneKind = TargetKind.DEPLOYMENT
    namespace: str = Field(default="default", min_length=1, max_length=63)
    name: str = Field(min_length=1, max_length=253)
    model_name: str = Field(min_length=1)
    endpoints: tuple[StaticEndpoint, ...] = ()
    local: LocalFleet | None = None

    @field_validator("kind", mode="before")
    @classmethod
    def _one_kind(cls, value: Any) -> Any:
        # One message naming every kind, rather than one per enum of the union.
        for kinds in (TargetKind, StandaloneKind):
            if value in {k.value for k in kinds} or isinstance(value, kinds):
                return kinds(value)
        known = ", ".join(k.value for kinds in (TargetKind, StandaloneKind) for k in kinds)
        raise ValueError(f"must be one of {known}")

    @property
    def workload_kind(self) -> TargetKind:
        """The Kubernetes workload kind; a ``ConfigError`` for a target outside Kubernetes."""
        if isinstance(self.kind, StandaloneKind):
            raise ConfigError(f"target {self.name}: a {self.kind} target is not a Kubernetes workload")
        return self.kind

    @model_validator(mode="after")
    def _kind_has_its_fields(self) -> Target:
        if self.kind is StandaloneKind.STATIC and not self.endpoints:
            raise ValueError("a Static target lists its replicas in endpoints")
        if self.kind is StandaloneKind.LOCAL and self.local is None:
            raise ValueError("a Local target says how to start a replica in local")
        if self.kind is not StandaloneKind.STATIC and self.endpoints:
            raise ValueError(f"endpoints apply to kind Static only (kind is {self.kind})")
        if self.kind is not StandaloneKind.LOCAL and self.local is not None:
            raise ValueError(f"local applies to kind Local only (kind is {self.kind})")
        return self


class Objective(Frozen):
    """``quantile`` of a latency must stay at or under ``threshold`` over ``window``.

    ``buckets`` are the latency histogram's bucket edges when vLLM runs with
    ``--custom-histogram-buckets`` (unset: vLLM's defaults). Alert rules count requests over the
    threshold from the bucket at the threshold, so they need to know which edges exist.
    """

    quantile: float = Field(default=0.9, gt=0, lt=1)
    threshold: PositiveDuration
    window: PositiveDuration = 60.0
    #: At most 128 edges (vLLM's lists have about 20): the API server's CEL cost budget needs a bound.
    #: As a resource the list is a set (no repeats), so sorted means strictly increasing there too.
    buckets: tuple[float, ...] | None = Field(
        default=None, max_length=128, json_schema_extra={"x-kubernetes-list-type": "set"}
    )

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule("!has(self.buckets) || (size(self.buckets) > 0 && self.buckets.all(b, b > 0.0)"
                " && self.buckets.isSorted())",
                "buckets: edges must be positive and strictly increasing, or left out"),
    )  # fmt: skip

    @field_validator("buckets")
    @classmethod
    def _check_buckets(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("must list at least one bucket edge (or be left out)")
        if any(b <= 0 for b in value) or any(b >= a for b, a in itertools.pairwise(value)):
            raise ValueError("edges must be positive and strictly increasing, as vLLM requires")
        return value


class Availability(Frozen):
    """Optional: the share of requests that must finish without an error."""

    target: float = Field(gt=0, lt=1)


#: Bounds on the error-budget period: at least a day, at most a year.
PERIOD_MIN, PERIOD_MAX = 86_400.0, 366 * 86_400.0


class Objectives(Frozen):
    """The latency objectives, and the period their error budget is counted over (default 28d)."""

    ttft: Objective
    tpot: Objective
    availability: Availability | None = None
    period: PositiveDuration = 28 * 86_400.0

    @field_validator("period")
    @classmethod
    def _check_period(cls, value: float) -> float:
        if not PERIOD_MIN <= value <= PERIOD_MAX:
            raise ValueError("must be between 1d and 366d")
        return value

    @property
    def observation_window(self) -> float:
        """The window one observation covers: the longer of the two objectives' windows."""
        return max(self.ttft.window, self.tpot.window)


class ReplicaActuatorKind(StrEnum):
    #: fleetslo writes the workload's ``/scale`` subresource.
    SCALE = "scale"
    #: fleetslo publishes ``fleetslo_controller_desired_replicas{target}`` and another autoscaler
    #: (a KEDA ScaledObject or an HPA, from ``fleetslo autoscaler build``) writes the count.
    EXTERNAL = "external"


class Replicas(Frozen):
    """Bounds on the replica count, how long a new replica takes to serve, and who writes it."""

    min: int = Field(default=1, ge=0, le=10_000)
    max: int = Field(ge=1, le=10_000)
    cold_start: PositiveDuration = 300.0
    actuator: ReplicaActuatorKind = ReplicaActuatorKind.SCALE

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule("(has(self.min) ? self.min : 1) <= self.max", "min must be <= max"),
    )

    @model_validator(mode="after")
    def _ordered(self) -> Replicas:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self


class BatchActuator(StrEnum):
    GATE = "gate"
    ENGINE_ARGS = "engine-args"
    NONE = "none"


class BatchLimit(Frozen):
    """Bounds on the per-replica concurrent-sequence limit and how it is applied."""

    min: int = Field(default=1, ge=1, le=65_536)
    max: int = Field(default=256, ge=1, le=65_536)
    actuator: BatchActuator = BatchActuator.NONE

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule("(has(self.min) ? self.min : 1) <= (has(self.max) ? self.max : 256)", "min must be <= max"),
    )

    @model_validator(mode="after")
    def _ordered(self) -> BatchLimit:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self


class Cost(Frozen):
    per_replica_hour: float = Field(default=0.0, ge=0)
    gpus_per_replica: int = Field(default=1, ge=1, le=64)


#: An RFC 3339 instant with its offset, as Kubernetes writes times: ``2026-12-01T18:00:00Z``.
RFC3339 = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$"


class ForecastEvent(Frozen):
    """Traffic known ahead: ``rate_factor`` × the usual level from ``start`` until ``end`` (or for
    ``duration``). A launch, a campaign, a batch job: the forecast scales what it expects over the
    event and keeps what it observes then out of what it learns about ordinary days."""

    name: str = Field(min_length=1, max_length=63)
    start: str = Field(pattern=RFC3339)
    end: str | None = Field(default=None, pattern=RFC3339)
    #: A duration such as ``1h`` (instead of ``end``).
    duration: PositiveDuration | None = None
    rate_factor: float = Field(gt=0, le=100)

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule("has(self.end) != has(self.duration)", "give either end or duration"),
        CelRule("!has(self.end) || timestamp(self.end) > timestamp(self.start)", "end must be after start"),
    )

    @model_validator(mode="after")
    def _one_end(self) -> ForecastEvent:
        if (self.end is None) == (self.duration is None):
            raise ValueError("give either end or duration")
        if self.end is not None and self.end_s <= self.start_s:
            raise ValueError(f"end ({self.end}) must be after start ({self.start})")
        return self

    @property
    def start_s(self) -> float:
        """Unix seconds."""
        return datetime.fromisoformat(self.start).timestamp()

    @property
    def end_s(self) -> float:
        if self.end is not None:
            return datetime.fromisoformat(self.end).timestamp()
        assert self.duration is not None
        return self.start_s + self.duration


class Forecast(Frozen):
    """What the controller's forecast is told ahead (optional)."""

    events: tuple[ForecastEvent, ...] = Field(default=(), max_length=64)


class Mode(StrEnum):
    ENFORCE = "enforce"
    ADVISORY = "advisory"


class Metadata(Frozen):
    name: str = Field(min_length=1, max_length=253)


class FleetSLOSpec(Frozen):
    target: Target
    objectives: Objectives
    replicas: Replicas
    batch_limit: BatchLimit = BatchLimit()
    cost: Cost = Cost()
    mode: Mode = Mode.ENFORCE
    #: An engine profile (a packaged name or a YAML file, e.g. from ``fleetslo profile``) that the
    #: capacity model may start from before it has learned the target's own latency.
    profile: str | None = None
    #: Known events the forecast cannot learn from history (``forecast.events``).
    forecast: Forecast | None = None

    @model_validator(mode="after")
    def _static_is_not_scaled(self) -> FleetSLOSpec:
        t, r = self.target, self.replicas
        if (
            t.kind is StandaloneKind.STATIC
            and self.mode is Mode.ENFORCE
            and not r.min == r.max == len(t.endpoints)
        ):
            raise ValueError(
                f"a Static target cannot be scaled: with mode enforce, replicas.min and max must both be "
                f"{len(t.endpoints)} (its endpoints), or use mode: advisory"
            )
        return self


class FleetSLO(Frozen):
    """One scaled target and the latency objectives fleetslo holds it to."""

    #: ``fleetslo/v1`` in files; ``fleetslo.io/v1alpha1`` as a Kubernetes resource (same spec).
    api_version: Literal["fleetslo/v1", "fleetslo.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["FleetSLO"]
    metadata: Metadata
    spec: FleetSLOSpec


def load_fleetslo_documents(documents: list[Any], source: str) -> list[FleetSLO]:
    """Every FleetSLO in a multi-document YAML file, or in ``kubectl get fleetslo -o yaml`` output
    (a List of resources); names must be unique."""
    specs = []
    for i, doc in enumerate(resource.normalize(d) for d in resource.documents(documents)):
        if not isinstance(doc, Mapping):
            raise ConfigError(f"{source}: document {i} is not a mapping")
        specs.append(load(FleetSLO, doc, f"{source}[{i}]"))
    names = [s.metadata.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{source}: metadata.name must be unique (repeated: {', '.join(duplicates)})")
    if not specs:
        raise ConfigError(f"{source}: no FleetSLO document found")
    return specs
