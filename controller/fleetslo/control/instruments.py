"""The controller's own metrics, on a private registry served at ``fleetslo run``'s ``/metrics``.

Per-target gauges (desired, current, batch limit) come from a custom collector that builds fresh
families from the latest tick at every scrape, so a target removed from the specs vanishes by
itself. Counters and histograms are plain ``prometheus_client`` objects on the private registry
(never the global one). Names come from ``conventions`` (DESIGN.md "Metric names").

Recording never raises and never does I/O; reading happens only when Prometheus scrapes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetslo.core import conventions as cv
from fleetslo.core.families import FamilySpec, describe

#: The per-target gauges and the leader flag ``_TargetGauges`` yields, built from and described here.
_GAUGES: tuple[FamilySpec, ...] = (
    FamilySpec(cv.CONTROLLER_DESIRED_REPLICAS, "gauge", "Replicas the controller last asked for",
               ("target",)),
    FamilySpec(cv.CONTROLLER_CURRENT_REPLICAS, "gauge", "Replicas the workload had (spec) at the last tick",
               ("target",)),
    FamilySpec(cv.CONTROLLER_BATCH_LIMIT, "gauge", "Per-replica batch limit the controller last asked for",
               ("target",)),
    FamilySpec(cv.CONTROLLER_LEADER, "gauge", "1 when this controller holds the lease and may actuate"),
)  # fmt: skip
_ACTUATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class ControllerMetrics:
    """Everything ``fleetslo run`` reports about itself; ``leader`` is read at scrape time."""

    def __init__(self, leader: Callable[[], bool] = lambda: True) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._lock = threading.Lock()
        self._desired: dict[str, float] = {}
        self._current: dict[str, float] = {}
        self._limit: dict[str, float] = {}
        self.decisions = Counter(
            cv.CONTROLLER_DECISIONS, "Decisions made, by target and reason", ["target", "reason"],
            registry=self.registry,
        )  # fmt: skip
        self.actuation_errors = Counter(
            cv.CONTROLLER_ACTUATION_ERRORS, "Failed reads and writes of a target, by error kind",
            ["target", "kind"], registry=self.registry,
        )  # fmt: skip
        self.observe_errors = Counter(
            cv.CONTROLLER_OBSERVE_ERRORS, "Failed observations of a target (the policy then sees no data)",
            ["target", "reason"], registry=self.registry,
        )  # fmt: skip
        self.tick_duration = Histogram(
            cv.CONTROLLER_TICK_DURATION, "Seconds one target's reconcile took (read, observe, decide, act)",
            registry=self.registry, buckets=_ACTUATION_BUCKETS,
        )  # fmt: skip
        self.actuation_duration = Histogram(
            cv.CONTROLLER_ACTUATION_DURATION, "Seconds one actuator call took, by operation",
            ["operation"], registry=self.registry, buckets=_ACTUATION_BUCKETS,
        )  # fmt: skip
        self.target_gauges = _TargetGauges(self, leader)
        self.registry.register(self.target_gauges)

    def decided(self, target: str, reason: str) -> None:
        self.decisions.labels(target, reason).inc()

    def state(self, target: str, *, desired: int, current: int, batch_limit: int | None) -> None:
        with self._lock:
            self._desired[target] = desired
            self._current[target] = current
            if batch_limit is None:
                self._limit.pop(target, None)
            else:
                self._limit[target] = batch_limit

    def forget(self, target: str) -> None:
        with self._lock:
            for table in (self._desired, self._current, self._limit):
                table.pop(target, None)

    def snapshot(self) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        with self._lock:
            return dict(self._desired), dict(self._current), dict(self._limit)


class _TargetGauges(Collector):
    def __init__(self, metrics: ControllerMetrics, leader: Callable[[], bool]) -> None:
        self._metrics = metrics
        self._leader = leader

    def describe(self) -> list[Metric]:
        return describe(_GAUGES)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        desired, current, limit = self._metrics.snapshot()
        desired_spec, current_spec, limit_spec, leader_spec = _GAUGES
        for spec, values in ((desired_spec, desired), (current_spec, current), (limit_spec, limit)):
            family = spec.gauge()
            for target, value in sorted(values.items()):
                family.add_metric([target], value)
            yield family
        yield leader_spec.gauge(1.0 if self._leader() else 0.0)
