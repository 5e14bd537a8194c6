"""What the gate has measured: latency histograms, counters, and windows over them.

The histograms have fine buckets near typical SLO thresholds and always include the configured
thresholds as edges, so the attainment computed from them is an exact count, not an
interpolation. ``GateWindows`` keeps a ring of their cumulative totals (one per sidecar scrape)
and serves any window as a ``WindowDelta`` keyed by vLLM's histogram names, so the sidecar's
signal code treats gate data and vLLM data alike.

In-process state only: no I/O, no Prometheus types (the collector builds those).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping

from fleetslo.core import conventions as cv
from fleetslo.core.histogram import INF, BucketHistogram
from fleetslo.core.metrics.window import SnapshotRing, WindowDelta, between

#: Default edges (seconds). TTFT: 5 ms .. 60 s, dense between 50 ms and 3 s where SLOs sit.
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75,
                0.9, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0)  # fmt: skip
#: TPOT: 1 ms .. 1 s, dense between 5 and 100 ms (vLLM's ITL has nothing under 10 ms).
TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02, 0.025, 0.03, 0.035,
                0.04, 0.045, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.125, 0.15, 0.2, 0.3, 0.5, 1.0)  # fmt: skip
E2E_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def buckets_with(defaults: Iterable[float], *thresholds: float | None) -> tuple[float, ...]:
    """Sorted finite edges: the defaults plus every configured threshold (``None`` skipped)."""
    return tuple(sorted({*defaults, *(t for t in thresholds if t is not None)}))


class Histogram:
    """A cumulative histogram that is cheap to observe into (one bisect, two additions)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, edges: Iterable[float]) -> None:
        self.bounds: tuple[float, ...] = (*sorted(set(edges)), INF)
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # ``le`` buckets: a value equal to an edge belongs to that edge's bucket.
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def snapshot(self) -> BucketHistogram:
        """Cumulative counts, as Prometheus exposes them."""
        cumulative, running = [], 0.0
        for c in self.counts:
            running += c
            cumulative.append(running)
        return BucketHistogram(self.bounds, tuple(cumulative), self.sum)


#: The stream-label values of the e2e histogram.
STREAMED, NOT_STREAMED = "true", "false"


class ModelStats:
    """What the gate counted for the requests of one model (the ``model_name`` label)."""

    __slots__ = ("e2e", "inflight", "outcomes", "queued", "rejected", "tpot", "ttft")

    def __init__(self, ttft_edges: Iterable[float], tpot_edges: Iterable[float]) -> None:
        self.ttft = Histogram(ttft_edges)
        self.tpot = Histogram(tpot_edges)
        self.e2e = {s: Histogram(E2E_BUCKETS) for s in (STREAMED, NOT_STREAMED)}
        self.rejected: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        #: Requests of this model in flight upstream, and waiting in the gate's queue, now.
        self.inflight = 0
        self.queued = 0

    def totals(self, at: float) -> WindowDelta:
        """The running totals now, under vLLM's histogram names (for ``GateWindows``)."""
        ttft, tpot = self.ttft.snapshot(), self.tpot.snapshot()
        return WindowDelta(at, {cv.Histogram.TTFT.value: ttft, cv.Histogram.TPOT.value: tpot})


class GateStats:
    """Everything the gate counts, per model: histograms, rejections by reason, requests by outcome.

    A model's entry is made by its first request; the proxy names only models the engine serves
    (``paths.ModelNames``), so the number of entries stays bounded whatever clients send.
    """

    def __init__(self, slo_ttft: float | None = None, slo_tpot: float | None = None) -> None:
        self.ttft_edges = buckets_with(TTFT_BUCKETS, slo_ttft)
        self.tpot_edges = buckets_with(TPOT_BUCKETS, slo_tpot)
        self.models: dict[str, ModelStats] = {}

    def model(self, name: str) -> ModelStats:
        stats = self.models.get(name)
        if stats is None:
            stats = self.models[name] = ModelStats(self.ttft_edges, self.tpot_edges)
        return stats

    def empty(self) -> ModelStats:
        """Zeroed stats not kept anywhere (a served model before its first request)."""
        return ModelStats(self.ttft_edges, self.tpot_edges)

    @property
    def rejected(self) -> Counter[str]:
        """Rejections by reason, all models together (a copy)."""
        return sum((m.rejected for m in self.models.values()), Counter())

    @property
    def outcomes(self) -> Counter[str]:
        """Requests by outcome, all models together (a copy)."""
        return sum((m.outcomes for m in self.models.values()), Counter())

    def totals(self, at: float) -> dict[str, WindowDelta]:
        return {name: m.totals(at) for name, m in self.models.items()}


class GateWindows:
    """Windows over the gate's histograms; implements the sidecar's ``ExactLatency`` protocol."""

    def __init__(self, stats: GateStats, ring_size: int) -> None:
        self.stats = stats
        self.ring: SnapshotRing[Mapping[str, WindowDelta]] = SnapshotRing(ring_size)

    def snapshot(self, at: float) -> None:
        """Record the totals at ``at`` (the sidecar calls this at each of its scrapes)."""
        newest = self.ring.newest()
        if newest is None or at >= newest[0]:
            self.ring.append(at, self.stats.totals(at))

    def delta(self, window: float, tolerance: float, model: str) -> WindowDelta | None:
        """What the gate measured for ``model`` over the last ``window`` seconds; ``None`` without
        history. A model first seen inside the window counts from zero at the window's start."""
        newest = self.ring.newest()
        start = self.ring.start_of(window, tolerance)
        if newest is None or start is None or model not in newest[1]:
            return None
        now = newest[1][model]
        return between(now, start[1].get(model, WindowDelta(start[0])))
