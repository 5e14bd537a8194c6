"""Push the sidecar's derived signals over OpenTelemetry (OTLP/HTTP, protobuf).

The bridge registers observable gauges whose callbacks read the same signals the Prometheus
collector serves, so both outputs always agree. Instrument names are the fleetslo metric names;
labels become attributes. The SDK exports on its own thread every ``interval`` seconds; a
collector that is down costs a logged export error, never the sidecar.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from controller import __version__
from controller import conventions as cv
from controller.exporter.collector import EngineCollector
from controller.exporter.signals import WindowSignals

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
