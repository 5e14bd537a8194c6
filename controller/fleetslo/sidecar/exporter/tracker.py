"""What the sidecar knows about its vLLM server: scrape health and a history of totals.

The tracker turns each successful scrape into reset-corrected running totals (see
``metrics.window.accumulate``) and keeps a bounded ring of them, so any window is one
subtraction. A failed scrape marks the engine down, counts the failure by reason and hides every
derived signal until the next success: values from before an outage must not pose as fresh.

No I/O here: the scraper calls ``record_success``/``record_failure`` with what it saw.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from fleetslo.core.errors import FleetSLOError
from fleetslo.core.metrics.window import SnapshotRing, WindowDelta, accumulate, window_delta
from fleetslo.core.model import EngineSnapshot
from fleetslo.sidecar.exporter.signals import Totals, WindowSignals, derive
from fleetslo.sidecar.thresholds import SloThresholds

_EMPTY = WindowDelta(0.0)


class EngineTracker:
    """Scrape health and windowed history of one vLLM server."""

    def __init__(self, ring_size: int, interval: float) -> None:
        self.ring: SnapshotRing[Totals] = SnapshotRing(ring_size)
        self.interval = interval
        self.up = False
        self.last_success_at: float | None = None
        self.last_duration: float | None = None
        self.last_error: str | None = None
        self.errors: Counter[str] = Counter()
        #: Samples the parser rejected, by reason (``fleetslo_engine_rejected_samples_total``).
        self.rejected: Counter[str] = Counter()
        self.latest: Mapping[str, EngineSnapshot] = {}
        #: Models seen on the last good page, kept through an outage so ``engine_up 0`` names them.
        self.known_models: tuple[str, ...] = ()
        self._previous: tuple[float, Mapping[str, EngineSnapshot]] | None = None

    def record_success(
        self,
        at: float,
        duration: float,
        models: Mapping[str, EngineSnapshot],
        wall: float | None = None,
        *,
        rejected: Mapping[str, int] | None = None,
        held: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        """Fold one good scrape into the totals.

        ``at`` is a monotonic time (window math must not jump with the wall clock); ``wall`` is the
        Unix time published as the last-success timestamp (defaults to ``at``). ``held`` names, per
        model, the families the parser left out for an impossible value (``rejected`` counts them
        by reason): this step adds nothing for them, and the next good scrape is compared with
        their last good values, so one bad sample neither poisons the windows nor, when the
        family comes back, counts its whole history as new.
        """
        if rejected:
            self.rejected.update(rejected)
        newest = self.ring.newest()
        totals = dict(newest[1]) if newest else {}
        previous_at, previous = self._previous if self._previous else (at, {})
        for name, snapshot in models.items():
            before = previous.get(name)
            step = _EMPTY if before is None else window_delta(snapshot, before, at - previous_at)
            totals[name] = accumulate(totals.get(name, _EMPTY), step)
        # A model no longer served has no current totals: drop it so its signals disappear.
        totals = {name: t for name, t in totals.items() if name in models}
        self.ring.append(at, totals)
        self._previous = (at, _with_held(models, previous, held or {}))
        self.latest = models
        self.known_models = tuple(sorted(models))
        self.up, self.last_duration, self.last_error = True, duration, None
        self.last_success_at = at if wall is None else wall

    def record_failure(self, at: float, duration: float, error: FleetSLOError) -> None:
        """Mark the engine down; keep the history so windows resume once it is back."""
        self.up = False
        self.last_duration = duration
        self.last_error = f"{error.reason}: {error}"
        self.errors[error.reason] += 1
        self.latest = {}

    @property
    def tolerance(self) -> float:
        """How far a window's start point may sit from the ideal one (scrapes jitter)."""
        return 0.75 * self.interval

    def signals(self, windows: Sequence[float], slo: SloThresholds) -> list[WindowSignals]:
        """Windowed signals, or none at all while the engine is down."""
        if not self.up:
            return []
        return derive(self.ring, windows, self.tolerance, slo)


def _with_held(
    models: Mapping[str, EngineSnapshot],
    previous: Mapping[str, EngineSnapshot],
    held: Mapping[str, frozenset[str]],
) -> Mapping[str, EngineSnapshot]:
    """``models`` with each held family's counters and histograms as they last were good."""
    if not held:
        return models
    out = dict(models)
    for name, families in held.items():
        now, before = models.get(name), previous.get(name)
        if now is None or before is None:
            continue
        counters = {**now.counters, **{f: before.counters[f] for f in families if f in before.counters}}
        histograms = {
            **now.histograms,
            **{f: before.histograms[f] for f in families if f in before.histograms},
        }
        created = {**now.created, **{k: v for k, v in before.created.items() if k[0] in families}}
        out[name] = replace(now, counters=counters, histograms=histograms, created=created)
    return out
