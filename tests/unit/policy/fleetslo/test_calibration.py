"""The measured margins: predictions checked when due, an upper quantile shrunk towards a prior."""

from __future__ import annotations

import math

import pytest
from fleetslo.policy.fleetslo.calibration import MAX_LATENCY_RATIO, Calibration, ErrorRatios


def test_a_prediction_is_checked_only_once_it_is_due() -> None:
    ratios = ErrorRatios().predicted(100.0, 50.0)
    assert ratios.observed(99.0, 60.0).ratios == ()
    assert ratios.observed(100.0, 60.0).ratios == (pytest.approx(1.2),)
    assert ratios.observed(100.0, 60.0).pending == ()


def test_a_missing_or_unusable_outcome_drops_the_prediction_instead_of_counting_it_right() -> None:
    ratios = ErrorRatios().predicted(10.0, 50.0)
    for value in (None, 0.0, math.nan, math.inf):
        checked = ratios.observed(20.0, value)
        assert checked.ratios == () and checked.pending == ()


def test_unusable_predictions_are_not_remembered() -> None:
    for value in (None, 0.0, -1.0, math.inf, math.nan):
        assert ErrorRatios().predicted(1.0, value).pending == ()


def test_only_the_most_recent_ratios_are_kept() -> None:
    ratios = ErrorRatios()
    for k in range(10):
        ratios = ratios.predicted(float(k), 1.0).observed(float(k), float(k + 1), keep=4)
    assert ratios.ratios == (7.0, 8.0, 9.0, 10.0)


def test_the_prior_stands_alone_without_ratios_and_fades_as_they_come() -> None:
    assert ErrorRatios().upper(0.9, 1.3, 20.0) == 1.3
    few = ErrorRatios(ratios=(1.0,) * 5)
    many = ErrorRatios(ratios=(1.0,) * 500)
    assert 1.0 < many.upper(0.9, 1.3, 20.0) < few.upper(0.9, 1.3, 20.0) < 1.3
    assert many.upper(0.9, 1.3, 20.0) == pytest.approx(1.0, abs=0.02)


def test_the_upper_quantile_follows_the_tail_of_the_errors() -> None:
    errors = ErrorRatios(ratios=tuple(1.0 + k / 100 for k in range(100)))  # 1.00 .. 1.99
    assert errors.upper(0.9, 1.0, 1e-9) == pytest.approx(1.9)
    assert errors.upper(0.5, 1.0, 1e-9) == pytest.approx(1.5)


def test_latency_margins_never_loosen_the_targets_and_are_bounded() -> None:
    optimistic = Calibration(tpot=ErrorRatios(ratios=(0.5,) * 200), ttft=ErrorRatios(ratios=(9.0,) * 200))
    load, ttft, tpot = optimistic.margins(0.9, 0.3, 20.0)
    assert tpot == 1.0
    assert ttft == MAX_LATENCY_RATIO
    assert load == 1.3


def test_a_model_check_records_both_p90_ratios_and_leaves_the_load_alone() -> None:
    checked = Calibration().model_checked(0.5, 0.040, 0.6, 0.050)
    assert checked.ttft.ratios == (pytest.approx(1.2),)
    assert checked.tpot.ratios == (pytest.approx(1.25),)
    assert checked.load == ErrorRatios()
