"""The policy's view of a target: per-replica scrape histories in, one ``Observation`` out.

Shared by the simulator and the direct source, so a policy sees an observation built by the same
code in simulation and in production. Each replica's increase over the window is taken from its
own cumulative series and only then summed (``fleetslo.core.metrics.window``), and the quantiles come
from the summed buckets by PromQL's rules — the p90 a policy sees is bucket-interpolated exactly as
on a real fleet.

Pure: no clock, no fleet, no I/O. A signal that cannot be computed is ``None``, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from fleetslo.core import conventions as cv
from fleetslo.core.histogram import BucketHistogram
from fleetslo.core.metrics.window import SnapshotRing, WindowDelta, combine, window_delta
from fleetslo.core.model import EngineSnapshot, Observation, ReplicaCounts
from fleetslo.core.spec import FleetSLOSpec


class ReplicaScrape(Protocol):
    """One scrape of one replica: its vLLM page and, if known, how long its GPUs had been busy.

    ``busy_seconds`` is cumulative (the simulator counts it exactly; the direct source integrates
    the sidecar's utilization gauge); ``None`` when the replica's GPUs could not be read.
    """

    @property
    def at(self) -> float: ...

    @property
    def snapshot(self) -> EngineSnapshot: ...

    @property
    def busy_seconds(self) -> float | None: ...


S = TypeVar("S", bound=ReplicaScrape)


@dataclass(frozen=True, slots=True)
class _Part(Generic[S]):
    """One replica's contribution to a window."""

    delta: WindowDelta
    busy_fraction: float | None
    newest: S
    current: bool  # scraped at the newest scrape time: it is still serving


def build_observation(
    target: str,
    now: float,
    window: float,
    *,
    histories: Sequence[SnapshotRing[S]],
    replicas: ReplicaCounts,
    batch_limit: int | None,
    spec: FleetSLOSpec,
    slack: float = 0.0,
) -> Observation:
    """The fleet-wide observation for the window of ``window`` seconds ending at the newest scrape."""
    parts = _parts(histories, window, slack)
    base = Observation(target=target, at=now, window=window, replicas=replicas, batch_limit=batch_limit)
    if not parts:
        return base
    fleet = combine(p.delta for p in parts)
    assert fleet is not None
    current = [p for p in parts if p.current]
    newest_at = max(p.newest.at for p in parts)
    busy = [p.busy_fraction for p in current if p.busy_fraction is not None]
    ttft = fleet.attainment(cv.Histogram.TTFT, spec.objectives.ttft.threshold)
    tpot = fleet.attainment(cv.Histogram.TPOT, spec.objectives.tpot.threshold)
    return Observation(
        target=target,
        at=now,
        window=window,
        replicas=replicas,
        batch_limit=batch_limit,
        replicas_reporting=len(current),
        data_age=now - newest_at,
        ttft=fleet.quantiles(cv.Histogram.TTFT),
        itl=fleet.quantiles(cv.Histogram.ITL),
        tpot=fleet.quantiles(cv.Histogram.TPOT),
        ttft_attainment=None if ttft is None else ttft.value,
        tpot_attainment=None if tpot is None else tpot.value,
        request_rate=fleet.rate(cv.Counter.REQUEST_SUCCESS),
        prompt_tokens_rate=fleet.rate(cv.Counter.PROMPT_TOKENS),
        generation_tokens_rate=fleet.rate(cv.Counter.GENERATION_TOKENS),
        preemption_rate=fleet.rate(cv.Counter.PREEMPTIONS),
        running=_gauge_sum(current, cv.Gauge.RUNNING),
        waiting=_gauge_sum(current, cv.Gauge.WAITING),
        kv_cache_usage=_gauge_mean(current, cv.Gauge.KV_CACHE_USAGE),
        gpu_utilization=sum(busy) / len(busy) if busy else None,
        prompt_lengths=_observed(fleet.histograms.get(cv.Histogram.PROMPT_LENGTH)),
        output_lengths=_observed(fleet.histograms.get(cv.Histogram.OUTPUT_LENGTH)),
    )


def _observed(h: BucketHistogram | None) -> BucketHistogram | None:
    """A histogram with observations in the window, else ``None`` (nothing measured, not zero)."""
    return h if h is not None and h.count > 0 else None


def _parts(histories: Sequence[SnapshotRing[S]], window: float, slack: float) -> list[_Part[S]]:
    newest_times = [h.newest() for h in histories]
    latest = max((n[0] for n in newest_times if n is not None), default=None)
    if latest is None:
        return []
    parts = []
    for ring, newest in zip(histories, newest_times, strict=True):
        if newest is None or newest[0] < latest - window:
            continue  # gone before this window began
        start = ring.start_of(window, slack) or next(iter(ring))
        new, old = newest[1], start[1]
        span = new.at - old.at
        # Rates are per second of the window, as sum(rate(x[w])) gives them: a replica younger
        # than the window contributed its whole count inside it (its first sample is all zeros).
        delta = window_delta(new.snapshot, old.snapshot, max(window, span))
        parts.append(_Part(delta, _busy_fraction(new, old, span), new, newest[0] >= latest))
    return parts


def _busy_fraction(new: ReplicaScrape, old: ReplicaScrape, span: float) -> float | None:
    if span <= 0 or new.busy_seconds is None or old.busy_seconds is None:
        return None
    return (new.busy_seconds - old.busy_seconds) / span


def _gauge_sum(parts: Sequence[_Part[S]], name: str) -> float | None:
    values = [v for p in parts if (v := p.newest.snapshot.gauge(name)) is not None]
    return sum(values) if values else None


def _gauge_mean(parts: Sequence[_Part[S]], name: str) -> float | None:
    values = [v for p in parts if (v := p.newest.snapshot.gauge(name)) is not None]
    return sum(values) / len(values) if values else None
