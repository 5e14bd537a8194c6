"""The sidecar's Prometheus collector: fresh metric families built from the tracker on each scrape.

A custom collector on a private registry (DESIGN guideline 7): no global gauges, nothing to
``clear()``, and a series that cannot be computed this time is simply not yielded, so it vanishes
instead of showing a stale or zero value. Reads the tracker only; never scrapes vLLM itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from fleetslo import __version__
from fleetslo.core import conventions as cv
from fleetslo.core.families import FamilySpec, by_name, describe
from fleetslo.core.metrics.exposition import REJECTION_REASONS
from fleetslo.core.model import Quantiles
from fleetslo.sidecar.exporter.scraper import PAGE_TOO_LARGE
from fleetslo.sidecar.exporter.signals import ExactLatency, WindowSignals, prefer_exact
from fleetslo.sidecar.exporter.tracker import EngineTracker
from fleetslo.sidecar.thresholds import SloThresholds

#: Error reasons pre-created at 0 so ``rate()`` sees the first failure as an increase.
KNOWN_SCRAPE_ERRORS = ("connect", "timeout", "http_status", "parse", "no_vllm_metrics", PAGE_TOO_LARGE)

#: Where each latency source's clock starts, for ``fleetslo_latency_source_info``.
_SOURCE_CLOCKS = {
    cv.LatencySource.VLLM: {
        "ttft_starts": "engine",
        "includes_api_server": "false",
        "includes_gate_queue": "false",
    },
    cv.LatencySource.GATE: {
        "ttft_starts": "gate",
        "includes_api_server": "true",
        "includes_gate_queue": "true",
    },
}

#: Label values of the ``source`` label: where a latency quantile came from.
SOURCE_VLLM = cv.LatencySource.VLLM.value

_M, _Q, _W, _S = cv.MODEL_LABEL, cv.LABEL_QUANTILE, cv.LABEL_WINDOW, cv.LABEL_SLO

#: Every family the sidecar's vLLM side may yield: ``collect()`` builds from it, ``describe()`` reads it.
FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec(cv.ENGINE_UP, "gauge", "1 if the last scrape of vLLM succeeded", (_M,)),
    FamilySpec(cv.ENGINE_SCRAPE_DURATION, "gauge", "Duration of the last scrape of vLLM"),
    FamilySpec(cv.ENGINE_LAST_SUCCESS, "gauge", "Unix time of the last successful scrape"),
    FamilySpec(cv.ENGINE_SCRAPE_ERRORS, "counter", "Failed scrapes of vLLM by reason", ("reason",)),
    FamilySpec(cv.ENGINE_REJECTED_SAMPLES, "counter", "vLLM samples rejected as impossible, by reason",
               ("reason",)),
    FamilySpec(cv.LATENCY_SOURCE_INFO, "info", "What the latency families' source label measures",
               (cv.LABEL_SOURCE,)),
    FamilySpec(cv.EXPORTER_INFO, "info", "fleetslo sidecar build and target"),
    # Untyped, not gauge: a gauge may not carry a ``quantile`` label (promtool lint), and a
    # summary would need cumulative _count/_sum per window that mean nothing here.
    FamilySpec(cv.TTFT_SECONDS, "unknown", "Time to first token quantile over the window",
               (_M, _Q, _W, cv.LABEL_SOURCE)),
    FamilySpec(cv.ITL_SECONDS, "unknown", "Inter-token latency quantile over the window",
               (_M, _Q, _W, cv.LABEL_SOURCE)),
    FamilySpec(cv.TPOT_SECONDS, "unknown", "Per-request time per output token quantile over the window",
               (_M, _Q, _W, cv.LABEL_SOURCE)),
    FamilySpec(cv.SLO_ATTAINMENT, "gauge", "Share of requests within the SLO threshold", (_M, _S, _W)),
    FamilySpec(cv.SLO_THRESHOLD_EXACT, "gauge",
               "1 if the threshold is a bucket edge (exact ratio), 0 if interpolated", (_M, _S)),
    FamilySpec(cv.SLO_THRESHOLD_SECONDS, "gauge", "Configured SLO threshold", (_M, _S)),
    FamilySpec(cv.REQUESTS_PER_SECOND, "gauge", "Finished requests per second over the window", (_M, _W)),
    FamilySpec(cv.GENERATION_TOKENS_PER_SECOND, "gauge", "Generated tokens per second over the window",
               (_M, _W)),
    FamilySpec(cv.WINDOW_REQUESTS, "gauge", "Finished requests in the window", (_M, _W)),
    FamilySpec(cv.REQUESTS_RUNNING, "gauge", "Requests in the running batch (latest scrape)", (_M,)),
    FamilySpec(cv.REQUESTS_WAITING, "gauge", "Requests waiting for a batch slot (latest scrape)", (_M,)),
    FamilySpec(cv.KV_CACHE_USAGE, "gauge", "KV-cache usage 0-1, mean over engines (latest scrape)", (_M,)),
)  # fmt: skip
_F = by_name(FAMILIES)


class EngineCollector(Collector):
    """Yields the vLLM-derived families of one sidecar."""

    def __init__(
        self, tracker: EngineTracker, windows: Sequence[float], slo: SloThresholds, vllm_url: str
    ) -> None:
        self.tracker = tracker
        self.windows = tuple(windows)
        self.slo = slo
        self.vllm_url = vllm_url
        #: Exact per-request latency (the gate); when set, TTFT/TPOT prefer it (``prefer_exact``).
        self.exact: ExactLatency | None = None

    def describe(self) -> list[Metric]:
        return describe(FAMILIES)

    def collect(
        self,
    ) -> Iterator[GaugeMetricFamily | CounterMetricFamily | InfoMetricFamily | UnknownMetricFamily]:
        yield from self._health()
        signals = self.signals()
        yield from self._latency(signals)
        yield from self._attainment(signals)
        yield from self._rates(signals)
        yield from self._gauges()

    def signals(self) -> list[WindowSignals]:
        """The signals this collector would publish now (the OTLP bridge pushes the same)."""
        signals = self.tracker.signals(self.windows, self.slo)
        if self.exact is None:
            return signals
        return prefer_exact(signals, self.exact, self.tracker.tolerance, self.slo)

    def _health(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | InfoMetricFamily]:
        t = self.tracker
        up = _F[cv.ENGINE_UP].gauge()
        # Before the first good scrape no model is known: no series rather than model_name="" (a
        # starting replica is not a down one; the scrape errors counter says why it is not up).
        for model in t.known_models:
            up.add_metric([model], 1.0 if t.up else 0.0)
        yield up
        if t.last_duration is not None:
            yield _F[cv.ENGINE_SCRAPE_DURATION].gauge(t.last_duration)
        if t.last_success_at is not None:
            yield _F[cv.ENGINE_LAST_SUCCESS].gauge(t.last_success_at)
        errors = _F[cv.ENGINE_SCRAPE_ERRORS].counter()
        for reason in sorted(set(KNOWN_SCRAPE_ERRORS) | set(t.errors)):
            errors.add_metric([reason], float(t.errors.get(reason, 0)))
        yield errors
        rejected = _F[cv.ENGINE_REJECTED_SAMPLES].counter()
        for reason in sorted(set(REJECTION_REASONS) | set(t.rejected)):
            rejected.add_metric([reason], float(t.rejected.get(reason, 0)))
        yield rejected
        sources = _F[cv.LATENCY_SOURCE_INFO].info()
        for source in (cv.LatencySource.VLLM, *((cv.LatencySource.GATE,) if self.exact is not None else ())):
            sources.add_metric([source.value], _SOURCE_CLOCKS[source])
        yield sources
        yield _F[cv.EXPORTER_INFO].info({"version": __version__, "vllm_url": self.vllm_url})

    def _latency(self, signals: Sequence[WindowSignals]) -> Iterator[UnknownMetricFamily]:
        for name, field in ((cv.TTFT_SECONDS, "ttft"), (cv.ITL_SECONDS, "itl"), (cv.TPOT_SECONDS, "tpot")):
            family = _F[name].unknown()
            for s in signals:
                _add_quantiles(family, s, getattr(s, field), s.source_of(field))
            yield family

    def _attainment(self, signals: Sequence[WindowSignals]) -> Iterator[GaugeMetricFamily]:
        ratio = _F[cv.SLO_ATTAINMENT].gauge()
        exact = _F[cv.SLO_THRESHOLD_EXACT].gauge()
        seen: set[tuple[str, str]] = set()
        for s in signals:
            for slo, fraction in ((cv.SloName.TTFT, s.ttft_attainment), (cv.SloName.TPOT, s.tpot_attainment)):
                if fraction is None:
                    continue
                ratio.add_metric([s.model_name, slo, cv.window_label(s.window)], fraction.value)
                if (s.model_name, slo) not in seen:
                    seen.add((s.model_name, slo))
                    exact.add_metric([s.model_name, slo], 1.0 if fraction.exact else 0.0)
        yield ratio
        yield exact
        yield from self._thresholds()

    def _thresholds(self) -> Iterator[GaugeMetricFamily]:
        family = _F[cv.SLO_THRESHOLD_SECONDS].gauge()
        for model in self.tracker.known_models:
            for slo, value in ((cv.SloName.TTFT, self.slo.ttft), (cv.SloName.TPOT, self.slo.tpot)):
                if value is not None:
                    family.add_metric([model, slo], value)
        yield family

    def _rates(self, signals: Sequence[WindowSignals]) -> Iterator[GaugeMetricFamily]:
        rps = _F[cv.REQUESTS_PER_SECOND].gauge()
        tps = _F[cv.GENERATION_TOKENS_PER_SECOND].gauge()
        count = _F[cv.WINDOW_REQUESTS].gauge()
        for s in signals:
            labels = [s.model_name, cv.window_label(s.window)]
            _maybe(rps, labels, s.requests_per_second)
            _maybe(tps, labels, s.generation_tokens_per_second)
            _maybe(count, labels, s.requests)
        yield from (rps, tps, count)

    def _gauges(self) -> Iterator[GaugeMetricFamily]:
        specs = (
            (cv.REQUESTS_RUNNING, cv.Gauge.RUNNING),
            (cv.REQUESTS_WAITING, cv.Gauge.WAITING),
            (cv.KV_CACHE_USAGE, cv.Gauge.KV_CACHE_USAGE),
        )
        for name, gauge in specs:
            family = _F[name].gauge()
            for model, snapshot in sorted(self.tracker.latest.items()):
                _maybe(family, [model], snapshot.gauge(gauge))
            yield family


def _add_quantiles(family: UnknownMetricFamily, s: WindowSignals, q: Quantiles, source: str) -> None:
    for quantile in cv.QUANTILES:
        labels = [s.model_name, cv.quantile_label(quantile), cv.window_label(s.window), source]
        _maybe(family, labels, q.at(quantile))


def _maybe(
    family: GaugeMetricFamily | UnknownMetricFamily, labels: Iterable[str], value: float | None
) -> None:
    """Add a sample only when the value exists: absent stays absent, never 0, never NaN."""
    if value is not None and math.isfinite(value):
        family.add_metric(list(labels), value)
