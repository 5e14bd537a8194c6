"""The seasonal forecaster on synthetic traffic whose true rate is known at every instant."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from fleetslo.policy.forecast import KnownEvent, SeasonalConfig, SeasonalForecast, mape_by_day
from fleetslo.sim.traces.multiday import DAY_S, MultiDayCurve, Surge

STEP = 60.0  # one observation a minute, as a controller's one-minute windowed rate
HORIZON = 300.0  # one cold start ahead


def learned(curve: MultiDayCurve, days: float, *, noise: float = 0.0, seed: int = 0) -> SeasonalForecast:
    rng = random.Random(seed)
    samples = [
        (t, curve.rate(t) * (1 + rng.gauss(0, noise)))
        for t in (k * STEP for k in range(int(days * DAY_S / STEP)))
    ]
    return SeasonalForecast().observe_many(samples)


def errors_over(
    forecast: SeasonalForecast, curve: MultiDayCurve, start: float, end: float, *, noise: float = 0.0
) -> tuple[list[float], list[float], SeasonalForecast]:
    """Walk on from ``start``: each minute forecast t + 5 min, then observe t. (seasonal, persistence)."""
    rng = random.Random(1)
    seasonal, persistence = [], []
    t = start
    while t < end:
        observed = curve.rate(t) * (1 + rng.gauss(0, noise))
        forecast = forecast.observe(t, observed)
        truth = curve.rate(t + HORIZON)
        predicted = forecast.ahead(t, HORIZON)
        assert predicted is not None
        seasonal.append(abs(predicted - truth) / truth)
        persistence.append(abs(observed - truth) / truth)
        t += STEP
    return seasonal, persistence, forecast


def test_no_forecast_before_a_day_of_history() -> None:
    curve = MultiDayCurve(10.0)
    assert learned(curve, 0.5).ahead(0.5 * DAY_S, HORIZON) is None
    assert learned(curve, 0.99).ahead(0.99 * DAY_S, HORIZON) is None
    assert learned(curve, 1.01).ahead(1.01 * DAY_S, HORIZON) is not None


def test_a_learned_week_forecasts_the_morning_ramp_far_better_than_persistence() -> None:
    curve = MultiDayCurve(10.0, amplitude=0.7)
    forecast = learned(curve, 7)
    # Monday of week two, 06:00-12:00: the steepest rise of the day
    seasonal, persistence, _ = errors_over(forecast, curve, 7 * DAY_S + 6 * 3600, 7 * DAY_S + 12 * 3600)
    assert statistics.fmean(seasonal) < 0.01
    assert statistics.fmean(persistence) > 3 * statistics.fmean(seasonal)


def test_noisy_observations_still_forecast_within_a_few_percent() -> None:
    curve = MultiDayCurve(10.0, amplitude=0.7)
    forecast = learned(curve, 7, noise=0.05)
    seasonal, _, _ = errors_over(forecast, curve, 7 * DAY_S, 8 * DAY_S, noise=0.05)
    assert statistics.fmean(seasonal) < 0.04


def test_a_holiday_is_followed_by_the_level_within_half_an_hour() -> None:
    curve = MultiDayCurve(10.0, holidays=(8,), holiday_factor=0.6)
    forecast = learned(curve, 8)
    seasonal, _, _ = errors_over(forecast, curve, 8 * DAY_S, 8 * DAY_S + 12 * 3600)
    assert seasonal[0] > 0.1  # the first minutes of the holiday: nobody said
    assert max(seasonal[30:]) < 0.03


def test_an_unforeseen_surge_is_caught_by_the_level_and_trend() -> None:
    start = 7 * DAY_S + 15 * 3600
    curve = MultiDayCurve(10.0, surges=(Surge(start, 3600.0, 2.0),))
    forecast = learned(curve, 7)
    seasonal, _, _ = errors_over(forecast, curve, start - 3600, start + 3000)
    inside = seasonal[60 + 15 :]
    assert max(inside) < 0.05


def test_a_known_event_is_forecast_before_it_starts_and_kept_out_of_the_level() -> None:
    launch = 7 * DAY_S + 18 * 3600
    curve = MultiDayCurve(10.0, surges=(Surge(launch, 3600.0, 2.0),))
    event = KnownEvent(launch, launch + 3600, 2.0)
    blind = learned(curve, 7).observe_many((t, curve.rate(t)) for t in _minutes(7 * DAY_S, launch - HORIZON))
    told = blind.with_events([event])
    t = launch - HORIZON
    truth = curve.rate(launch)
    assert told.ahead(t, HORIZON) == pytest.approx(truth, rel=0.03)
    assert blind.ahead(t, HORIZON) == pytest.approx(truth / 2, rel=0.03)
    # inside the event, observations are de-evented: no double counting
    inside = told.observe_many((t, curve.rate(t)) for t in _minutes(launch - HORIZON, launch + 1800))
    assert inside.ahead(launch + 1800, HORIZON) == pytest.approx(
        curve.rate(launch + 1800 + HORIZON), rel=0.03
    )


def test_weekly_profile_knows_the_weekend_shape() -> None:
    # weekend days peak three hours later: only the weekly part of the profile can know that
    def weekend_late(t: float) -> float:
        day = int(t // DAY_S) % 7
        shift = 3 * 3600 if day >= 5 else 0
        return 10.0 * (1 + 0.6 * math.cos(2 * math.pi * (t - shift - 14 * 3600) / DAY_S))

    history = [(t, weekend_late(t)) for t in _minutes(0, 12 * DAY_S)]
    weekly = SeasonalForecast().observe_many(history)
    without_last_week = SeasonalConfig(candidates=("persistence", "daily", "trend"))
    daily = SeasonalForecast(without_last_week).observe_many(history)

    def error(f: SeasonalForecast) -> float:
        errs = []
        for t in _minutes(12 * DAY_S + 8 * 3600, 12 * DAY_S + 20 * 3600):  # a Saturday
            f = f.observe(t, weekend_late(t))
            predicted = f.ahead(t, HORIZON)
            assert predicted is not None
            errs.append(abs(predicted / weekend_late(t + HORIZON) - 1))
        return statistics.fmean(errs)

    assert error(weekly) < error(daily)


def test_missing_bins_stay_missing_and_the_forecast_goes_on() -> None:
    curve = MultiDayCurve(10.0)
    samples = [(t, curve.rate(t)) for t in _minutes(0, 3 * DAY_S) if not DAY_S <= t < DAY_S + 7200]
    forecast = SeasonalForecast().observe_many(samples)
    bins_per_day = forecast.config.day_bins
    assert forecast.bins[bins_per_day : bins_per_day + 24] == (None,) * 24
    predicted = forecast.ahead(3 * DAY_S - STEP, HORIZON)
    assert predicted == pytest.approx(curve.rate(3 * DAY_S - STEP + HORIZON), rel=0.03)


def test_the_bootstrap_equals_observing_one_by_one() -> None:
    curve = MultiDayCurve(3.0)
    samples = [(t, curve.rate(t)) for t in _minutes(0, 1.2 * DAY_S)]
    one_by_one = SeasonalForecast()
    for t, v in samples:
        one_by_one = one_by_one.observe(t, v)
    assert SeasonalForecast().observe_many(samples) == one_by_one


def test_history_is_bounded() -> None:
    config = SeasonalConfig(days_kept=2)
    forecast = SeasonalForecast(config).observe_many((t, 1.0) for t in _minutes(0, 5 * DAY_S))
    assert len(forecast.bins) == 2 * config.day_bins


def test_bad_values_are_ignored_and_bad_config_refused() -> None:
    f = SeasonalForecast().observe(0.0, 1.0)
    assert f.observe(10.0, None) == f
    assert f.observe(10.0, -1.0) == f
    assert f.observe(10.0, math.nan) == f
    with pytest.raises(ValueError, match="bin_s"):
        SeasonalConfig(bin_s=7.0)


def test_mape_by_day() -> None:
    pairs = [(10.0, 11.0, 10.0), (20.0, 9.0, 10.0), (DAY_S + 1, 5.0, 0.0), (DAY_S + 2, 2.0, 4.0)]
    days = mape_by_day(pairs)
    assert [(d.day, d.mape_pct, d.scored, d.unscored) for d in days] == [
        (0, pytest.approx(10.0), 2, 0),
        (1, 50.0, 1, 1),
    ]


def _minutes(start: float, end: float) -> list[float]:
    return [start + k * STEP for k in range(int((end - start) / STEP))]


def test_the_request_mix_is_forecast_the_same_way() -> None:
    # prompts are longer in the working day (documents) than at night (chat): tokens per request
    def mix(t: float) -> float:
        return 800.0 * (1 + 0.4 * math.cos(2 * math.pi * (t - 11 * 3600) / DAY_S))

    forecast = SeasonalForecast().observe_many((t, mix(t)) for t in _minutes(0, 3 * DAY_S))
    t = 3 * DAY_S + 7 * 3600
    forecast = forecast.observe_many((s, mix(s)) for s in _minutes(3 * DAY_S, t))
    assert forecast.ahead(t, HORIZON) == pytest.approx(mix(t + HORIZON), rel=0.01)


def _surge(t: float) -> float:
    """100 a second, x3 from 09:00 to 12:00 every day (reached within two minutes)."""
    hour = t % DAY_S / 3600
    up, down = min(1.0, max(0.0, (hour - 9) * 30)), min(1.0, max(0.0, (hour - 12) * 30))
    return 100.0 * (1 + 2 * (up - down))


def test_on_the_second_day_the_quantile_covers_the_surge_yesterday_showed_and_the_mean_does_not() -> None:
    """Reproduction (stop 35): a daily 09:00 surge x3; on the second day persistence still holds
    most of the weight (the candidates agreed all night), so their mean foresaw x1.45 at 08:57 and
    the fleet lost the surge's first windows again. Read as plausibilities, the weights give the
    surge more than a tenth: the 0.9-quantile foresees it."""
    rng = random.Random(1)
    before = DAY_S + 8 * 3600 + 57 * 60  # the second day, 08:57
    samples = [(k * STEP, _surge(k * STEP) * (1 + rng.gauss(0, 0.1))) for k in range(int(before / STEP) + 1)]
    forecast = SeasonalForecast().observe_many(samples)
    weights = forecast.weights()
    assert weights["persistence"] > 0.5 and weights["daily"] + weights["trend"] > 0.1  # the premise
    mean, covered = forecast.ahead(before, HORIZON), forecast.ahead(before, HORIZON, q=0.9)
    assert mean is not None and covered is not None
    assert mean < 0.45 * 300 and covered > 0.7 * 300  # a noisy single day's profile: not all of x3
    # where the candidates agree (the quiet night before) the quantile is the mean, near enough
    night = DAY_S + 3 * 3600
    early = SeasonalForecast().observe_many([s for s in samples if s[0] <= night])
    agreed = early.ahead(night, HORIZON)
    assert agreed is not None and early.ahead(night, HORIZON, q=0.9) == pytest.approx(agreed, rel=0.05)


@pytest.mark.parametrize("noise", [0.0, 0.005])
def test_a_step_on_smooth_traffic_is_not_extrapolated_a_second_time(noise: float) -> None:
    """On a history with little noise a minute (a large fleet's aggregate) a step swings the
    candidates' weights whole to ``reverting``, whose φ is 1.0 on a smooth curve (its changes carry
    on). It once extrapolated the step again: x2.3 the new level five minutes after a x2.5 step."""
    curve = MultiDayCurve(1000.0, amplitude=0.3)
    start = 1.5 * DAY_S
    forecast = learned(curve, 1.5, noise=noise)
    rng = random.Random(2)
    for k in range(11):  # x2.5 from the sixth minute on
        t = start + k * STEP
        forecast = forecast.observe(t, curve.rate(t) * (2.5 if k >= 5 else 1.0) * (1 + rng.gauss(0, noise)))
    level = curve.rate(start + 10 * STEP) * 2.5
    ahead = forecast.ahead(start + 10 * STEP, HORIZON, 0.9)
    assert ahead is not None and ahead <= 1.3 * level
