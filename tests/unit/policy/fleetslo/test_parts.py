"""The fleetslo policy's parts alone: latency model, forecast, the cooldown stage."""

from __future__ import annotations

import math

import pytest
from fleetslo.core.model import Reason
from fleetslo.policy.fleetslo.forecast import RateForecast
from fleetslo.policy.fleetslo.latency_model import TpotModel
from fleetslo.policy.stages import cooldown


def trained(points: list[tuple[float, float]]) -> TpotModel:
    model = TpotModel()
    for i, (x, y) in enumerate(points):
        model = model.observe(float(i), x, y, keep=100, memory_s=1e9)
    return model


def engine(load: float, fixed_s: float = 0.02, per_token_s: float = 1e-4) -> float:
    """TPOT of an engine whose step costs ``fixed_s`` plus ``per_token_s`` per token processed."""
    return fixed_s / (1.0 - per_token_s * load)


def test_the_model_recovers_the_engine_physics_from_spread_data() -> None:
    model = trained([(x, engine(x)) for x in (1000.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0)])
    alpha, beta = model.fitted()  # type: ignore[misc]
    # 1/TPOT = 1/fixed − (per_token/fixed)·x
    assert alpha == pytest.approx(50.0) and beta == pytest.approx(0.005)
    assert model.load_at(0.05) == pytest.approx(6000.0)
    assert model.tpot_at(4000.0) == pytest.approx(engine(4000.0))
    # the hockey stick: past saturation TPOT is unbounded, not a point on a line
    assert model.tpot_at(10_000.0) == math.inf


def test_the_fit_extrapolates_the_curve_a_straight_line_through_light_load_misses() -> None:
    light = trained([(x, engine(x)) for x in (1000.0, 1500.0, 2000.0, 2500.0)])
    # A straight line through the same points would promise 10,400 tokens/s at 50 ms: 1.7x too many.
    assert light.load_at(0.05) == pytest.approx(6000.0)


def test_without_spread_the_model_falls_back_to_proportional_which_underestimates() -> None:
    model = trained([(3000.0, 0.035), (3050.0, 0.0352), (2980.0, 0.0349), (3010.0, 0.035)])
    assert model.fitted() is None
    # Proportional through the newest point: 3010/s gives 35 ms, so 45 ms at 3870/s.
    assert model.capacity(0.045, 2.0) == pytest.approx(3010.0 * 0.045 / 0.035)
    assert model.tpot_at(3870.0) == pytest.approx(0.035 * 3870.0 / 3010.0)


def test_a_fit_with_tpot_falling_as_load_grows_is_not_trusted() -> None:
    model = trained([(1000.0, 0.05), (2000.0, 0.04), (3000.0, 0.03), (4000.0, 0.02)])
    assert model.fitted() is None


def test_capacity_is_capped_at_a_multiple_of_the_load_proven_to_meet_the_targets() -> None:
    model = trained([(x, engine(x, per_token_s=1e-6)) for x in (1000.0, 1500.0, 2000.0, 2500.0)])
    assert model.capacity(0.045, 2.0) == pytest.approx(5000.0)
    breached = model.observe(10.0, 4000.0, 0.0204, keep=100, memory_s=1e9, met=False)
    assert breached.evidence() == 2500.0


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


def test_capacity_is_the_fit_capped_by_evidence_in_tokens_per_second() -> None:
    """Evidence, fit and fallback agree on units: tokens per second per replica, never requests."""
    model = trained([(x, engine(x)) for x in (1000.0, 2000.0, 3000.0, 4000.0)])
    assert model.evidence() == 4000.0
    assert model.capacity(0.05, 1.2) == pytest.approx(4800.0)  # the fit says 6000; 1.2x evidence caps
    # The margin is taken off the fitted load, before the cap: the cap bounds what is sized for.
    assert model.capacity(0.05, 1.2, share=0.5) == pytest.approx(3000.0)
    assert model.capacity(0.05, 1.2, share=0.9) == pytest.approx(4800.0)


def test_the_config_refuses_values_that_break_the_policy() -> None:
    from fleetslo.policy.fleetslo.config import FleetSLOConfig

    with pytest.raises(ValueError, match=r"headroom must be in \[0, 1\), got 1.2"):
        FleetSLOConfig(headroom=1.2)
    with pytest.raises(ValueError, match="breach_band must be >= 1"):
        FleetSLOConfig(breach_band=0.9)
    # headroom 0.4 and the default dead band size for 1.85x the proven load: the cap must allow it
    with pytest.raises(ValueError, match=r"max_extrapolation must exceed .* = 1.85"):
        FleetSLOConfig(headroom=0.4)
    assert FleetSLOConfig(headroom=0.4, max_extrapolation=2.0).headroom == 0.4
