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
        self.latest: Mapping[str, EngineSnapshot] = {}
        #: Models seen on the last good page, kept through an outage so ``engine_up 0`` names them.
        self.known_models: tuple[str, ...] = ()
        self._previous: tuple[float, Mapping[str, EngineSnapshot]] | None = None

    def record_success(
        self, at: float, duration: float, models: Mapping[str, EngineSnapshot], wall: float | None = None
    ) -> None:
        """Fold one good scrape into the totals.

        ``at`` is a monotonic time (window math must not jump with the wall clock); ``wall`` is the
        Unix time published as the last-success timestamp (defaults to ``at``).
        """
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
        self._previous = (at, models)
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
