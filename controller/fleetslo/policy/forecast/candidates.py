"""The few forecasts of one bin that the seasonal forecast combines, each simple enough to check by hand.

All read a ``BinnedHistory`` only at or before ``now_bin`` (and the same bins on past days), so
the same functions score past bins honestly ("what would have been forecast then") and forecast
the future. ``recent`` is the level's support: the last bins, most recent weighted most.

* ``persistence``: the level, nothing else (what a reactive controller assumes).
* ``reverting``: the level × exp(φ × its last change over the horizon): φ < 0 when bursts partly
  revert (a big client's spike ends), φ > 0 when changes carry on; fitted online by least squares
  on the forecaster's own history (an ARIMA(1,1,0) on the log level, one horizon per step). A change
  is carried on no further than the spread the fit has seen (three root-mean-square changes): a
  line fitted on changes of a few percent says nothing about a step x2.5. Its reversion is left as
  fitted: the sizing reads the forecast only where it is above the reactive one.
* ``daily``: the level × how the target time compared with the recent bins on each of the last
  ``profile_days`` days (the median of those ratios: a holiday or a surge on one day does not move
  a median of seven). A ratio of one day's bins cancels that day's level, so a quiet week still
  teaches the shape of the morning ramp.
* ``weekly``: the level × the same ratio on the same weekday last week, trusted within a factor
  of two of the daily median (a surge or an outage last week must not double this week's
  forecast): what knows a Saturday morning is not a Monday morning.
* ``trend``: ``daily`` × (1 + damped relative slope × horizon), the slope of observed / typical
  over the recent bins: a ramp the past days did not show (a surge building), extrapolated a
  little and bounded.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from fleetslo.policy.forecast.history import BinnedHistory

WEEK_DAYS = 7
Recent = Sequence[tuple[int, float, float]]  # (bin, observed, weight)
NAMES = ("persistence", "reverting", "daily", "weekly", "trend")


@dataclass(frozen=True, slots=True)
class Shape:
    """What the candidates need of the forecaster's configuration."""

    day_bins: int
    profile_days: int
    level_bins: int
    level_half_life_bins: float
    trend_damping: float
    max_level: float


def recent(
    history: BinnedHistory, shape: Shape, now_bin: int, current: float | None = None
) -> list[tuple[int, float, float]]:
    """(bin, observed, weight) over the ``level_bins`` bins before ``now_bin`` and ``now_bin`` itself
    (``current`` is its value when it is still being filled; otherwise the completed bin's)."""
    decay = math.pow(0.5, 1 / shape.level_half_life_bins)
    out = []
    for b in range(now_bin - shape.level_bins, now_bin + 1):
        observed = current if b == now_bin and current is not None else history.value(b)
        if observed is not None:
            out.append((b, observed, math.pow(decay, now_bin - b)))
    return out


def level(points: Recent) -> float:
    return sum(w * v for _, v, w in points) / sum(w for _, _, w in points)


def day_ratios(history: BinnedHistory, shape: Shape, points: Recent, target_bin: int) -> dict[int, float]:
    """For each past day d (1..max(profile_days, 7)): value at the target time / the recent bins'
    weighted mean, that day. A day with a gap in those bins says nothing and is left out."""
    out: dict[int, float] = {}
    for d in range(1, max(shape.profile_days, WEEK_DAYS) + 1):
        shift = d * shape.day_bins
        future = history.value(target_bin - shift)
        past = [(history.value(b - shift), w) for b, _, w in points]
        values = [(v, w) for v, w in past if v is not None]
        if future is None or len(values) < len(past):
            continue
        base = sum(v * w for v, w in values) / sum(w for _, w in values)
        if base > 0:
            out[d] = future / base
    return out


def profile(history: BinnedHistory, shape: Shape, b: int) -> float | None:
    """The typical value of bin ``b``: the median of the same time over the last days."""
    daily = [
        v
        for d in range(1, shape.profile_days + 1)
        if (v := history.value(b - d * shape.day_bins)) is not None
    ]
    return statistics.median(daily) if daily else None


def relative_slope(history: BinnedHistory, shape: Shape, points: Recent, bin_s: float) -> float:
    """The trend the profile did not foresee: slope of observed / typical, relative, per second."""
    ratios = []
    for b, v, _ in points:
        typical = profile(history, shape, b)
        if typical is not None and typical > 0:
            ratios.append((b, v / typical))
    if len(ratios) < 3:
        return 0.0
    mean = sum(r for _, r in ratios) / len(ratios)
    return 0.0 if mean <= 0 else _slope(ratios) / mean / bin_s


def change(history: BinnedHistory, shape: Shape, now_bin: int, lag: int, now_level: float) -> float | None:
    """log(level now / level ``lag`` bins earlier); None where either is unknown or not positive."""
    before = recent(history, shape, now_bin - lag)
    if not before or now_level <= 0:
        return None
    then = level(before)
    return math.log(now_level / then) if then > 0 else None


def forecasts(
    history: BinnedHistory, shape: Shape, now_bin: int, target_bin: int, *, horizon_s: float,
    bin_s: float, current: float | None = None, reversion: tuple[float, int, float] | None = None,
) -> dict[str, float]:  # fmt: skip
    """Every candidate that has what it needs, by name (see the module docstring); ``reversion`` is
    (φ, the lag in bins its change is measured over, the largest change it extrapolates)."""
    points = recent(history, shape, now_bin, current)
    if not points:
        return {}
    base = level(points)
    out = {"persistence": base}
    if reversion is not None and (moved := change(history, shape, now_bin, reversion[1], base)) is not None:
        phi, _, reach = reversion
        # carried on (φ·moved > 0): no further than the fit's reach; reverted: as fitted
        step = moved if phi * moved <= 0 else max(-reach, min(moved, reach))
        out["reverting"] = base * math.exp(phi * step)
    ratios = day_ratios(history, shape, points, target_bin)
    daily = [ratios[d] for d in range(1, shape.profile_days + 1) if d in ratios]
    if not daily:
        return out
    median = statistics.median(daily)
    out["daily"] = base * median
    if (last_week := ratios.get(WEEK_DAYS)) is not None:
        out["weekly"] = base * min(max(last_week, median / 2), median * 2)
    trend = 1 + shape.trend_damping * relative_slope(history, shape, points, bin_s) * horizon_s
    out["trend"] = base * median * min(max(trend, 1 / shape.max_level), shape.max_level)
    return out


def _slope(points: Sequence[tuple[int, float]]) -> float:
    """Least-squares slope of ratio per bin (0 with fewer than three points)."""
    if len(points) < 3:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return 0.0 if sxx == 0 else sum((x - mx) * (y - my) for x, y in points) / sxx
