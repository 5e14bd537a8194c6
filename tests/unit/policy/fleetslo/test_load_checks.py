"""Load misses: a step the sizing has caught up with stops counting; a swing and a ramp keep counting.

Reproduces issue 13's post-step failure at the level of the margin: after a 3x step the load ratios
of the forecasts made before it (about 3) stayed in the upper quantile for two cold starts, so
every minute after the step was sized for a second 3x step on top of the first (load margin x3.3,
the fleet at its maximum of 96 while the oracle ran 24).
"""

from __future__ import annotations

import pytest
from fleetslo.policy.fleetslo.calibration import LoadChecks

H = 300.0  # one horizon: the cold start the sized loads look ahead


def _sized(checks: LoadChecks, t: float, load: float) -> LoadChecks:
    return checks.predicted(t + H, load, made=t)


def _run(levels: list[tuple[float, float]], until: float, sized_as_seen: bool = True) -> LoadChecks:
    """A load per 15 s decision: ``levels`` are (from time, tokens/s); each decision sizes for the
    load it sees and checks what was sized one horizon before."""
    checks = LoadChecks()
    t = 0.0
    while t <= until:
        load = [v for start, v in levels if start <= t][-1]
        checks = checks.observed(t, load)
        checks = _sized(checks, t, load)
        t += 15.0
    return checks


def test_misses_of_a_step_that_stays_are_forgotten_once_a_load_sized_after_it_proved_enough() -> None:
    before = _run([(0.0, 100.0), (900.0, 300.0)], until=900.0 + H - 15.0)
    assert max(before.ratios) == pytest.approx(3.0)  # the step's misses count while unproven
    after = _run([(0.0, 100.0), (900.0, 300.0)], until=900.0 + 2 * H)
    assert after.ratios and max(after.ratios) == pytest.approx(1.0)
    assert after.upper(0.9, 1.3, 20.0) < 1.3  # back towards the fleet's own (exact) forecasts


def test_misses_of_a_burst_that_went_away_keep_counting() -> None:
    """The traffic left the level the misses showed: evidence that it swings that far."""
    checks = _run([(0.0, 100.0), (900.0, 300.0), (900.0 + H, 100.0)], until=900.0 + 2 * H)
    assert max(checks.ratios) == pytest.approx(3.0)


def test_misses_of_a_ramp_keep_counting_because_every_re_sizing_misses_again() -> None:
    checks = LoadChecks()
    t = 0.0
    while t <= 3600.0:
        load = 100.0 * (1 + t / 600.0)  # +50 % per cold start
        checks = _sized(checks.observed(t, load), t, load)
        t += 15.0
    assert len(checks.ratios) == len(checks.checks) > 20 and min(checks.ratios) > 1.0


def test_a_resumed_ratio_counts_and_ages_out_with_the_checks_after_it() -> None:
    checks = LoadChecks(resumed=(2.0,) * 4)
    assert checks.upper(0.9, 1.0, 1e-9) == pytest.approx(2.0)
    for k in range(4):
        checks = checks.predicted(float(k), 10.0, made=float(k) - H).observed(float(k), 10.0, keep=4)
    assert checks.resumed == () and checks.ratios == (1.0,) * 4


def test_an_unusable_outcome_drops_the_due_loads_and_keeps_the_last_good_level() -> None:
    checks = _sized(LoadChecks().observed(0.0, 100.0), 0.0, 100.0)
    for value in (None, 0.0, float("nan"), float("inf")):
        dropped = checks.observed(H, value)
        assert dropped.pending == () and dropped.checks == () and dropped.latest == 100.0


def test_a_load_is_missed_now_only_when_one_checked_now_fell_short_of_what_arrived() -> None:
    checks = _sized(_sized(LoadChecks(), 0.0, 100.0), 15.0, 200.0)
    assert not checks.missed(H)  # nothing checked yet
    short = checks.observed(H, 150.0)
    assert short.missed(H) and not short.missed(H + 15.0)
    assert not short.observed(H + 15.0, 150.0).missed(H + 15.0)  # 150 arrived, 200 sized: enough
