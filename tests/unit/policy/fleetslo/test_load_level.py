"""The load margin at the level it is applied to: what arrived after a sizing like this one.

Reproduces drawn 263 (Azure's code trace, prompts x4.7, MI300X, a 2-minute cold start): requests
came and went within a cold start, 0-6 a second minute to minute. A lull's forecast of 0.5/s was
followed by a burst of 4-6/s, a ratio of x8-11, and the q0.9 of those ratios (x5.6) multiplied a
burst's own 5.45/s: 141-151 replicas wanted where the oracle ran 30, 61.5 replica-hours against
its 29.7. What arrives after a burst's sizing is the next burst or a lull, not x5.6 the burst.
"""

from __future__ import annotations

import math

import pytest
from fleetslo.policy.fleetslo.calibration import LoadCheck, LoadChecks, level_upper
from hypothesis import given
from hypothesis import strategies as st

Q, PRIOR, WEIGHT = 0.9, 1.3, 20.0
WIDTH = math.log(PRIOR)


def _checks(pairs: list[tuple[float, float]]) -> LoadChecks:
    """Checks of (sized, arrived) tokens/s, one a decision, none caught up (the arrivals swing)."""
    checks = (LoadCheck(15.0 * k, 15.0 * k + 120, s, a) for k, (s, a) in enumerate(pairs))
    return LoadChecks(checks=tuple(checks))


def _ratio_quantile(pairs: list[tuple[float, float]]) -> float:
    ratios = sorted(a / s for s, a in pairs)
    return ratios[min(len(ratios) - 1, math.floor(Q * len(ratios)))]


def test_bursts_faster_than_a_cold_start_are_covered_at_their_level_not_multiplied() -> None:
    # Lulls sized at 0.5/s and bursts at 5/s, each followed by either: the arrivals do not follow
    # the sizing.
    pairs = [(0.5, 5.0), (0.5, 0.4), (5.0, 0.5), (5.0, 5.5), (0.5, 6.0), (5.0, 0.3)] * 5
    ratio_model = _ratio_quantile(pairs)  # x10-12: what a lull's forecast missed by
    assert ratio_model >= 10
    burst = level_upper(pairs, 5.0, Q, width=WIDTH)[0]
    lull = level_upper(pairs, 0.5, Q, width=WIDTH)[0]
    assert burst * 5.0 == pytest.approx(6.0, rel=0.25)  # the bursts' own top, not 5 x 10
    assert lull * 0.5 == pytest.approx(6.0, rel=0.25)  # a lull is sized for the burst that may come
    # Ten times the bursts' level was never sized for: there the line is unknown, and the margin
    # is the one at the highest level seen (a step above every burst is not read as a lull).
    assert level_upper(pairs, 50.0, Q, width=WIDTH)[0] == pytest.approx(burst)
    checks = _checks(pairs)
    assert checks.upper(Q, PRIOR, WEIGHT, at=5.0) < 1.3 < checks.upper(Q, PRIOR, WEIGHT, at=0.5)
    assert checks.upper(Q, PRIOR, WEIGHT) > 7  # the level left out: the ratios as before


def test_a_ramp_keeps_its_ratio_at_every_level() -> None:
    pairs = [(100.0 * 1.02**k, 140.0 * 1.02**k) for k in range(40)]
    for at in (100.0, 150.0, 210.0):
        assert level_upper(pairs, at, Q, width=WIDTH)[0] == pytest.approx(1.4, rel=1e-6)


def test_sized_loads_at_one_level_give_the_ratio_quantile() -> None:
    pairs = [(200.0, 200.0 * (0.9 + 0.01 * k)) for k in range(30)]
    assert level_upper(pairs, 200.0, Q, width=WIDTH) == (pytest.approx(_ratio_quantile(pairs)), 30.0)
    # and beyond the levels seen, the highest's: a step the checks never sized for
    assert level_upper(pairs, 600.0, Q, width=WIDTH)[0] == pytest.approx(_ratio_quantile(pairs))


def test_noise_about_a_level_keeps_the_ratios_quantile() -> None:
    """Sized loads that differ by the forecast's noise alone are one level: the weights barely differ."""
    pairs = [(100.0 * (1 + 0.05 * math.sin(k)), 100.0 * (1 + 0.08 * math.cos(3 * k))) for k in range(40)]
    for at in (95.0, 100.0, 105.0):
        assert level_upper(pairs, at, Q, width=WIDTH)[0] == pytest.approx(_ratio_quantile(pairs), rel=0.03)


def test_a_step_down_is_not_read_as_lulls_followed_by_bursts() -> None:
    """Sized at 13/s while 4.5/s came after a step down, then sized at 4.5/s and 4.5/s came: at the
    new level the margin is what followed sizings there (x1), not the step's spread."""
    pairs = [(13.0, 13.0)] * 20 + [(13.0, 4.5)] * 20 + [(4.5, 4.5 * (1 + 0.01 * (k % 5))) for k in range(20)]
    assert level_upper(pairs, 4.5, Q, width=WIDTH)[0] == pytest.approx(1.04, abs=0.01)
    # resting on the 20 checks sized there; the prior stands in for the rest
    expected = (PRIOR * WEIGHT + 1.04 * 20) / (WEIGHT + 20)
    assert _checks(pairs).upper(Q, PRIOR, WEIGHT, at=4.5) == pytest.approx(expected, abs=0.01)


def test_no_checks_resumed_ratios_or_no_headroom_keep_the_ratios_quantile() -> None:
    resumed = LoadChecks(checks=_checks([(0.5, 5.0), (5.0, 5.0)] * 5).checks, resumed=(1.1,))
    assert resumed.upper(Q, PRIOR, WEIGHT, at=5.0) == resumed.upper(Q, PRIOR, WEIGHT)
    assert LoadChecks().upper(Q, PRIOR, WEIGHT, at=5.0) == PRIOR
    flat = _checks([(0.5, 5.0), (5.0, 5.0)] * 5)
    assert flat.upper(Q, 1.0, WEIGHT, at=5.0) == flat.upper(Q, 1.0, WEIGHT)


@given(
    st.lists(st.tuples(st.floats(0.01, 1e4), st.floats(0.01, 1e4)), min_size=1, max_size=60),
    st.floats(0.001, 1e5),
    st.floats(1.0001, 3.0),
)
def test_a_higher_load_is_never_covered_by_less(
    pairs: list[tuple[float, float]], at: float, step: float
) -> None:
    """The covered load, ``at`` x the margin, grows with ``at``: more load never buys fewer replicas."""
    checks = _checks(pairs)
    lower = at * checks.upper(Q, PRIOR, WEIGHT, at=at)
    higher = at * step * checks.upper(Q, PRIOR, WEIGHT, at=at * step)
    assert math.isfinite(lower) and lower > 0
    assert higher >= lower * (1 - 1e-9)
