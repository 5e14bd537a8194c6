"""Value types passed between the parts of fleetslo.

Everything here is immutable and free of I/O: a parser produces these, the window math, the
policy and the exporters consume them. A value that was not on the page is ``None``, never 0 —
an unreachable engine must never look idle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum

from fleetslo.core import conventions as cv
from fleetslo.core.histogram import BucketHistogram, merge

#: One series inside a family: (engine label, value of the family's sub-label), "" when absent.
SeriesKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """One model's vLLM series from one scrape, kept per engine so resets are found per series.

    Families are keyed by their current canonical name (see ``conventions``), whatever name and
    prefix the server used. Aggregate accessors sum over the ``engine`` label (the data-parallel
    rank), as ``sum by (model_name)`` would.
    """

    model_name: str
    gauges: Mapping[str, Mapping[SeriesKey, float]] = field(default_factory=dict)
    counters: Mapping[str, Mapping[SeriesKey, float]] = field(default_factory=dict)
    histograms: Mapping[str, Mapping[str, BucketHistogram]] = field(default_factory=dict)
    #: ``_created`` timestamps by (family, engine): a newer one means the series restarted.
    created: Mapping[tuple[str, str], float] = field(default_factory=dict)

    @property
    def engines(self) -> tuple[str, ...]:
        """The engine labels seen on the page ("" for pages without the label)."""
        seen = {engine for series in self.gauges.values() for engine, _ in series}
        seen |= {engine for per_engine in self.histograms.values() for engine in per_engine}
        return tuple(sorted(seen))

    def gauge(self, name: str) -> float | None:
        """A gauge summed over engines; KV-cache usage (a per-engine fraction) is averaged."""
        series = self.gauges.get(name)
        if not series:
            return None
        total = sum(series.values())
        return total / len(series) if name == cv.Gauge.KV_CACHE_USAGE else total

    def gauge_by(self, name: str) -> dict[str, float]:
        """A gauge split by its sub-label (e.g. waiting requests by reason), summed over engines."""
        return _by_sublabel(self.gauges.get(name, {}))

    def counter(self, name: str) -> float | None:
        """A counter summed over engines and sub-labels; ``None`` if the family is absent."""
        series = self.counters.get(name)
        return None if not series else sum(series.values())

    def counter_by(self, name: str) -> dict[str, float]:
        """A counter split by its sub-label (e.g. finished requests by reason)."""
        return _by_sublabel(self.counters.get(name, {}))

    def histogram(self, name: str) -> BucketHistogram | None:
        """A histogram summed over engines (``sum by (le)``); ``None`` if absent."""
        per_engine = self.histograms.get(name)
        return None if not per_engine else merge(per_engine.values())


def _by_sublabel(series: Mapping[SeriesKey, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for (_, sub), value in series.items():
        out[sub] = out.get(sub, 0.0) + value
    return out


# --------------------------------------------------------------------------------------------
# What a policy sees and what it decides
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Quantiles:
    """Windowed latency quantiles of one signal, in seconds; ``None`` where not computable."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    #: The edges of the histogram bucket the p90 lies in (``histogram.quantile_bucket``): the p90
    #: is a linear guess inside it, and the truth anywhere between them. ``None``: not known.
    p90_bucket: tuple[float, float] | None = None

    def at(self, q: float) -> float | None:
        return {0.5: self.p50, 0.9: self.p90, 0.99: self.p99}.get(q)

    def p90_seen_by(self, predicted: float) -> float | None:
        """The p90 as a check of ``predicted`` reads it: ``predicted`` itself where it lies in the
        p90's bucket (the buckets cannot tell them apart: inside a 20-25 ms bucket the
        interpolation reads 24.5 ms whatever the truth, and a prediction of 21 ms is not 14 % off),
        else the interpolated p90, as where the bucket is unknown."""
        if self.p90 is None or self.p90_bucket is None or not math.isfinite(predicted):
            return self.p90
        low, high = self.p90_bucket
        return predicted if low <= predicted <= high else self.p90

    def finite_only(self) -> Quantiles:
        """These quantiles with NaN and infinities as missing (``None``)."""
        p50, p90, p99 = (_finite(v) for v in (self.p50, self.p90, self.p99))
        return Quantiles(p50, p90, p99, self.p90_bucket if p90 is not None else None)


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class ReplicaCounts:
    """Replicas of a target by lifecycle state, as the actuator (or the simulated fleet) sees them."""

    ready: int
    starting: int = 0
    draining: int = 0

    @property
    def provisioned(self) -> int:
        """Replicas that are or will soon be serving: ready plus starting."""
        return self.ready + self.starting


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything a policy may know about one target at one instant.

    Rates and quantiles cover the last ``window`` seconds, summed over the target's ready replicas;
    gauges are the latest values. Every signal is ``None`` when it could not be measured — a policy
    must treat that as "unknown", never as zero. ``data_age`` is how old the newest complete data
    is, and ``replicas_reporting`` how many ready replicas contributed, so a policy can tell a
    partial or stale picture from a whole one.
    """

    target: str
    at: float
    window: float
    replicas: ReplicaCounts
    batch_limit: int | None = None
    replicas_reporting: int = 0
    data_age: float | None = None
    ttft: Quantiles = Quantiles()
    itl: Quantiles = Quantiles()
    tpot: Quantiles = Quantiles()
    ttft_attainment: float | None = None
    tpot_attainment: float | None = None
    request_rate: float | None = None
    prompt_tokens_rate: float | None = None
    generation_tokens_rate: float | None = None
    preemption_rate: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    gpu_utilization: float | None = None
    #: Prompt and output lengths (tokens) of the window's requests: the request mix's distribution.
    prompt_lengths: BucketHistogram | None = None
    output_lengths: BucketHistogram | None = None

    def finite_only(self) -> Observation:
        """This observation with every non-finite signal (NaN, an infinity) as missing (``None``).

        A NaN is not a measurement: a source should never produce one, and the control loop hands
        policies only this form, so none of them can scale on (or crash over) ``ceil(NaN)``.
        """
        changes: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Quantiles):
                finite = value.finite_only()
                if finite != value:
                    changes[f.name] = finite
            elif isinstance(value, float) and f.default is None and not math.isfinite(value):
                changes[f.name] = None
        return replace(self, **changes) if changes else self  # type: ignore[arg-type]


class Reason(StrEnum):
    """Why a decision is what it is. The same value is the log key, the Kubernetes Event reason
    and the ``reason`` label of ``fleetslo_controller_decisions_total``."""

    # holds
    STEADY = "Steady"
    HOLD_NO_DATA = "HoldNoData"
    HOLD_STALE_DATA = "HoldStaleData"
    HOLD_PARTIAL_DATA = "HoldPartialData"
    HOLD_CONTRADICTORY_DATA = "HoldContradictoryData"
    HOLD_REPLICAS_STARTING = "HoldReplicasStarting"
    # recommendations
    SCALE_UP_SLO_BREACH = "ScaleUpSLOBreach"
    SCALE_UP_FORECAST = "ScaleUpForecast"
    SCALE_UP_QUEUE = "ScaleUpQueue"
    SCALE_DOWN_LOW_LOAD = "ScaleDownLowLoad"
    METRIC_ABOVE_TARGET = "MetricAboveTarget"
    METRIC_BELOW_TARGET = "MetricBelowTarget"
    WITHIN_TOLERANCE = "WithinTolerance"
    FIXED_SIZE = "FixedSize"
    SCHEDULED = "Scheduled"
    BATCH_LIMIT_TIGHTENED = "BatchLimitTightened"
    BATCH_LIMIT_RELAXED = "BatchLimitRelaxed"
    # limit stages
    CLAMPED_MIN = "TooFewReplicas"
    CLAMPED_MAX = "TooManyReplicas"
    RATE_LIMITED = "ScaleRateLimited"
    STABILIZED = "ScaleDownStabilized"
    UP_STABILIZED = "ScaleUpStabilized"
    COOLDOWN = "Cooldown"


@dataclass(frozen=True, slots=True)
class Decision:
    """What a policy wants for one target, why, and the latency it expects as a result."""

    replicas: int
    batch_limit: int | None
    reason: Reason
    message: str
    predicted_ttft_p90: float | None = None
    predicted_tpot_p90: float | None = None


# --------------------------------------------------------------------------------------------
# GPU telemetry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one instant, vendor-neutral, in base units (ratio 0-1, bytes, W, J, °C, Hz).

    ``index`` is the node-local device index the backend enumerates (the ``gpu`` label) and is
    always known. Every other field is ``None`` (or missing from its mapping) when the backend
    could not read it — never 0, so a GPU whose sensor is unreadable never looks idle or cold.
    """

    index: int
    uuid: str | None = None
    model: str | None = None
    vendor: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    compute_partition: str | None = None
    memory_partition: str | None = None
    partition_id: str | None = None
    utilization: float | None = None
    memory_bandwidth_utilization: float | None = None
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    #: Monotonic energy counter since driver load; resets when the driver reloads.
    energy_joules: float | None = None
    #: °C by sensor: ``edge``, ``junction``, ``memory`` (AMD), ``gpu`` (NVIDIA).
    temperatures_celsius: Mapping[str, float] = field(default_factory=dict)
    #: Hz by clock domain: ``graphics``, ``memory``.
    clocks_hertz: Mapping[str, float] = field(default_factory=dict)
    #: Monotonic error counts by severity: ``correctable``, ``uncorrectable``, ``deferred``.
    ecc_errors: Mapping[str, float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A stable identity for per-GPU history: the UUID when known, else the index."""
        return self.uuid or f"index:{self.index}"

    def has_telemetry(self) -> bool:
        """Whether anything beyond identity was read (a sample of only ``None`` is no data)."""
        scalars = (
            self.utilization, self.memory_bandwidth_utilization, self.memory_used_bytes,
            self.memory_total_bytes, self.power_watts, self.power_limit_watts, self.energy_joules,
        )  # fmt: skip
        return any(v is not None for v in scalars) or bool(
            self.temperatures_celsius or self.clocks_hertz or self.ecc_errors
        )
