"""The burn-rate math: the Workbook's factors where they are reachable, a cap where they are not,
and for any objective every tier fires before a total outage is needed and faster than the
sustainable burn (the property the p90 trap breaks)."""

from __future__ import annotations

import pytest
from fleetslo.core import conventions as cv
from fleetslo.generate.alerts.windows import (
    DAY,
    HOUR,
    WORKBOOK_TIERS,
    Tier,
    budget_of,
    max_burn,
    nominal_factor,
    reach_cap,
    resolve,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(("period_days", "factors"), [(30, [14.4, 6, 3, 1]), (28, [13.44, 5.6, 2.8, 0.9333])])
def test_workbook_factors_are_budget_share_times_period_over_window(
    period_days: int, factors: list[float]
) -> None:
    got = [nominal_factor(t, period_days * DAY) for t in WORKBOOK_TIERS]
    assert got == pytest.approx(factors, abs=1e-4)


def test_a_999_objective_keeps_the_workbook_factors() -> None:
    burns = resolve(0.999, 30 * DAY)
    assert [b.factor for b in burns] == pytest.approx([14.4, 6, 3, 1])
    assert not any(b.capped for b in burns)
    assert [b.error_ratio_threshold for b in burns] == pytest.approx([0.0144, 0.006, 0.003, 0.001])


def test_p90_caps_the_unreachable_page_factors_at_5_5() -> None:
    """B = 0.1: burn can be at most 10, so 13.44x (1.344 > 1) can never fire; 5.6x barely can."""
    burns = resolve(0.9, 28 * DAY)
    assert [round(b.factor, 4) for b in burns] == [5.5, 5.5, 2.8, 0.9333]
    assert [b.capped for b in burns] == [True, True, False, False]
    assert burns[0].error_ratio_threshold == pytest.approx(0.55)
    # a total outage crosses the 1h page threshold after 33 minutes
    assert burns[0].detection_seconds == pytest.approx(0.55 * HOUR)


def test_p95_caps_only_the_fastest_tier() -> None:
    burns = resolve(0.95, 28 * DAY)
    assert [round(b.factor, 4) for b in burns] == [10.5, 5.6, 2.8, 0.9333]


@given(
    objective=st.floats(min_value=0.01, max_value=0.99999),
    period=st.floats(min_value=1 * DAY, max_value=366 * DAY),
)
def test_every_tier_is_reachable_and_faster_than_sustainable(objective: float, period: float) -> None:
    budget = budget_of(objective)
    for burn in resolve(objective, period):
        # reachable: a total outage (error ratio 1) exceeds the threshold
        assert burn.error_ratio_threshold < 1.0
        assert burn.factor * budget < 1.0
        # the cap never raises a factor, and a capped one still burns faster than sustainable
        assert burn.factor <= burn.nominal_factor
        if burn.capped:
            assert 1.0 < burn.factor == pytest.approx(reach_cap(budget))


@given(budget=st.floats(min_value=1e-5, max_value=0.99))
def test_the_cap_sits_halfway_between_sustainable_and_total_outage(budget: float) -> None:
    cap = reach_cap(budget)
    assert 1.0 < cap < max_burn(budget)
    assert cap == pytest.approx((1 + 1 / budget) / 2)


def test_tiers_longer_than_the_period_are_dropped() -> None:
    burns = resolve(0.9, 2 * DAY)
    assert [b.tier.long for b in burns] == [1 * HOUR, 6 * HOUR, 1 * DAY]


def test_budget_consumed_and_exhaustion_follow_the_workbook() -> None:
    page = resolve(0.999, 30 * DAY)[0]
    assert page.budget_consumed_at_fire == pytest.approx(0.02)
    assert page.exhaustion_seconds == pytest.approx(30 * DAY / 14.4)


def test_objective_outside_zero_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="objective"):
        budget_of(1.0)


def test_custom_tier_table_is_data() -> None:
    tiers = (Tier(cv.SEVERITY_PAGE, 0.5, 1 * DAY, 2 * HOUR, 0.0),)
    (burn,) = resolve(0.99, 28 * DAY, tiers)
    assert burn.nominal_factor == pytest.approx(14.0)
