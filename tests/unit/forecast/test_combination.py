"""The combination, the reversion fit and the calibrated band, on series whose right answer is known.

One observation per 5-minute bin (the forecaster's own resolution) keeps these fast; the forecast
is asked one cold start (300 s) ahead, as the policy asks it.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable

from fleetslo.policy.forecast import SeasonalConfig, SeasonalForecast
from fleetslo.policy.forecast.history import BinnedHistory
from fleetslo.sim.traces.multiday import DAY_S, MultiDayCurve

BIN = 300.0
HORIZON = 300.0


def walk(
    series: Callable[[int], float], days: float, score_from_day: float, config: SeasonalConfig | None = None
) -> tuple[SeasonalForecast, list[float], list[float], list[bool]]:
    """Observe bin k's value at its middle; from ``score_from_day`` on, forecast the bin one horizon
    later: (forecaster, |log error| of the forecast, of persistence, whether the band's top held)."""
    forecast = SeasonalForecast(config or SeasonalConfig())
    ours, persistence, held = [], [], []
    bins = int(days * DAY_S / BIN)
    for k in range(bins - 1):
        t = k * BIN + BIN / 2
        value = series(k)
        forecast = forecast.observe(t, value)
        if t < score_from_day * DAY_S:
            continue
        actual = series(k + 1)
        predicted, top = forecast.ahead(t, HORIZON), forecast.upper(t, HORIZON)
        assert predicted is not None
        ours.append(abs(math.log(actual / predicted)))
        persistence.append(abs(math.log(actual / value)))
        if top is not None:  # a band needs a few days of residuals at that time of day
            held.append(actual <= top)
    return forecast, ours, persistence, held


def test_the_band_is_exceeded_as_often_as_its_quantile_says() -> None:
    # a day shape with independent 10 % noise on each bin: no forecast can know the noise, so the
    # band's top must be exceeded about 1 - 0.9 of the time
    rng = random.Random(4)
    curve = MultiDayCurve(10.0, amplitude=0.6)
    noise = [math.exp(rng.gauss(0, 0.1)) for _ in range(int(12 * DAY_S / BIN))]
    forecast, _, _, held = walk(lambda k: curve.rate(k * BIN + BIN / 2) * noise[k], 12, 8)
    assert len(held) == len(range(int(8 * DAY_S / BIN), int(12 * DAY_S / BIN) - 1))
    exceeded = 1 - statistics.fmean(held)
    assert 0.06 < exceeded < 0.14
    # and it is about as wide as the noise makes the error: 1.28 σ of a difference of two noises
    band = forecast.band(forecast.history.bin_of(12 * DAY_S - BIN) if forecast.history else 0)
    assert band is not None
    assert 0.1 < band < 0.3


def test_the_band_keeps_its_coverage_when_the_traffic_turns_burstier() -> None:
    # the noise doubles from day 8: the residuals of the week before say the band is narrow; the
    # online calibration widens it within hours (without it, the top is exceeded far more often)
    rng = random.Random(5)
    curve = MultiDayCurve(10.0, amplitude=0.6)
    bins_per_day = int(DAY_S / BIN)
    noise = [math.exp(rng.gauss(0, 0.06 if k < 8 * bins_per_day else 0.12)) for k in range(11 * bins_per_day)]

    def series(k: int) -> float:
        return curve.rate(k * BIN + BIN / 2) * noise[k]

    _, _, _, held = walk(series, 11, 9)
    _, _, _, uncalibrated = walk(series, 11, 9, SeasonalConfig(band_step=0.0))
    assert 0.06 < 1 - statistics.fmean(held) < 0.15
    assert 1 - statistics.fmean(uncalibrated) > 0.2


def test_bursts_that_revert_are_learned_and_beat_persistence() -> None:
    # a flat rate with independent noise: each bin's jump reverts at the next, so the last change
    # predicts half of it back (φ = -1/2 over a two-bin lag), and persistence is the worst guess
    rng = random.Random(7)
    noise = [math.exp(rng.gauss(0, 0.15)) for _ in range(int(4 * DAY_S / BIN))]
    forecast, ours, persistence, _ = walk(lambda k: 20.0 * noise[k], 4, 2)
    fitted = forecast._reversion()
    assert fitted is not None
    assert -0.65 < fitted[0] < -0.3
    assert statistics.fmean(ours) < 0.9 * statistics.fmean(persistence)


def test_on_a_random_walk_the_combination_is_no_worse_than_persistence() -> None:
    # nothing about a random walk's next step is known: the day profile is noise there, and the
    # combination must weigh itself back to persistence rather than be worse than it
    rng = random.Random(11)
    level = [0.0]
    for _ in range(int(10 * DAY_S / BIN)):
        level.append(level[-1] + rng.gauss(0, 0.04))
    _, ours, persistence, _ = walk(lambda k: 50.0 * math.exp(level[k]), 10, 8)
    assert statistics.fmean(ours) < 1.03 * statistics.fmean(persistence)


def test_on_a_shaped_day_the_profile_takes_over() -> None:
    curve = MultiDayCurve(10.0, amplitude=0.7)
    forecast, ours, persistence, _ = walk(lambda k: curve.rate(k * BIN + BIN / 2), 9, 8)
    weights = forecast.weights()
    assert weights["persistence"] < 0.05
    assert weights["daily"] + weights["weekly"] + weights["trend"] > 0.9
    assert statistics.fmean(ours) < 0.2 * statistics.fmean(persistence)


def test_the_binned_history_closes_bins_and_keeps_gaps_missing() -> None:
    history = BinnedHistory(60.0, keep=3)
    history, closed = history.add([(0.0, 1.0), (30.0, 3.0)])
    assert closed == [] and history.current == (0, 4.0, 2)
    history, closed = history.add([(200.0, 5.0)])  # bins 0 closes, 1 and 2 had nothing
    assert closed == [0, 1, 2]
    assert [history.value(b) for b in range(3)] == [2.0, None, None]
    history, closed = history.add([(210.0, 1.0), (100.0, 9.0)])  # a late sample of bin 1: dropped
    assert closed == [] and history.current == (3, 6.0, 2)
    history, closed = history.add([(400.0, 1.0)])
    assert closed == [3, 4, 5]
    assert history.first_bin == 3 and history.value(3) == 3.0  # only three kept
