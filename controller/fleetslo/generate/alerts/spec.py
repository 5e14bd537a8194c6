"""Validate a FleetSLO into what the rule generators need (the "validate" step).

Resolves, per latency objective, the histogram, the bucket edge the SLI counts at (exact or the
nearest edge below, with advice), and the burn-rate alerts for its objective and period. A
threshold no bucket can represent fails here, with the fix, before any rule is written.
Pure: takes validated settings, returns values.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetslo.core import conventions as cv
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import FleetSLO, Objective
from fleetslo.generate.alerts import buckets
from fleetslo.generate.alerts.windows import BurnAlert, resolve


@dataclass(frozen=True, slots=True)
class Scope:
    """Which series one SLO counts: the pods of one workload (namespace + name), not a model name."""

    namespace: str
    workload: str
    kind: str

    @property
    def pods(self) -> str:
        return cv.pod_regex(self.kind, self.workload)

    @property
    def labels(self) -> dict[str, str]:
        """The labels the SLO's recorded series and alerts carry to say whose they are."""
        return {cv.LABEL_NAMESPACE: self.namespace, cv.LABEL_WORKLOAD: self.workload}


@dataclass(frozen=True, slots=True)
class LatencySlo:
    """One latency objective of one target, ready for rule generation."""

    name: cv.SloName
    scope: Scope
    model_name: str
    objective: float
    threshold: float
    histogram: cv.Histogram
    bucket: buckets.BucketChoice
    period: float
    burns: tuple[BurnAlert, ...]

    @property
    def budget(self) -> float:
        return 1.0 - self.objective


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """Everything the rules of one FleetSLO need."""

    name: str
    namespace: str
    workload: str
    kind: str
    model_name: str
    mode: str
    replicas_min: int
    replicas_max: int
    cost_per_replica_hour: float
    gpus_per_replica: int
    slos: tuple[LatencySlo, ...]

    @property
    def scope(self) -> Scope:
        return Scope(self.namespace, self.workload, self.kind)

    @property
    def workload_key(self) -> str:
        """``Kind namespace/name``: one FleetSLO per workload."""
        return f"{self.kind} {self.namespace}/{self.workload}"

    def warnings(self) -> list[str]:
        """One line per objective whose threshold is not a bucket edge."""
        return [f"{self.name} {s.name}: {s.bucket.advice()}" for s in self.slos if not s.bucket.exact]


def latency_slo(
    name: cv.SloName, objective: Objective, scope: Scope, *, model_name: str, period: float, where: str
) -> LatencySlo:
    histogram, family, defaults = buckets.HISTOGRAMS[name]
    try:
        choice = buckets.choose(objective.threshold, objective.buckets or defaults, family)
    except buckets.NoUsableBucket as exc:
        raise ConfigError(f"{where}.threshold: {exc}") from None
    return LatencySlo(
        name=name,
        scope=scope,
        model_name=model_name,
        objective=objective.quantile,
        threshold=objective.threshold,
        histogram=histogram,
        bucket=choice,
        period=period,
        burns=tuple(resolve(objective.quantile, period)),
    )


def target_spec(slo: FleetSLO) -> TargetSpec:
    """The alerting view of one FleetSLO; ``ConfigError`` if a threshold cannot be counted."""
    spec, objectives = slo.spec, slo.spec.objectives
    where = f"{slo.metadata.name}: spec.objectives"
    target = spec.target
    scope = Scope(target.namespace, target.name, target.kind.value)
    slos = tuple(
        latency_slo(
            name,
            objective,
            scope,
            model_name=target.model_name,
            period=objectives.period,
            where=f"{where}.{name.value}",
        )
        for name, objective in ((cv.SloName.TTFT, objectives.ttft), (cv.SloName.TPOT, objectives.tpot))
    )
    return TargetSpec(
        name=slo.metadata.name,
        namespace=spec.target.namespace,
        workload=spec.target.name,
        kind=spec.target.kind.value,
        model_name=spec.target.model_name,
        mode=spec.mode.value,
        replicas_min=spec.replicas.min,
        replicas_max=spec.replicas.max,
        cost_per_replica_hour=spec.cost.per_replica_hour,
        gpus_per_replica=spec.cost.gpus_per_replica,
        slos=slos,
    )
