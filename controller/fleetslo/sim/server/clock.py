"""Simulated time that runs ``speedup`` times faster than the monotonic clock.

A sim-server's engine lives in simulated seconds: with ``speedup`` 10, a 60 s cold start takes 6 s of
wall time and a 50 ms step 5 ms. Latencies on ``/metrics`` are simulated seconds, so a controller that
reads them against simulated-time targets sees what it would see on the modelled hardware.

Arithmetic only; the caller passes the monotonic clock (``loop.time`` in the server).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class SpeedClock:
    """Simulated seconds since ``origin`` (a reading of ``now``), ``speedup`` per wall second."""

    def __init__(
        self, speedup: float, origin: float | None = None, now: Callable[[], float] = time.monotonic
    ):
        if not speedup > 0:
            raise ValueError(f"speedup must be > 0 (got {speedup!r})")
        self.speedup = speedup
        self._now = now
        self.origin = now() if origin is None else origin

    def now(self) -> float:
        """Simulated seconds elapsed since the origin."""
        return (self._now() - self.origin) * self.speedup

    def wall_at(self, simulated: float) -> float:
        """The reading of the monotonic clock at which ``simulated`` seconds will have elapsed."""
        return self.origin + simulated / self.speedup

    def wall_seconds(self, simulated: float) -> float:
        """How long ``simulated`` seconds last on the wall clock."""
        return simulated / self.speedup
