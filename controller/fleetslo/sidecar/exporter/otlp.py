"""Push the sidecar's derived signals over OpenTelemetry (OTLP/HTTP, protobuf).

The bridge registers observable gauges whose callbacks read the same signals the Prometheus
collector serves, so both outputs always agree. Instrument names are the fleetslo metric names;
labels become attributes. Other Prometheus collectors of the sidecar (the GPU telemetry) are
bridged family by family with ``add_collector``: gauges stay gauges, counters become cumulative
observable counters named without ``_total``, and a family the collector stops yielding stops
being pushed (absent, never 0). The SDK exports on its own thread every ``interval`` seconds; a
collector that is down costs a logged export error, never the sidecar.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from prometheus_client.registry import Collector

from fleetslo import __version__
from fleetslo.core import conventions as cv
from fleetslo.core.families import FamilySpec
from fleetslo.sidecar.exporter.collector import EngineCollector
from fleetslo.sidecar.exporter.signals import WindowSignals

Reader = Callable[[list[WindowSignals]], Iterable[Observation]]


def metrics_url(endpoint: str) -> str:
    """OTLP/HTTP's metrics path appended to a collector base URL, unless it is already there."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/metrics") else endpoint + "/v1/metrics"


class OtlpBridge:
    """Exports the collector's windowed signals to an OTLP/HTTP endpoint."""

    def __init__(
        self, endpoint: str, interval: float, collector: EngineCollector, timeout: float = 10.0
    ) -> None:
        self.endpoint = metrics_url(endpoint)
        self.interval = interval
        #: Bounds each export including the SDK's retries, so a dead collector cannot pile up work.
        self.timeout = timeout
        self.collector = collector
        self._provider: MeterProvider | None = None
        self._bridged: list[_CollectorSnapshot] = []

    def start(self) -> None:
        exporter = OTLPMetricExporter(endpoint=self.endpoint, timeout=self.timeout)
        reader = PeriodicExportingMetricReader(exporter, export_interval_millis=self.interval * 1000)
        resource = Resource.create({"service.name": "fleetslo-sidecar", "service.version": __version__})
        self._provider = MeterProvider(resource=resource, metric_readers=[reader])
        meter = self._provider.get_meter("fleetslo.exporter", __version__)
        for name, unit, description, read in _INSTRUMENTS:
            meter.create_observable_gauge(
                name, callbacks=[self._callback(read)], unit=unit, description=description
            )
        up = "Whether the last scrape of vLLM succeeded"
        meter.create_observable_gauge(cv.ENGINE_UP, callbacks=[self._engine_up], unit="1", description=up)
        for snapshot in self._bridged:
            for spec in snapshot.families:
                name, kind, documentation = spec.name, spec.kind, spec.help
                create = (
                    meter.create_observable_counter if kind == "counter" else meter.create_observable_gauge
                )
                create(
                    name,
                    callbacks=[snapshot.callback(name, kind)],
                    unit=_unit(name),
                    description=documentation,
                )

    def add_collector(self, collector: Collector, families: Sequence[FamilySpec]) -> None:
        """Push ``families`` (gauges and counters) of a Prometheus collector too;
        call before ``start``."""
        self._bridged.append(_CollectorSnapshot(collector, tuple(families)))

    def shutdown(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None

    def force_flush(self) -> bool:
        return self._provider.force_flush() if self._provider else False

    def _callback(self, read: Reader) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(_: CallbackOptions) -> Iterable[Observation]:
            return list(read(self.collector.signals()))

        return callback

    def _engine_up(self, _: CallbackOptions) -> Iterable[Observation]:
        tracker = self.collector.tracker
        models = sorted(tracker.latest) or [""]
        return [Observation(1.0 if tracker.up else 0.0, {cv.MODEL_LABEL: m}) for m in models]


class _CollectorSnapshot:
    """One ``collect()`` shared by all of a collector's instruments within an export.

    The SDK calls each instrument's callback in turn; collecting once per family would read the
    collector a dozen times per export, and could mix two different reports in one export.
    """

    #: Callbacks within this many seconds of the last collect() share its result.
    FRESH_S = 1.0

    def __init__(self, collector: Collector, families: tuple[FamilySpec, ...]) -> None:
        self.collector, self.families = collector, families
        self._lock = threading.Lock()
        self._at = -float("inf")
        self._samples: dict[str, list[tuple[dict[str, str], float]]] = {}

    def callback(self, name: str, kind: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        sample_name = name + "_total" if kind == "counter" else name

        def observe(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, labels) for labels, value in self._current().get(sample_name, [])]

        return observe

    def _current(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        with self._lock:
            if time.monotonic() - self._at > self.FRESH_S:
                samples: dict[str, list[tuple[dict[str, str], float]]] = {}
                for family in self.collector.collect():
                    for sample in family.samples:
                        samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
                self._samples, self._at = samples, time.monotonic()
            return self._samples


#: Prometheus base-unit suffixes and their UCUM units (what OTLP's ``unit`` field carries).
_UNITS = (("_seconds", "s"), ("_bytes", "By"), ("_watts", "W"), ("_joules", "J"), ("_hertz", "Hz"),
          ("_celsius", "Cel"), ("_ratio", "1"))  # fmt: skip


def _unit(name: str) -> str:
    return next((unit for suffix, unit in _UNITS if name.endswith(suffix)), "")


def _quantiles(field: str) -> Reader:
    def read(signals: list[WindowSignals]) -> Iterable[Observation]:
        for s in signals:
            for q in cv.QUANTILES:
                value = getattr(s, field).at(q)
                if value is not None:
                    source = s.source_of(field)
                    yield Observation(value, _attrs(s, quantile=cv.quantile_label(q), source=source))

    return read


def _attainment(signals: list[WindowSignals]) -> Iterable[Observation]:
    for s in signals:
        for slo, fraction in ((cv.SloName.TTFT, s.ttft_attainment), (cv.SloName.TPOT, s.tpot_attainment)):
            if fraction is not None:
                yield Observation(fraction.value, _attrs(s, slo=str(slo)))


def _field(field: str) -> Reader:
    def read(signals: list[WindowSignals]) -> Iterable[Observation]:
        for s in signals:
            value = getattr(s, field)
            if value is not None:
                yield Observation(value, _attrs(s))

    return read


def _attrs(s: WindowSignals, **extra: str) -> dict[str, str]:
    return {cv.MODEL_LABEL: s.model_name, cv.LABEL_WINDOW: cv.window_label(s.window), **extra}


_INSTRUMENTS: tuple[tuple[str, str, str, Reader], ...] = (
    (cv.TTFT_SECONDS, "s", "Time to first token quantile over the window", _quantiles("ttft")),
    (cv.ITL_SECONDS, "s", "Inter-token latency quantile over the window", _quantiles("itl")),
    (cv.TPOT_SECONDS, "s", "Per-request time per output token quantile over the window", _quantiles("tpot")),
    (cv.SLO_ATTAINMENT, "1", "Share of requests within the SLO threshold", _attainment),
    (cv.REQUESTS_PER_SECOND, "{request}/s", "Finished requests per second", _field("requests_per_second")),
    (
        cv.GENERATION_TOKENS_PER_SECOND,
        "{token}/s",
        "Generated tokens per second",
        _field("generation_tokens_per_second"),
    ),
)
