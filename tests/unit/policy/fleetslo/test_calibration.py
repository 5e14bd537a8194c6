"""The measured margins: predictions checked when due, an upper quantile shrunk towards a prior."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.fleetslo.calibration import MAX_LATENCY_RATIO, Calibration, ErrorRatios, LoadChecks
from fleetslo.policy.fleetslo.policy import FleetSLOPolicy

from tests.unit.policy.fleetslo.test_decide import SPEC, obs, tpot_for, trained_state


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
    assert checked.load == LoadChecks()


def _measured() -> Calibration:
    calibration = Calibration(load=LoadChecks(resumed=(1.1, 1.25, 0.9)))
    for ratio in (1.1, 1.25, 0.9):
        calibration = calibration.model_checked(0.1, 0.02, 0.1 * ratio, 0.02 * ratio)
    return calibration


def test_the_measured_margins_survive_a_restart_through_learned_and_resume() -> None:
    """A new leader sizes with the margins the old one measured, not the prior headroom."""
    spec = FleetSLOSpec.model_validate(
        {
            "target": {"name": "a", "model_name": "m"},
            "objectives": {"ttft": {"threshold": "2s"}, "tpot": {"threshold": "50ms"}},
            "replicas": {"min": 1, "max": 10, "cold_start": "5m"},
        }
    )
    policy = FleetSLOPolicy()
    old = replace(policy.initial_state(spec), calibration=_measured())
    record = json.loads(json.dumps(old.learned()))
    resumed = policy.initial_state(spec).resume(record)
    assert resumed.calibration.margins(0.9, 0.3, 20) == pytest.approx(old.calibration.margins(0.9, 0.3, 20))
    assert resumed.calibration.tpot.ratios == pytest.approx(old.calibration.tpot.ratios, rel=1e-3)
    # A record written before the margins were kept resumes the model with the prior headroom.
    del record["calibration"]
    assert policy.initial_state(spec).resume(record).calibration == Calibration()


def test_a_persisted_margin_that_is_not_a_positive_number_is_refused() -> None:
    with pytest.raises(ValueError, match=r"calibration\.tpot"):
        Calibration.from_dict({"load": [1.0], "ttft": [1.0], "tpot": [-1.0]})
    with pytest.raises(ValueError):
        Calibration.from_dict({"tpot": ["fast"]})


def test_a_window_the_fleet_was_not_sized_for_counts_its_hits_but_not_its_misses() -> None:
    """Issue 13: the overload minutes after a 3x step (p90s 1.5-2.5x the model's on a fleet sized
    for a third of the load) held the latency margins for the half hour of ``KEEP`` checks."""
    overloaded = Calibration().model_checked(0.5, 0.040, 1.0, 0.030, sized=False)
    assert overloaded.ttft.ratios == ()  # the miss is the load's
    assert overloaded.tpot.ratios == (pytest.approx(0.75),)  # the model held even there
    sized = Calibration().model_checked(0.5, 0.040, 1.0, 0.030)
    assert sized.ttft.ratios == (pytest.approx(2.0),) and sized.tpot.ratios == (pytest.approx(0.75),)


def test_dropped_misses_leave_the_margin_to_the_windows_the_fleet_was_sized_for() -> None:
    def run(step_sized: bool) -> tuple[float, float, float]:
        calibration = Calibration()
        for _ in range(100):
            calibration = calibration.model_checked(0.5, 0.040, 0.55, 0.042)  # sized: 1.10 and 1.05
        for _ in range(20):  # a step's overload: twice the model's p90s
            calibration = calibration.model_checked(0.5, 0.040, 1.0, 0.080, sized=step_sized)
        return calibration.margins(0.9, 0.3, 20.0)

    sized_only = Calibration(ttft=ErrorRatios(ratios=(1.1,) * 100), tpot=ErrorRatios(ratios=(1.05,) * 100))
    assert run(step_sized=False) == pytest.approx(sized_only.margins(0.9, 0.3, 20.0))
    _, ttft, tpot = run(step_sized=True)  # kept, the step's overload would be the margin
    assert ttft > 1.8 and tpot > 1.8


def test_rebasing_moves_the_p90_ratios_to_the_new_model_and_leaves_the_load_alone() -> None:
    measured = _measured()
    rebased = measured.rebased(0.5, 0.8)
    assert rebased.ttft.ratios == pytest.approx(tuple(r * 0.5 for r in measured.ttft.ratios))
    assert rebased.tpot.ratios == pytest.approx(tuple(r * 0.8 for r in measured.tpot.ratios))
    assert rebased.load == measured.load
    for unusable in (math.nan, math.inf, 0.0, -1.0):
        assert measured.rebased(unusable, 0.8) is measured
        assert measured.rebased(0.5, unusable) is measured


def test_when_the_model_learns_the_errors_of_the_old_one_stop_holding_the_margin() -> None:
    # A model that since moved left TPOT ratios of 1.8 behind; a clean window at another TPOT
    # teaches it more, and the ratios kept are now against the model it became.
    policy = FleetSLOPolicy()
    state, t = trained_state(policy)
    stale = replace(state.calibration, tpot=ErrorRatios(ratios=(1.8,) * 40))
    state = replace(state, calibration=stale)
    mix = state.mix
    assert mix is not None
    idle_before = state.model.predict(1e-3, mix, 200, 0.9).tpot_p90
    _, after = policy.decide(obs(t, 10, 30.0, tpot=1.4 * tpot_for(3.0)), state, SPEC, t)
    idle_after = after.model.predict(1e-3, mix, 200, 0.9).tpot_p90
    assert abs(idle_after / idle_before - 1) > 0.01  # it learned
    # The last ratio is this window's own check; the 40 before it were rebased.
    assert after.calibration.tpot.ratios[:40] == pytest.approx(
        (1.8 * idle_before / idle_after,) * 40, rel=0.05
    )
