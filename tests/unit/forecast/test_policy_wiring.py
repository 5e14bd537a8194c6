"""The fleetslo policy's RateForecast: foresight over the reactive trend, off when seasonal is None."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from fleetslo.policy.fleetslo.forecast import RateForecast

DAY = 86_400.0


def ramp(t: float) -> float:
    """A morning ramp: 5 req/s at night, 50 at 10:00, steepest around 07:00."""
    return 5.0 + 45.0 / (1 + math.exp(-(((t % DAY) / 3600.0) - 7.0) * 1.5))


def test_the_seasonal_forecast_sees_the_ramp_a_cold_start_ahead() -> None:
    history = [(t, ramp(t)) for t in (k * 60.0 for k in range(int(7 * DAY / 60)))]
    now = 7 * DAY + 6.5 * 3600
    forecast = RateForecast().bootstrapped(history)
    for t in (now - 120, now - 60, now):
        forecast = forecast.update(t, ramp(t), keep_s=600)
    current = ramp(now)
    point = replace(forecast, banded=False)
    foreseen = point.ahead(300.0, current, now - 300, damping=0.5, max_growth=1.5)
    assert foreseen == pytest.approx(ramp(now + 300), rel=0.02)
    assert foreseen > current * 1.05
    # the band's top: above the point by what the forecast got wrong at this time of day before
    # (a few percent on this noiseless ramp), never below it
    top = forecast.ahead(300.0, current, now - 300, damping=0.5, max_growth=1.5)
    assert foreseen <= top <= ramp(now + 300) * 1.06
    blind = RateForecast(forecast.samples, None)  # foresight off: the trend alone, as before
    assert blind.ahead(300.0, current, now - 300, damping=0.5, max_growth=1.5) < foreseen


def test_without_history_the_reactive_trend_decides() -> None:
    forecast = RateForecast()
    for t in (0.0, 60.0, 120.0):
        forecast = forecast.update(t, 10.0, keep_s=600)
    assert forecast.seasonal_ahead(300.0) is None
    assert forecast.ahead(300.0, 10.0, -1.0, damping=0.5, max_growth=1.5) == pytest.approx(10.0)


def test_a_known_event_lifts_the_forecast_before_the_seasonal_part_has_a_day_of_history() -> None:
    """Reproduces a gap: the spec's events reached only the seasonal forecast, which says nothing
    before a day of history, so a new target's known launch had no effect."""
    from fleetslo.policy.forecast import KnownEvent

    launch = 3_600.0
    base = RateForecast()
    seasonal = base.seasonal
    assert seasonal is not None
    told = replace(base, seasonal=seasonal.with_events([KnownEvent(launch, launch + 7_200.0, 2.5)]))
    for t in (launch - 420.0, launch - 360.0, launch - 300.0):
        told = told.update(t, 10.0, keep_s=600)
        base = base.update(t, 10.0, keep_s=600)
    assert told.seasonal_ahead(300.0) is None  # no history: the seasonal forecast itself is silent
    assert told.ahead(300.0, 10.0, -1.0, damping=0.5, max_growth=1.5) == pytest.approx(25.0)
    assert base.ahead(300.0, 10.0, -1.0, damping=0.5, max_growth=1.5) == pytest.approx(10.0)
    # Inside the event the observed rate already carries it: no second lift; nor a drop at its end.
    inside = told.update(launch + 600.0, 25.0, keep_s=600)
    assert inside.ahead(300.0, 25.0, launch, damping=0.5, max_growth=1.5) == pytest.approx(25.0)
    ending = told.update(launch + 7_000.0, 25.0, keep_s=600)
    assert ending.event_lift(600.0) == 1.0


def test_the_policy_reads_the_candidates_upper_quantile_and_cover_none_reads_their_mean() -> None:
    import random

    rng = random.Random(1)

    def surge(t: float) -> float:  # x3 from 09:00 to 12:00, daily
        hour = t % DAY / 3600
        return 100.0 * (1 + 2 * (min(1.0, max(0.0, (hour - 9) * 30)) - min(1.0, max(0.0, (hour - 12) * 30))))

    now = DAY + 8 * 3600 + 57 * 60
    history = [(k * 60.0, surge(k * 60.0) * (1 + rng.gauss(0, 0.1))) for k in range(int(now / 60) + 1)]
    forecast = RateForecast().bootstrapped(history[:-3])
    for t, rate in history[-3:]:
        forecast = forecast.update(t, rate, keep_s=600)
    seasonal = forecast.seasonal
    assert seasonal is not None and forecast.cover == 0.9
    assert forecast.seasonal_ahead(300.0) == seasonal.ahead(now, 300.0, 0.9)
    mean = replace(forecast, cover=None).seasonal_ahead(300.0)
    assert mean == seasonal.ahead(now, 300.0)
    covered = forecast.seasonal_ahead(300.0)
    assert mean is not None and covered is not None and covered > 1.5 * mean
