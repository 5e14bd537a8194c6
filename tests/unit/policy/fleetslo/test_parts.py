"""The fleetslo policy's parts alone: latency model, forecast, the cooldown stage."""

from __future__ import annotations

import pytest

from controller.model import Reason
from controller.policy.fleetslo.forecast import RateForecast
from controller.policy.fleetslo.latency_model import TpotModel
from controller.policy.stages import cooldown


def trained(points: list[tuple[float, float]]) -> TpotModel:
    model = TpotModel()
    for i, (x, y) in enumerate(points):
        model = model.observe(float(i), x, y, keep=100, memory_s=1e9)
    return model


def test_the_model_recovers_intercept_and_slope_from_spread_data() -> None:
    model = trained([(x, 0.02 + 0.005 * x) for x in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)])
    a, b = model.fitted()  # type: ignore[misc]
    assert a == pytest.approx(0.02) and b == pytest.approx(0.005)
    assert model.concurrency_at(0.045) == pytest.approx(5.0)
    assert model.tpot_at(4.0) == pytest.approx(0.04)


def test_without_spread_the_model_falls_back_to_proportional_which_underestimates() -> None:
    model = trained([(3.0, 0.035), (3.05, 0.0352), (2.98, 0.0349), (3.01, 0.035)])
    assert model.fitted() is None
    # Proportional through the newest point: 3.01/s gives 35 ms, so 45 ms at 3.87/s.
    assert model.capacity(0.045, 2.0) == pytest.approx(3.01 * 0.045 / 0.035)


def test_a_fit_with_a_negative_slope_is_not_trusted() -> None:
    model = trained([(1.0, 0.05), (2.0, 0.04), (3.0, 0.03), (4.0, 0.02)])
    assert model.fitted() is None


def test_capacity_is_capped_at_a_multiple_of_the_load_proven_to_meet_the_targets() -> None:
    model = trained([(x, 0.02 + 0.0001 * x) for x in (1.0, 1.5, 2.0, 2.5)])
    assert model.capacity(0.045, 2.0) == pytest.approx(5.0)
    breached = model.observe(10.0, 4.0, 0.0204, keep=100, memory_s=1e9, met=False)
    assert breached.evidence() == 2.5


def test_points_age_out_and_the_count_is_bounded() -> None:
    model = TpotModel()
    for t in range(10):
        model = model.observe(float(t), 1.0 + t, 0.03, keep=4, memory_s=100.0)
    assert len(model.points) == 4
    model = model.observe(1000.0, 2.0, 0.03, keep=4, memory_s=100.0)
    assert len(model.points) == 1
    assert model.observe(1001.0, 0.0, 0.03, keep=4, memory_s=100.0) is model


def test_forecast_extrapolates_a_rising_trend_damped_and_capped() -> None:
    f = RateForecast()
    for t in range(0, 301, 15):
        f = f.update(float(t), 10.0 + 0.01 * t, keep_s=300.0)
    assert f.slope(0.0) == pytest.approx(0.01)
    assert f.peak(200.0) == pytest.approx(13.0)
    assert f.ahead(300.0, 13.0, 0.0, damping=0.5, max_growth=2.0) == pytest.approx(13.0 + 0.01 * 300 * 0.5)
    assert f.ahead(3000.0, 13.0, 0.0, damping=1.0, max_growth=1.5) == pytest.approx(19.5)


def test_forecast_never_goes_below_the_current_rate_on_a_falling_trend() -> None:
    f = RateForecast()
    for t in range(0, 301, 15):
        f = f.update(float(t), 20.0 - 0.02 * t, keep_s=300.0)
    assert f.ahead(300.0, 14.0, 0.0, damping=1.0, max_growth=2.0) == 14.0


def test_cooldown_holds_only_scale_downs_and_only_for_its_duration() -> None:
    assert cooldown(5, 8, last_change_at=100.0, cooldown_s=60.0, now=130.0)[:2] == (8, Reason.COOLDOWN)
    assert cooldown(5, 8, last_change_at=100.0, cooldown_s=60.0, now=161.0)[:2] == (5, Reason.STEADY)
    assert cooldown(12, 8, last_change_at=100.0, cooldown_s=60.0, now=101.0)[:2] == (12, Reason.STEADY)
    assert cooldown(5, 8, last_change_at=None, cooldown_s=60.0, now=0.0)[:2] == (5, Reason.STEADY)
