"""The gate's Prometheus collector: fresh families from the admission state and stats per scrape.

Registered on the sidecar's private registry, so the gate's series share ``/metrics`` with the
vLLM-derived ones. The limit is absent while there is none (never a made-up number); rejection
reasons and outcomes are pre-created at 0 so ``rate()`` sees the first one as an increase.

Reads state only; it must not change it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetslo.core import conventions as cv
from fleetslo.core.families import FamilySpec, by_name, describe
from fleetslo.sidecar.gate import admission, proxy, responses
from fleetslo.sidecar.gate.admission import Admission
from fleetslo.sidecar.gate.stats import GateStats, Histogram

KNOWN_REJECTIONS = (
    admission.QUEUE_FULL, admission.QUEUE_TIMEOUT, admission.DRAINING,
    responses.BODY_TOO_LARGE, responses.UPSTREAM_UNAVAILABLE,
)  # fmt: skip
KNOWN_OUTCOMES = (proxy.COMPLETED, proxy.CLIENT_DISCONNECTED, proxy.UPSTREAM_FAILED)

Family = GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily

#: Every family the gate may yield: ``collect()`` builds from it, ``describe()`` reads it.
FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec(cv.GATE_INFLIGHT, "gauge", "Requests in flight to vLLM"),
    FamilySpec(cv.GATE_QUEUE_LENGTH, "gauge", "Requests waiting for a slot"),
    FamilySpec(cv.GATE_LIMIT, "gauge", "Requests allowed in flight at once"),
    FamilySpec(cv.GATE_DRAINING, "gauge", "1 while the gate drains"),
    FamilySpec(cv.GATE_REJECTED, "counter", "Requests turned away by reason", (cv.LABEL_REASON,)),
    FamilySpec(cv.GATE_REQUESTS, "counter", "Admitted requests by how they ended", (cv.LABEL_OUTCOME,)),
    FamilySpec(cv.GATE_TTFT, "histogram", "Arrival at the gate to the first content token"),
    FamilySpec(cv.GATE_TPOT, "histogram", "(last - first token) / (output tokens - 1) per streamed request"),
    FamilySpec(cv.GATE_E2E, "histogram", "Arrival at the gate to the last byte (2xx answers)",
               (cv.LABEL_STREAM,)),
)  # fmt: skip
_F = by_name(FAMILIES)


class GateCollector(Collector):
    """Yields the ``fleetslo_gate_*`` families."""

    def __init__(self, admission: Admission, stats: GateStats) -> None:
        self.admission = admission
        self.stats = stats

    def describe(self) -> list[Metric]:
        return describe(FAMILIES)

    def collect(self) -> Iterator[Family]:
        state = self.admission.state()
        yield _F[cv.GATE_INFLIGHT].gauge(state.inflight)
        yield _F[cv.GATE_QUEUE_LENGTH].gauge(state.queued)
        if state.limit is not None:
            yield _F[cv.GATE_LIMIT].gauge(state.limit)
        yield _F[cv.GATE_DRAINING].gauge(float(state.draining))
        yield _counter(_F[cv.GATE_REJECTED], self.stats.rejected, KNOWN_REJECTIONS)
        yield _counter(_F[cv.GATE_REQUESTS], self.stats.outcomes, KNOWN_OUTCOMES)
        yield _histogram(_F[cv.GATE_TTFT], self.stats.ttft)
        yield _histogram(_F[cv.GATE_TPOT], self.stats.tpot)
        e2e = _F[cv.GATE_E2E].histogram()
        for stream, h in sorted(self.stats.e2e.items()):
            e2e.add_metric([stream], _buckets(h), h.sum)
        yield e2e


def _counter(spec: FamilySpec, counts: Counter[str], known: Iterable[str]) -> Family:
    family = spec.counter()
    for key in sorted(set(known) | set(counts)):
        family.add_metric([key], float(counts.get(key, 0)))
    return family


def _histogram(spec: FamilySpec, h: Histogram) -> Family:
    family = spec.histogram()
    family.add_metric([], _buckets(h), h.sum)
    return family


def _buckets(h: Histogram) -> list[tuple[str, float]]:
    snap = h.snapshot()
    return [(_le(b), c) for b, c in zip(snap.bounds, snap.counts, strict=True)]


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
