"""The gate's Prometheus collector: fresh families from the admission state and stats per scrape.

Registered on the sidecar's private registry, so the gate's series share ``/metrics`` with the
vLLM-derived ones. The limit is absent while there is none (never a made-up number); rejection
reasons and outcomes are pre-created at 0 so ``rate()`` sees the first one as an increase.

Reads state only; it must not change it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from fleetslo.core import conventions as cv
from fleetslo.sidecar.gate import admission, proxy, responses
from fleetslo.sidecar.gate.admission import Admission
from fleetslo.sidecar.gate.stats import GateStats, Histogram

KNOWN_REJECTIONS = (
    admission.QUEUE_FULL, admission.QUEUE_TIMEOUT, admission.DRAINING,
    responses.BODY_TOO_LARGE, responses.UPSTREAM_UNAVAILABLE,
)  # fmt: skip
KNOWN_OUTCOMES = (proxy.COMPLETED, proxy.CLIENT_DISCONNECTED, proxy.UPSTREAM_FAILED)

Family = GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily


class GateCollector(Collector):
    """Yields the ``fleetslo_gate_*`` families."""

    def __init__(self, admission: Admission, stats: GateStats) -> None:
        self.admission = admission
        self.stats = stats

    def collect(self) -> Iterator[Family]:
        state = self.admission.state()
        yield GaugeMetricFamily(cv.GATE_INFLIGHT, "Requests in flight to vLLM", value=state.inflight)
        yield GaugeMetricFamily(cv.GATE_QUEUE_LENGTH, "Requests waiting for a slot", value=state.queued)
        if state.limit is not None:
            yield GaugeMetricFamily(cv.GATE_LIMIT, "Requests allowed in flight at once", value=state.limit)
        yield GaugeMetricFamily(cv.GATE_DRAINING, "1 while the gate drains", value=float(state.draining))
        yield _counter(cv.GATE_REJECTED, "Requests turned away by reason", cv.LABEL_REASON,
                       self.stats.rejected, KNOWN_REJECTIONS)  # fmt: skip
        yield _counter(cv.GATE_REQUESTS, "Admitted requests by how they ended", cv.LABEL_OUTCOME,
                       self.stats.outcomes, KNOWN_OUTCOMES)  # fmt: skip
        yield _histogram(cv.GATE_TTFT, "Arrival at the gate to the first content token", self.stats.ttft)
        yield _histogram(
            cv.GATE_TPOT, "(last - first token) / (output tokens - 1) per streamed request", self.stats.tpot
        )
        e2e = HistogramMetricFamily(
            cv.GATE_E2E, "Arrival at the gate to the last byte (2xx answers)", labels=[cv.LABEL_STREAM]
        )
        for stream, h in sorted(self.stats.e2e.items()):
            e2e.add_metric([stream], _buckets(h), h.sum)
        yield e2e


def _counter(name: str, help_text: str, label: str, counts: Counter[str], known: Iterable[str]) -> Family:
    family = CounterMetricFamily(name, help_text, labels=[label])
    for key in sorted(set(known) | set(counts)):
        family.add_metric([key], float(counts.get(key, 0)))
    return family


def _histogram(name: str, help_text: str, h: Histogram) -> Family:
    family = HistogramMetricFamily(name, help_text)
    family.add_metric([], _buckets(h), h.sum)
    return family


def _buckets(h: Histogram) -> list[tuple[str, float]]:
    snap = h.snapshot()
    return [(_le(b), c) for b, c in zip(snap.bounds, snap.counts, strict=True)]


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
