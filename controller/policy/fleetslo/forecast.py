"""Arrival-rate forecast over the cold-start horizon: a damped linear trend fitted over minutes.

Replicas asked for now serve only after a cold start of minutes, so the fleet is sized for the rate
expected then. The trend is the least-squares slope of the observed rate over ``trend_window_s`` (a
few minutes: a slope from two overlapping one-minute windows 15 s apart is noise, and extrapolating
noise over five minutes multiplies it by twenty), damped, and only a rising trend is extrapolated,
at most to ``max_growth`` × the current rate. A falling trend never gives capacity away early:
scale-down acts on what is observed, slowly.

Pure value type; ``update`` returns a new forecaster.
"""

from __future__ import annotations

from dataclasses import dataclass

Sample = tuple[float, float]  # (time, arrivals per second)


@dataclass(frozen=True, slots=True)
class RateForecast:
    samples: tuple[Sample, ...] = ()

    def update(self, now: float, rate: float, window_s: float) -> RateForecast:
        kept = tuple(s for s in self.samples if s[0] > now - window_s)
        return RateForecast((*kept, (now, rate)))

    def slope(self) -> float:
        """Requests/s per second over the kept samples (0 with fewer than three)."""
        if len(self.samples) < 3:
            return 0.0
        ts = [t for t, _ in self.samples]
        rs = [r for _, r in self.samples]
        mt, mr = sum(ts) / len(ts), sum(rs) / len(rs)
        stt = sum((t - mt) ** 2 for t in ts)
        return 0.0 if stt <= 0 else sum((t - mt) * (r - mr) for t, r in self.samples) / stt

    def ahead(self, horizon_s: float, current: float, damping: float, max_growth: float) -> float:
        """The rate expected ``horizon_s`` from now: never below ``current``, at most ``max_growth`` ×."""
        rising = current + max(0.0, self.slope()) * horizon_s * damping
        return min(rising, current * max_growth) if current > 0 else rising
