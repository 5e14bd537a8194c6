"""Arrival-rate forecast over the cold-start horizon: a damped linear trend fitted over minutes.

Replicas asked for now serve only after a cold start of minutes, so the fleet is sized for the rate
expected then. The trend is the least-squares slope of the observed rate over ``trend_window_s`` (a
few minutes: a slope from two overlapping one-minute windows 15 s apart is noise, and extrapolating
noise over five minutes multiplies it by twenty), damped, and only a rising trend is extrapolated,
at most to ``max_growth`` × the current rate. A falling trend never gives capacity away early:
scale-down acts on what is observed, slowly.

Foresight: ``seasonal`` (``fleetslo.policy.forecast``) learns the daily and weekly profile from the
same samples; once it has a day of history, ``ahead`` is the larger of the trend and the seasonal
forecast for ``now + horizon``, so a ramp the week has shown before is met one cold start early.
The reactive trend stays the safety net for what the profile did not foresee. ``seasonal=None``
turns foresight off (the trend alone, as before); ``bootstrapped`` fills it from a metrics store.

Pure value type; ``update`` returns a new forecaster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from fleetslo.policy.forecast import SeasonalForecast

Sample = tuple[float, float]  # (time, arrivals per second)


@dataclass(frozen=True, slots=True)
class RateForecast:
    samples: tuple[Sample, ...] = ()
    seasonal: SeasonalForecast | None = field(default_factory=SeasonalForecast)

    def update(self, now: float, rate: float, keep_s: float) -> RateForecast:
        """Add a sample and forget those older than ``keep_s``."""
        kept = tuple(s for s in self.samples if s[0] > now - keep_s)
        seasonal = None if self.seasonal is None else self.seasonal.observe(now, rate)
        return RateForecast((*kept, (now, rate)), seasonal)

    def bootstrapped(self, history: Iterable[Sample]) -> RateForecast:
        """The seasonal part filled from past (time, rate) samples (the last days in Prometheus), at start:
        samples older than one already observed are ignored."""
        if self.seasonal is None:
            return self
        return RateForecast(self.samples, self.seasonal.observe_many(history))

    def seasonal_ahead(self, horizon_s: float) -> float | None:
        """The seasonal forecast ``horizon_s`` after the newest sample (None without enough history)."""
        if self.seasonal is None or not self.samples:
            return None
        return self.seasonal.ahead(self.samples[-1][0], horizon_s)

    def peak(self, since: float) -> float | None:
        """The highest rate observed at or after ``since``."""
        rates = [r for t, r in self.samples if t >= since]
        return max(rates) if rates else None

    def slope(self, since: float) -> float:
        """Requests/s per second over the samples at or after ``since`` (0 with fewer than three)."""
        samples = [s for s in self.samples if s[0] >= since]
        if len(samples) < 3:
            return 0.0
        mt = sum(t for t, _ in samples) / len(samples)
        mr = sum(r for _, r in samples) / len(samples)
        stt = sum((t - mt) ** 2 for t, _ in samples)
        return 0.0 if stt <= 0 else sum((t - mt) * (r - mr) for t, r in samples) / stt

    def ahead(
        self, horizon_s: float, current: float, trend_since: float, damping: float, max_growth: float
    ) -> float:
        """The rate expected ``horizon_s`` from now: never below ``current``, at most ``max_growth`` ×."""
        rising = current + max(0.0, self.slope(trend_since)) * horizon_s * damping
        reactive = min(rising, current * max_growth) if current > 0 else rising
        foreseen = self.seasonal_ahead(horizon_s)
        return reactive if foreseen is None else max(reactive, foreseen)
