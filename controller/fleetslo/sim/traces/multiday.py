"""A synthetic multi-day traffic curve with a known answer: daily and weekly shape, holidays, a surge.

``rate(t)`` = base × daily(t) × weekly(day) × holiday(day) × surge(t), where

* ``daily`` is a smooth day shape: a night trough and a working-day peak (two cosine harmonics,
  so the morning ramp is steeper than the evening fall, as on real services), mean 1 over the day;
* ``weekly`` multiplies each day of the week (Saturday and Sunday lower by default);
* ``holidays`` lists day indices that run at ``holiday_factor`` of their usual level;
* ``surges`` are one-off (start, duration, factor) bursts nobody could have forecast.

The curve is a pure function of its parameters, so a forecaster can be tested against the exact
rate it should have predicted. ``arrivals`` streams a non-homogeneous Poisson process of that
rate (thinning, hour by hour), deterministic for a seed, without holding the days in memory.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces.synthetic import TokenSampler
from fleetslo.sim.workload import Request

DAY_S = 86_400.0
WEEK_DAYS = 7
#: Monday to Sunday: weekends run lower.
DEFAULT_WEEKLY = (1.0, 1.02, 1.0, 0.98, 0.95, 0.7, 0.65)
_CHUNK_S = 3600.0


@dataclass(frozen=True, slots=True)
class Surge:
    start_s: float
    duration_s: float
    factor: float


@dataclass(frozen=True, slots=True)
class MultiDayCurve:
    """The rate of a service over days; see the module docstring for the shape."""

    base_rate: float
    #: Relative swing of the day shape: the peak is about (1 + amplitude) × the day's mean.
    amplitude: float = 0.6
    #: Hour of the day of the peak.
    peak_hour: float = 14.0
    weekly: tuple[float, ...] = DEFAULT_WEEKLY
    holidays: tuple[int, ...] = ()
    holiday_factor: float = 0.6
    surges: tuple[Surge, ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.base_rate) and self.base_rate > 0):
            raise ConfigError(f"base_rate: must be a positive number (got {self.base_rate!r})")
        if not 0 <= self.amplitude < 1:
            raise ConfigError(f"amplitude: must be in [0, 1) (got {self.amplitude!r})")
        if len(self.weekly) != WEEK_DAYS or any(not w > 0 for w in self.weekly):
            raise ConfigError(f"weekly: needs 7 positive day factors (got {self.weekly!r})")
        if not self.holiday_factor > 0 or any(s.factor <= 0 or s.duration_s <= 0 for s in self.surges):
            raise ConfigError("holiday_factor and every surge's factor and duration must be positive")

    def daily(self, t: float) -> float:
        """The day shape at ``t`` (mean 1 over a day)."""
        phase = 2 * math.pi * ((t / 3600.0 - self.peak_hour) / 24.0)
        # the second harmonic skews the day: a fast morning rise, a slower evening decline
        shape = math.cos(phase) + 0.25 * math.cos(2 * phase + 0.8)
        return max(0.05, 1.0 + self.amplitude * shape / 1.25)

    def day_factor(self, day: int) -> float:
        holiday = self.holiday_factor if day in self.holidays else 1.0
        return self.weekly[day % WEEK_DAYS] * holiday

    def surge(self, t: float) -> float:
        factor = 1.0
        for s in self.surges:
            if s.start_s <= t < s.start_s + s.duration_s:
                factor *= s.factor
        return factor

    def rate(self, t: float) -> float:
        """Requests per second at ``t`` seconds from the start (day 0 is a Monday, 00:00)."""
        return self.base_rate * self.daily(t) * self.day_factor(int(t // DAY_S)) * self.surge(t)

    def peak_bound(self, start: float, end: float) -> float:
        """An upper bound of ``rate`` over [start, end): what thinning draws candidates at."""
        days = range(int(start // DAY_S), int(max(start, end - 1e-9) // DAY_S) + 1)
        surge = 1.0
        for s in self.surges:
            if s.start_s < end and s.start_s + s.duration_s > start:
                surge *= max(1.0, s.factor)
        return self.base_rate * (1 + self.amplitude) * max(self.day_factor(d) for d in days) * surge


def arrivals(
    curve: MultiDayCurve, duration_s: float, tokens: TokenSampler, *, seed: int = 0
) -> Iterator[Request]:
    """Poisson arrivals at ``curve.rate`` over ``[0, duration_s)``, streamed hour by hour."""
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise ConfigError(f"duration_s: must be a positive number (got {duration_s!r})")
    times = random.Random(f"multiday:{seed}")
    lengths = random.Random(f"multiday-tokens:{seed}")
    start = 0.0
    while start < duration_s:
        end = min(start + _CHUNK_S, duration_s)
        bound = curve.peak_bound(start, end)
        t = start + times.expovariate(bound)
        while t < end:
            if times.random() * bound < curve.rate(t):
                n_in, n_out = tokens(lengths)
                yield Request(t, n_in, n_out)
            t += times.expovariate(bound)
        start = end
