"""Cumulative bucket histograms and the window math on them, exactly as Prometheus does it.

``quantile`` reproduces PromQL's ``histogram_quantile`` (promql/quantile.go ``bucketQuantile``)
bit for bit, including its edge cases, so a p90 the sidecar publishes equals the p90 a dashboard
computes from the same buckets. A test checks this against a real Prometheus server.

Pure functions on immutable values; nothing here does I/O.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

INF = math.inf


@dataclass(frozen=True, slots=True)
class BucketHistogram:
    """A classic Prometheus histogram: cumulative counts per upper bound.

    ``bounds`` are strictly increasing and, for a well-formed histogram, end with ``+Inf``;
    ``counts[i]`` is the number of observations ``<= bounds[i]``. ``sum`` is ``None`` when the
    page had no ``_sum`` series.
    """

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    sum: float | None = None

    @property
    def count(self) -> float:
        """Observations in total (the ``+Inf`` bucket); 0 for a histogram without buckets."""
        return self.counts[-1] if self.counts else 0.0

    def mean(self) -> float | None:
        """Mean observation, or ``None`` without observations or without a ``_sum``."""
        if self.sum is None or self.count <= 0:
            return None
        return self.sum / self.count


def merge(histograms: Iterable[BucketHistogram]) -> BucketHistogram | None:
    """Sum histograms bucket by bucket, as ``sum by (le)`` does.

    Histograms whose bounds differ (engines or replicas with different
    ``--custom-histogram-buckets``) are summed as PromQL's ``sum by (le)`` sums them: every ``le``
    any input has is kept, and its count is the sum over the inputs that have that ``le``. The
    result can dip where one input lacks an edge; ``quantile`` and ``fraction_at_or_below`` repair
    that exactly as ``histogram_quantile`` does (``ensureMonotonic``).
    """
    items = list(histograms)
    if not items:
        return None
    if len(items) == 1:
        return items[0]
    counts: dict[float, float] = {}
    for h in items:
        for b, c in zip(h.bounds, h.counts, strict=True):
            counts[b] = counts.get(b, 0.0) + c
    bounds = tuple(sorted(counts))
    sums = [h.sum for h in items]
    total = None if any(s is None for s in sums) else math.fsum(s for s in sums if s is not None)
    return BucketHistogram(bounds, tuple(counts[b] for b in bounds), total)


def is_reset(newer: BucketHistogram, older: BucketHistogram) -> bool:
    """True when ``newer`` cannot be a continuation of ``older`` (the server restarted).

    A restart shows as any cumulative count going down, or as a different bucket layout
    (``--custom-histogram-buckets`` changed between runs).
    """
    if newer.bounds != older.bounds:
        return True
    return any(n < o for n, o in zip(newer.counts, older.counts, strict=True))


def delta(newer: BucketHistogram, older: BucketHistogram | None) -> BucketHistogram:
    """Observations between two cumulative snapshots of one series.

    After a reset the counters restarted from zero, so everything in ``newer`` happened inside
    the window: the delta is ``newer`` itself, as PromQL's ``increase`` assumes. Never negative.
    """
    if older is None or is_reset(newer, older):
        return newer
    counts = tuple(n - o for n, o in zip(newer.counts, older.counts, strict=True))
    total = None if newer.sum is None or older.sum is None else newer.sum - older.sum
    return BucketHistogram(newer.bounds, counts, total)


def quantile(q: float, h: BucketHistogram | None) -> float | None:
    """The q-quantile by PromQL's ``histogram_quantile`` rules; ``None`` where PromQL gives NaN.

    Rules (promql/quantile.go): q outside [0, 1] gives -Inf/+Inf; a histogram whose last bound is
    not +Inf, with fewer than two buckets, or with no observations gives NaN; a rank in the +Inf
    bucket gives the highest finite bound; a rank in the first bucket interpolates from 0 unless
    that bucket's bound is <= 0; otherwise linear interpolation inside the bucket.
    """
    if h is None or math.isnan(q):
        return None
    if q < 0:
        return -INF
    if q > 1:
        return INF
    located = quantile_located(q, h)
    return None if located is None else located[0]


def quantile_bucket(q: float, h: BucketHistogram | None) -> tuple[float, float] | None:
    """The edges ``(lower, upper)`` of the bucket ``quantile(q, h)`` falls in: all the buckets say
    about the true quantile, which lies anywhere between them; ``quantile`` is a linear guess
    inside. The bucket is ``(0, first bound]`` for the first (``(b, b)`` where that bound is <= 0,
    as PromQL answers it), ``(highest finite bound, inf)`` for the ``+Inf`` one. ``None`` where
    ``quantile`` is, and for q outside [0, 1]."""
    located = quantile_located(q, h)
    return None if located is None else located[1]


def quantile_located(q: float, h: BucketHistogram | None) -> tuple[float, tuple[float, float]] | None:
    """``quantile(q, h)`` and ``quantile_bucket(q, h)`` from one search of the buckets, for q in
    [0, 1]; ``None`` where PromQL gives NaN (no ``+Inf`` bound, under two buckets, no
    observations, q == 0 over an empty first bucket) and for q outside [0, 1]."""
    if h is None or not 0 <= q <= 1:
        return None
    if not h.bounds or h.bounds[-1] != INF:
        return None
    counts = _monotonic(h.counts)
    if len(counts) < 2:
        return None
    observations = counts[-1]
    if observations == 0 or math.isnan(observations):
        return None
    rank = q * observations
    # sort.Search over all but the +Inf bucket: first index whose count >= rank.
    b = bisect_left(counts, rank, 0, len(counts) - 1)
    if b == len(counts) - 1:
        return h.bounds[-2], (h.bounds[-2], INF)
    if b == 0 and h.bounds[0] <= 0:
        return h.bounds[0], (h.bounds[0], h.bounds[0])
    start, end, count = 0.0, h.bounds[b], counts[b]
    if b > 0:
        start = h.bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    if count == 0:
        # Only q == 0 over an empty first bucket gets here: PromQL computes 0/0 and returns NaN.
        return None
    return start + (end - start) * (rank / count), (start, end)


def _monotonic(counts: tuple[float, ...]) -> list[float]:
    """PromQL's ``ensureMonotonic``: a bucket never holds fewer than the one before it.

    Rate extrapolation and scrape races can make cumulative buckets dip slightly; PromQL raises
    such buckets to the running maximum rather than failing.
    """
    out: list[float] = []
    high = -INF
    for c in counts:
        high = max(high, c)
        out.append(high)
    return out


@dataclass(frozen=True, slots=True)
class Fraction:
    """The share of observations at or under a threshold, and whether it was exact.

    ``exact`` is True when the threshold is a bucket edge: the value is then a plain ratio of
    counts. Otherwise it assumes observations spread linearly inside the bucket that holds the
    threshold (the same assumption ``histogram_quantile`` makes), which can be off by up to that
    bucket's share of observations.
    """

    value: float
    exact: bool


def fraction_at_or_below(h: BucketHistogram | None, threshold: float) -> Fraction | None:
    """Fraction of observations ``<= threshold``; ``None`` without observations."""
    if h is None or not h.bounds or h.bounds[-1] != INF:
        return None
    counts = _monotonic(h.counts)
    total = counts[-1]
    if total <= 0:
        return None
    i = bisect_left(h.bounds, threshold)
    if h.bounds[i] == threshold:
        return Fraction(counts[i] / total, exact=True)
    lower_bound = h.bounds[i - 1] if i > 0 else 0.0
    lower_count = counts[i - 1] if i > 0 else 0.0
    if h.bounds[i] == INF or threshold <= lower_bound:
        # Beyond the last finite edge nothing can be said about the +Inf bucket's spread.
        return Fraction(lower_count / total, exact=False)
    share = (threshold - lower_bound) / (h.bounds[i] - lower_bound)
    below = lower_count + (counts[i] - lower_count) * share
    return Fraction(below / total, exact=False)
