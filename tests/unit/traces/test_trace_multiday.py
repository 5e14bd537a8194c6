"""The synthetic multi-day curve: day and week shape, holidays, surges, streamed Poisson arrivals."""

from __future__ import annotations

import itertools

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces import fixed_tokens
from fleetslo.sim.traces.multiday import DAY_S, MultiDayCurve, Surge, arrivals


def test_day_shape_has_mean_one_and_peaks_at_the_peak_hour() -> None:
    curve = MultiDayCurve(10.0, amplitude=0.6, peak_hour=14)
    samples = [curve.daily(t) for t in range(0, int(DAY_S), 60)]
    assert sum(samples) / len(samples) == pytest.approx(1.0, abs=1e-3)
    peak = max(range(0, int(DAY_S), 60), key=curve.daily)
    assert 12 * 3600 <= peak <= 15 * 3600
    assert min(samples) < 0.6
    assert max(samples) > 1.4


def test_weekends_holidays_and_surges_scale_the_rate() -> None:
    curve = MultiDayCurve(10.0, holidays=(2,), holiday_factor=0.5, surges=(Surge(DAY_S + 3600, 600, 3.0),))
    noon = 12 * 3600
    assert curve.rate(5 * DAY_S + noon) / curve.rate(noon) == pytest.approx(0.7)
    assert curve.rate(2 * DAY_S + noon) / curve.rate(noon) == pytest.approx(0.5)
    t = DAY_S + 3700
    assert curve.rate(t) / (curve.rate(t - DAY_S) * curve.weekly[1] / curve.weekly[0]) == pytest.approx(3.0)


def test_arrivals_follow_the_curve_and_are_deterministic() -> None:
    curve = MultiDayCurve(2.0)
    tokens = fixed_tokens(10, 2)
    reqs = list(arrivals(curve, 2 * DAY_S, tokens, seed=4))
    assert reqs == list(arrivals(curve, 2 * DAY_S, tokens, seed=4))
    times = [r.arrival_s for r in reqs]
    assert times == sorted(times)
    for hour in (3, 9, 14, 20, 30, 40):
        start = hour * 3600
        observed = sum(1 for t in times if start <= t < start + 3600) / 3600
        expected = sum(curve.rate(start + s) for s in range(0, 3600, 10)) / 360
        assert observed == pytest.approx(expected, rel=0.06)


def test_arrivals_are_streamed() -> None:
    stream = arrivals(MultiDayCurve(5.0), 14 * DAY_S, fixed_tokens(1, 1))
    assert len(list(itertools.islice(stream, 10))) == 10


@pytest.mark.parametrize(
    "kwargs", [{"base_rate": 0}, {"base_rate": 1, "amplitude": 1.2}, {"base_rate": 1, "weekly": (1.0,)}]
)
def test_bad_parameters(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        MultiDayCurve(**kwargs)
