"""The gate's Prometheus collector: fresh families from the admission state and stats per scrape.

Registered on the sidecar's private registry, so the gate's series share ``/metrics`` with the
vLLM-derived ones. The limit is absent while there is none (never a made-up number); rejection
reasons and outcomes are pre-created at 0 per model so ``rate()`` sees the first one as an increase.

Reads state only; it must not change it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetslo.core import conventions as cv
from fleetslo.core.families import FamilySpec, by_name, describe
from fleetslo.sidecar.gate import admission, proxy, responses
from fleetslo.sidecar.gate.admission import Admission
from fleetslo.sidecar.gate.stats import GateStats, Histogram

KNOWN_REJECTIONS = (
    admission.QUEUE_FULL, admission.QUEUE_TIMEOUT, admission.DRAINING,
    responses.BODY_TOO_LARGE, responses.UPSTREAM_UNAVAILABLE, responses.BUSY, responses.BODY_TIMEOUT,
    responses.BAD_REQUEST,
)  # fmt: skip
KNOWN_OUTCOMES = proxy.OUTCOMES

Family = GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily
_M = cv.MODEL_LABEL

#: Every family the gate may yield: ``collect()`` builds from it, ``describe()`` reads it.
FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec(cv.GATE_INFLIGHT, "gauge", "Requests in flight to vLLM", (_M,)),
    FamilySpec(cv.GATE_QUEUE_LENGTH, "gauge", "Requests waiting for a slot", (_M,)),
    FamilySpec(cv.GATE_LIMIT, "gauge", "Requests allowed in flight at once (the whole gate)", (_M,)),
    FamilySpec(cv.GATE_DRAINING, "gauge", "1 while the gate drains", (_M,)),
    FamilySpec(cv.GATE_REJECTED, "counter", "Requests turned away by reason", (_M, cv.LABEL_REASON)),
    FamilySpec(cv.GATE_REQUESTS, "counter", "Generation requests by how they ended (rejected ones included)",
               (_M, cv.LABEL_OUTCOME)),
    FamilySpec(cv.GATE_TTFT, "histogram",
               "Arrival at the gate (queue wait included) to the first token event",
               (_M,)),
    FamilySpec(cv.GATE_TPOT, "histogram", "(last - first token) / (output tokens - 1) per streamed request",
               (_M,)),
    FamilySpec(cv.GATE_E2E, "histogram", "Arrival at the gate to the last byte (2xx answers)",
               (_M, cv.LABEL_STREAM)),
)  # fmt: skip
_F = by_name(FAMILIES)


class GateCollector(Collector):
    """Yields the ``fleetslo_gate_*`` families, every one with ``model_name``.

    ``served`` names the engine's models (the last scrape's, or the configured served name), so
    each has its series from the start, at 0, before its first request. The limit and the drain
    flag belong to the whole gate: each model gets the same value, so a rule on any one model
    sees it.
    """

    def __init__(
        self, admission: Admission, stats: GateStats, served: Callable[[], Collection[str]] = tuple
    ) -> None:
        self.admission = admission
        self.stats = stats
        self.served = served

    def describe(self) -> list[Metric]:
        return describe(FAMILIES)

    def collect(self) -> Iterator[Family]:
        state = self.admission.state()
        models = sorted(set(self.served()) | set(self.stats.models))
        per = {name: self.stats.models.get(name) or self.stats.empty() for name in models}
        inflight = {n: m.inflight for n, m in per.items()}
        yield _gauge(_F[cv.GATE_INFLIGHT], inflight)
        yield _gauge(_F[cv.GATE_QUEUE_LENGTH], {n: m.queued for n, m in per.items()})
        if state.limit is not None:
            yield _gauge(_F[cv.GATE_LIMIT], dict.fromkeys(models, state.limit))
        yield _gauge(_F[cv.GATE_DRAINING], dict.fromkeys(models, float(state.draining)))
        yield _counter(_F[cv.GATE_REJECTED], {n: m.rejected for n, m in per.items()}, KNOWN_REJECTIONS)
        yield _counter(_F[cv.GATE_REQUESTS], {n: m.outcomes for n, m in per.items()}, KNOWN_OUTCOMES)
        ttft, tpot, e2e = (_F[name].histogram() for name in (cv.GATE_TTFT, cv.GATE_TPOT, cv.GATE_E2E))
        for name, m in per.items():
            ttft.add_metric([name], _buckets(m.ttft), m.ttft.sum)
            tpot.add_metric([name], _buckets(m.tpot), m.tpot.sum)
            for stream, h in sorted(m.e2e.items()):
                e2e.add_metric([name, stream], _buckets(h), h.sum)
        yield from (ttft, tpot, e2e)


def _gauge(spec: FamilySpec, values: Mapping[str, float]) -> Family:
    family = spec.gauge()
    for model, value in values.items():
        family.add_metric([model], float(value))
    return family


def _counter(spec: FamilySpec, counts: Mapping[str, Counter[str]], known: Iterable[str]) -> Family:
    family = spec.counter()
    for model, by in counts.items():
        for key in sorted(set(known) | set(by)):
            family.add_metric([model, key], float(by.get(key, 0)))
    return family


def _buckets(h: Histogram) -> list[tuple[str, float]]:
    snap = h.snapshot()
    return [(_le(b), c) for b, c in zip(snap.bounds, snap.counts, strict=True)]


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
