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
The seasonal forecast read is its candidates' weighted ``cover`` quantile (0.9), not their mean:
on the second day of a daily 09:00 surge x3, persistence still held 0.54 of the weight and the
mean foresaw x1.45; the quantile foresees the surge yesterday showed.
With ``banded`` that seasonal forecast is the top of its calibrated error band (the
``band_quantile`` of its own residuals at that time of day), once it has one. It is off by default:
the policy already multiplies the sized load by its measured load margin (``calibration``: how far
the load one cold start later exceeded what was sized for), so a band on top counts the same misses
twice (over the two-week ServeGen run: +0.002 attainment for +9.8 % replica-hours). The reactive
trend stays the safety net for what the profile did not foresee. ``seasonal=None`` turns foresight
off (the trend alone, as before); ``bootstrapped`` fills it from a metrics store (samples in the
unit observed live: tokens/s).

Pure value type; ``update`` returns a new forecaster.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from fleetslo.policy.forecast import SeasonalForecast

Sample = tuple[float, float]  # (time, arrivals per second)


@dataclass(frozen=True, slots=True)
class RateForecast:
    samples: tuple[Sample, ...] = ()
    seasonal: SeasonalForecast | None = field(default_factory=SeasonalForecast)
    #: Size by the top of the seasonal forecast's error band, not its point (where it has one).
    banded: bool = False
    #: The seasonal candidates' weighted quantile the sizing reads (``SeasonalForecast.ahead``'s
    #: ``q``): the sizing covers an upper quantile of every error it measures, and a candidate the
    #: others contradict is one more. ``None``: their weighted mean.
    cover: float | None = 0.9

    def update(self, now: float, rate: float, keep_s: float) -> RateForecast:
        """Add a sample and forget those older than ``keep_s``."""
        kept = tuple(s for s in self.samples if s[0] > now - keep_s)
        seasonal = None if self.seasonal is None else self.seasonal.observe(now, rate)
        return replace(self, samples=(*kept, (now, rate)), seasonal=seasonal)

    def bootstrapped(self, history: Iterable[Sample]) -> RateForecast:
        """The seasonal part filled from past (time, rate) samples (the last days in Prometheus), at start:
        samples older than one already observed are ignored."""
        if self.seasonal is None:
            return self
        return replace(self, seasonal=self.seasonal.bootstrapped(history))

    def seasonal_ahead(self, horizon_s: float) -> float | None:
        """The seasonal forecast ``horizon_s`` after the newest sample: the band's top when
        ``banded`` and known, else the point forecast (None without enough history)."""
        if self.seasonal is None or not self.samples:
            return None
        now = self.samples[-1][0]
        upper = self.seasonal.upper(now, horizon_s) if self.banded else None
        return upper if upper is not None else self.seasonal.ahead(now, horizon_s, self.cover)

    def peak(self, since: float) -> float | None:
        """The highest rate observed at or after ``since``."""
        rates = [r for t, r in self.samples if t >= since]
        return max(rates) if rates else None

    def slope(self, since: float, confidence: float = 0.0) -> float:
        """Rate per second over the samples at or after ``since`` (0 with fewer than three), less
        ``confidence`` standard errors of the fit: a slope the noise could have made is not a trend."""
        samples = [s for s in self.samples if s[0] >= since]
        n = len(samples)
        if n < 3:
            return 0.0
        mt = sum(t for t, _ in samples) / n
        mr = sum(r for _, r in samples) / n
        stt = sum((t - mt) ** 2 for t, _ in samples)
        if stt <= 0:
            return 0.0
        slope = sum((t - mt) * (r - mr) for t, r in samples) / stt
        if confidence <= 0:
            return slope
        residual = sum((r - mr - slope * (t - mt)) ** 2 for t, r in samples) / (n - 2)
        error = math.sqrt(residual / stt)
        return slope - confidence * error if slope > 0 else slope + min(confidence * error, -slope)

    def ahead(
        self,
        horizon_s: float,
        current: float,
        trend_since: float,
        *,
        damping: float,
        max_growth: float,
        confidence: float = 0.0,
    ) -> float:
        """The rate expected ``horizon_s`` from now: never below ``current``, at most ``max_growth`` ×."""
        rising = current + max(0.0, self.slope(trend_since, confidence)) * horizon_s * damping
        reactive = min(rising, current * max_growth) if current > 0 else rising
        foreseen = self.seasonal_ahead(horizon_s)
        return reactive * self.event_lift(horizon_s) if foreseen is None else max(reactive, foreseen)

    def event_lift(self, horizon_s: float) -> float:
        """How much a known event (the spec's launch at 18:00) lifts the rate ``horizon_s`` ahead over
        now's, never below 1: what the reactive path multiplies by while the seasonal forecast has
        too little history to forecast at all (an event is known from the spec, not learned). An
        event's end lowers nothing here: giving capacity back follows what is observed."""
        if self.seasonal is None or not self.samples:
            return 1.0
        now = self.samples[-1][0]
        return max(1.0, self.seasonal.event_factor(now + horizon_s) / self.seasonal.event_factor(now))
