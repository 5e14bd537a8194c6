"""A seasonal forecast of one positive series (arrival rate, request mix): level × seasonal growth × trend.

Inference traffic repeats: a day shape, a week shape, on top of a level that drifts. The model is
a multiplicative decomposition a reader can check by hand (Holt–Winters' structure, with robust
profile estimates instead of smoothed seasonal indices):

* **History in bins.** Observations are averaged into bins of ``bin_s`` (5 minutes); at most
  ``days_kept`` days are kept. Missing bins (the controller was down) stay missing.
* **Level** ``L``: the recent past, the last ``level_bins`` bins and the one being filled, most
  recent weighted most (``level_half_life_bins``). A weekend, a holiday or growth is in it at once.
* **Seasonal growth** ``G``: how the target time compared with those same recent bins (same
  weights) on past days — the median of that ratio over the last ``profile_days`` days (a holiday
  or a one-off surge on one day does not move a median of seven), blended with last week's same
  day once a week of history exists (``weekly_weight``): that is what knows a Saturday morning is
  not a Monday morning. A ratio of the same day's bins cancels that day's level, so a quiet week
  still teaches the shape of the morning ramp.
* **Trend** ``T``: the least-squares slope of observed / typical (the median of the same time on
  past days) over the recent bins, relative, damped (``trend_damping``) and bounded: a ramp the
  past days did not show (a surge building) is extrapolated a little.
* **Forecast** for ``t + h``: ``L × G × (1 + damped T × h)`` × the factor of any known event (a
  launch at 18:00) covering ``t + h``. Observations made during a known event are stored divided
  by its factor, so the event leaks into neither the level nor what later days learn.

Until ``min_days`` of history exist there is no forecast (``None``): the caller's reactive path
decides alone. Pure value type: ``observe`` returns a new forecaster; updates cost O(1) except
once per bin (a tuple copy of the kept history).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

DAY_S = 86_400.0
WEEK_DAYS = 7


@dataclass(frozen=True, slots=True)
class KnownEvent:
    """Traffic expected at ``factor`` × its usual level over [start, end) (Unix or trace seconds)."""

    start: float
    end: float
    factor: float


@dataclass(frozen=True, slots=True)
class SeasonalConfig:
    bin_s: float = 300.0
    days_kept: int = 15
    #: Days of history before the profile is trusted.
    min_days: float = 1.0
    profile_days: int = 7
    #: Weight of last week's same bin against the daily median, once a week is known.
    weekly_weight: float = 0.5
    level_bins: int = 6
    level_half_life_bins: float = 1.5
    trend_damping: float = 0.5
    #: The level-and-trend factor stays within [1/max_level, max_level] of the profile.
    max_level: float = 4.0

    def __post_init__(self) -> None:
        checks = (
            ("bin_s", self.bin_s > 0 and DAY_S % self.bin_s == 0, "> 0 and divide a day"),
            ("days_kept", self.days_kept >= max(1, self.min_days), ">= min_days"),
            ("profile_days", self.profile_days >= 1, ">= 1"),
            ("weekly_weight", 0 <= self.weekly_weight <= 1, "in [0, 1]"),
            ("level_bins", self.level_bins >= 1, ">= 1"),
            ("level_half_life_bins", self.level_half_life_bins > 0, "> 0"),
            ("trend_damping", 0 <= self.trend_damping <= 1, "in [0, 1]"),
            ("max_level", self.max_level >= 1, ">= 1"),
        )
        bad = [f"{name} must be {rule}" for name, ok, rule in checks if not ok]
        if bad:
            raise ValueError("; ".join(bad))

    @property
    def day_bins(self) -> int:
        return int(DAY_S / self.bin_s)


@dataclass(frozen=True, slots=True)
class SeasonalForecast:
    """Binned history of one series and the forecast it implies."""

    config: SeasonalConfig = field(default_factory=SeasonalConfig)
    events: tuple[KnownEvent, ...] = ()
    #: Absolute bin number (``floor(t / bin_s)``) of ``bins[0]``.
    first_bin: int | None = None
    #: Completed bins, oldest first; None where nothing was observed.
    bins: tuple[float | None, ...] = ()
    #: The bin being filled: (bin number, sum of de-evented values, count).
    current: tuple[int, float, int] | None = None

    # --- learning ---------------------------------------------------------------------------

    def observe(self, t: float, value: float | None) -> SeasonalForecast:
        """Add one observation (``None`` or a non-finite/negative value is ignored)."""
        if value is None or not math.isfinite(value) or value < 0:
            return self
        b = self._bin(t)
        value /= self._event_factor(t)
        cur = self.current
        if cur is None:
            return replace(
                self, first_bin=b if self.first_bin is None else self.first_bin, current=(b, value, 1)
            )
        if b == cur[0]:
            return replace(self, current=(b, cur[1] + value, cur[2] + 1))
        if b < cur[0]:
            return self  # out of order: a late sample of a bin already closed
        return self._close(cur, b, value)

    def observe_many(self, samples: Iterable[tuple[float, float | None]]) -> SeasonalForecast:
        """Fold a history in (the bootstrap from a metrics store: one copy per day, not per bin)."""
        state = self
        pending: list[tuple[float, float | None]] = []
        for t, value in samples:
            pending.append((t, value))
            if len(pending) >= self.config.day_bins:
                state = state._observe_batch(pending)
                pending = []
        return state._observe_batch(pending) if pending else state

    def with_events(self, events: Sequence[KnownEvent]) -> SeasonalForecast:
        return replace(self, events=tuple(events))

    # --- forecasting ------------------------------------------------------------------------

    def ready(self) -> bool:
        return len(self.bins) >= self.config.min_days * self.config.day_bins

    def ahead(self, now: float, horizon_s: float) -> float | None:
        """The value expected at ``now + horizon_s``; None before ``min_days`` of history."""
        if not self.ready():
            return None
        cfg = self.config
        now_bin, target = self._bin(now), now + horizon_s
        recent = self._recent(now_bin)
        if not recent:
            return None
        level = sum(w * v for _, v, w in recent) / sum(w for _, _, w in recent)
        growth = self.growth([(b, w) for b, _, w in recent], self._bin(target))
        if growth is None:
            return None
        trend = 1 + cfg.trend_damping * self._relative_slope(recent) * horizon_s
        trend = min(max(trend, 1 / cfg.max_level), cfg.max_level)
        return level * growth * trend * self._event_factor(target)

    def growth(self, recent: Sequence[tuple[int, float]], target_bin: int) -> float | None:
        """How the target bin compared with the recent bins (same weights) on past days: the median
        over the last ``profile_days`` days, blended with the same day last week."""
        cfg = self.config
        day = cfg.day_bins
        by_day: dict[int, float] = {}
        for d in range(1, max(cfg.profile_days, WEEK_DAYS) + 1):
            future = self._value(target_bin - d * day)
            past = [(self._value(b - d * day), w) for b, w in recent]
            values = [(v, w) for v, w in past if v is not None]
            if future is None or len(values) < len(past):
                continue  # that day has a gap: it says nothing about the change
            base = sum(v * w for v, w in values) / sum(w for _, w in values)
            if base > 0:
                by_day[d] = future / base
        daily = [by_day[d] for d in range(1, cfg.profile_days + 1) if d in by_day]
        if not daily:
            return None
        median = statistics.median(daily)
        last_week = by_day.get(WEEK_DAYS)
        if last_week is None or cfg.weekly_weight == 0:
            return median
        # last week's change is trusted within a factor of two of the median: a surge or an outage
        # in last week's bins must not double this week's forecast
        weekly = min(max(last_week, median / 2), median * 2)
        return (1 - cfg.weekly_weight) * median + cfg.weekly_weight * weekly

    def profile(self, b: int) -> float | None:
        """The typical value of bin ``b``: the median of the same time over the last days."""
        cfg = self.config
        day = cfg.day_bins
        daily = [v for d in range(1, cfg.profile_days + 1) if (v := self._value(b - d * day)) is not None]
        return statistics.median(daily) if daily else None

    def _recent(self, now_bin: int) -> list[tuple[int, float, float]]:
        """(bin, observed, weight) over the last ``level_bins`` bins and the one being filled."""
        cfg = self.config
        decay = math.pow(0.5, 1 / cfg.level_half_life_bins)
        out = []
        for b in range(now_bin - cfg.level_bins, now_bin + 1):
            observed = self._value(b) if b != now_bin else self._current_mean()
            if observed is not None:
                out.append((b, observed, math.pow(decay, now_bin - b)))
        return out

    def _relative_slope(self, recent: Sequence[tuple[int, float, float]]) -> float:
        """The trend the profile did not foresee: slope of observed / typical, relative, per second."""
        ratios = []
        for b, v, _ in recent:
            typical = self.profile(b)
            if typical is not None and typical > 0:
                ratios.append((b, v / typical))
        if len(ratios) < 3:
            return 0.0
        mean = sum(r for _, r in ratios) / len(ratios)
        return 0.0 if mean <= 0 else _slope(ratios) / mean / self.config.bin_s

    # --- plumbing ---------------------------------------------------------------------------

    def _bin(self, t: float) -> int:
        return math.floor(t / self.config.bin_s)

    def _event_factor(self, t: float) -> float:
        factor = 1.0
        for e in self.events:
            if e.start <= t < e.end:
                factor *= e.factor
        return factor

    def _value(self, b: int) -> float | None:
        if self.first_bin is None:
            return None
        i = b - self.first_bin
        return self.bins[i] if 0 <= i < len(self.bins) else None

    def _current_mean(self) -> float | None:
        cur = self.current
        return None if cur is None or cur[2] == 0 else cur[1] / cur[2]

    def _close(self, cur: tuple[int, float, int], b: int, value: float) -> SeasonalForecast:
        return self._extend([cur[1] / cur[2], *([None] * (b - cur[0] - 1))], (b, value, 1))

    def _extend(self, closed: list[float | None], current: tuple[int, float, int]) -> SeasonalForecast:
        assert self.first_bin is not None
        bins = (*self.bins, *closed)
        keep = self.config.days_kept * self.config.day_bins
        first = self.first_bin
        if len(bins) > keep:
            first += len(bins) - keep
            bins = bins[-keep:]
        return replace(self, first_bin=first, bins=bins, current=current)

    def _observe_batch(self, samples: list[tuple[float, float | None]]) -> SeasonalForecast:
        """``observe`` over many samples with one tuple copy at the end."""
        closed: list[float | None] = []
        state = self
        cur = self.current
        for t, raw in samples:
            if raw is None or not math.isfinite(raw) or raw < 0:
                continue
            b = self._bin(t)
            value = raw / self._event_factor(t)
            if cur is None:
                if state.first_bin is None:
                    state = replace(state, first_bin=b)
                cur = (b, value, 1)
            elif b == cur[0]:
                cur = (b, cur[1] + value, cur[2] + 1)
            elif b > cur[0]:
                closed.extend([cur[1] / cur[2], *([None] * (b - cur[0] - 1))])
                cur = (b, value, 1)
        if cur is None:
            return state
        return state._extend(closed, cur)


def _slope(points: Sequence[tuple[int, float]]) -> float:
    """Least-squares slope of ratio per bin (0 with fewer than three points)."""
    if len(points) < 3:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return 0.0 if sxx == 0 else sum((x - mx) * (y - my) for x, y in points) / sxx
