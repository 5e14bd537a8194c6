"""Windowed signals from cumulative snapshots: what happened between two scrapes.

A window is the difference between the newest snapshot and the one taken ``window`` seconds
before it. Differences are taken per series (per engine, per label) and only then summed, as
``sum(increase(x[w]))`` does in PromQL, so a restart of one data-parallel engine resets only its
own series. A counter that went down, or whose ``_created`` timestamp moved, restarted inside the
window: its whole current value counts as the increase, never a negative one.

Pure functions and value types; nothing here does I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from fleetslo.core.histogram import (
    BucketHistogram,
    Fraction,
    delta,
    fraction_at_or_below,
    merge,
    quantile,
    quantile_located,
)
from fleetslo.core.model import EngineSnapshot, Quantiles

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class WindowDelta:
    """The increase of every counter and histogram of one model over ``seconds``."""

    seconds: float
    histograms: Mapping[str, BucketHistogram] = field(default_factory=dict)
    counters: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def increase(self, counter: str) -> float | None:
        """Total increase of a counter family; ``None`` if the family was absent."""
        by = self.counters.get(counter)
        return None if by is None else sum(by.values())

    def rate(self, counter: str) -> float | None:
        """Per-second increase over the window; ``None`` if absent or the window is empty."""
        increase = self.increase(counter)
        return None if increase is None or self.seconds <= 0 else increase / self.seconds

    def quantiles(self, histogram: str) -> Quantiles:
        """p50/p90/p99 of a histogram over the window (``None`` each without observations)."""
        return quantiles_of(self.histograms.get(histogram))

    def attainment(self, histogram: str, threshold: float) -> Fraction | None:
        """Share of the window's observations at or under ``threshold``."""
        return fraction_at_or_below(self.histograms.get(histogram), threshold)

    def observations(self, histogram: str) -> float | None:
        """Number of observations of a histogram in the window."""
        h = self.histograms.get(histogram)
        return None if h is None else h.count


def window_delta(newer: EngineSnapshot, older: EngineSnapshot | None, seconds: float) -> WindowDelta:
    """The increase from ``older`` to ``newer``; with no ``older`` everything counts as new."""
    histograms: dict[str, BucketHistogram] = {}
    for family, per_engine in newer.histograms.items():
        old_per_engine = older.histograms.get(family, {}) if older else {}
        parts = []
        for engine, h in per_engine.items():
            old = old_per_engine.get(engine)
            if old is not None and older is not None and _restarted(newer, older, family, engine):
                old = None
            parts.append(delta(h, old))
        merged = merge(parts)
        if merged is not None:
            histograms[family] = merged
    counters = {
        family: _counter_increase(newer, older, family, series) for family, series in newer.counters.items()
    }
    return WindowDelta(seconds, histograms, counters)


def _counter_increase(
    newer: EngineSnapshot, older: EngineSnapshot | None, family: str, series: Mapping[tuple[str, str], float]
) -> dict[str, float]:
    old_series = older.counters.get(family, {}) if older else {}
    out: dict[str, float] = {}
    for key, value in series.items():
        old = old_series.get(key)
        restarted = (
            old is None or value < old or (older is not None and _restarted(newer, older, family, key[0]))
        )
        increase = value if restarted else value - (old or 0.0)
        out[key[1]] = out.get(key[1], 0.0) + increase
    return out


def _restarted(newer: EngineSnapshot, older: EngineSnapshot, family: str, engine: str) -> bool:
    """A later ``_created`` timestamp means the series was re-created: the server restarted."""
    before = older.created.get((family, engine))
    after = newer.created.get((family, engine))
    return before is not None and after is not None and after > before


def combine(deltas: Iterable[WindowDelta]) -> WindowDelta | None:
    """Sum the windows of several replicas of one model into one fleet-wide window."""
    items = list(deltas)
    if not items:
        return None
    histograms: dict[str, list[BucketHistogram]] = {}
    counters: dict[str, dict[str, float]] = {}
    for d in items:
        for family, h in d.histograms.items():
            histograms.setdefault(family, []).append(h)
        for family, by in d.counters.items():
            target = counters.setdefault(family, {})
            for sub, value in by.items():
                target[sub] = target.get(sub, 0.0) + value
    merged = {family: m for family, hs in histograms.items() if (m := merge(hs)) is not None}
    return WindowDelta(max(d.seconds for d in items), merged, counters)


def accumulate(total: WindowDelta, step: WindowDelta) -> WindowDelta:
    """Add one scrape-to-scrape step to running, reset-corrected totals.

    Totals built this way only ever grow, so the increase over any window is a plain difference
    of two totals (``between``), however many restarts happened inside it. A histogram whose
    bucket layout changed (a restart with new ``--custom-histogram-buckets``) starts over.
    """
    histograms = dict(total.histograms)
    for family, h in step.histograms.items():
        before = histograms.get(family)
        if before is None or before.bounds != h.bounds:
            histograms[family] = h
        else:
            histograms[family] = _add(before, h)
    counters = {family: dict(by) for family, by in total.counters.items()}
    for family, by in step.counters.items():
        target = counters.setdefault(family, {})
        for sub, value in by.items():
            target[sub] = target.get(sub, 0.0) + value
    return WindowDelta(total.seconds + step.seconds, histograms, counters)


def between(newer: WindowDelta, older: WindowDelta) -> WindowDelta:
    """The increase between two running totals made by ``accumulate`` (newer minus older)."""
    histograms = {}
    for family, h in newer.histograms.items():
        old = older.histograms.get(family)
        histograms[family] = h if old is None or old.bounds != h.bounds else delta(h, old)
    counters = {
        family: {sub: value - older.counters.get(family, {}).get(sub, 0.0) for sub, value in by.items()}
        for family, by in newer.counters.items()
    }
    return WindowDelta(newer.seconds - older.seconds, histograms, counters)


def _add(a: BucketHistogram, b: BucketHistogram) -> BucketHistogram:
    counts = tuple(x + y for x, y in zip(a.counts, b.counts, strict=True))
    total = None if a.sum is None or b.sum is None else a.sum + b.sum
    return BucketHistogram(a.bounds, counts, total)


class SnapshotRing(Generic[T]):
    """A bounded, time-ordered history of timestamped values (scrapes)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 2:
            raise ValueError("a ring needs room for at least two snapshots")
        self._items: deque[tuple[float, T]] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[float, T]]:
        return iter(self._items)

    def append(self, at: float, item: T) -> None:
        """Add the newest item; an item older than the newest one is a clock bug and is refused."""
        if self._items and at < self._items[-1][0]:
            raise ValueError(f"snapshot at {at} is older than the newest one ({self._items[-1][0]})")
        self._items.append((at, item))

    def newest(self) -> tuple[float, T] | None:
        return self._items[-1] if self._items else None

    def start_of(self, window: float, tolerance: float) -> tuple[float, T] | None:
        """The snapshot to diff the newest one against for a window of ``window`` seconds.

        That is the snapshot taken closest to ``window`` seconds before the newest one, if it is
        within ``tolerance`` of that point (scrapes jitter, so an exact match is rare). ``None``
        while the history is shorter than the window, or when a gap (an outage) left no snapshot
        near the start: a 5-minute quantile from 40 seconds — or from 10 minutes — would be a lie.
        """
        newest = self.newest()
        if newest is None:
            return None
        goal = newest[0] - window
        best = min(self._items, key=lambda item: abs(item[0] - goal))
        if abs(best[0] - goal) > tolerance or best[0] >= newest[0]:
            return None
        return best


def quantiles_of(h: BucketHistogram | None) -> Quantiles:
    """p50/p90/p99 by PromQL's rules and the bucket the p90 lies in (``None`` each without
    observations): what the sidecars' windows and the Prometheus source both report."""
    located = quantile_located(0.9, h)
    p90, bucket = (None, None) if located is None else located
    return Quantiles(quantile(0.5, h), p90, quantile(0.99, h), bucket)
