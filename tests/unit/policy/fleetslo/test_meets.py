"""``perf_model.meets``: the sizing's test against the targets, read off each p90's tail at the
target instead of solving for the p90 (a bisection of 24 steps) and comparing."""

from __future__ import annotations

import math

import pytest
from fleetslo.policy.fleetslo.learning import PerformanceModel
from fleetslo.policy.fleetslo.mix import RequestMix
from fleetslo.policy.fleetslo.perf_model import meets, predict
from fleetslo.policy.fleetslo.physics import CONSERVATIVE_PRIOR, StepCost
from fleetslo.policy.fleetslo.ttft import INF
from fleetslo.sim.compare import step_cost
from fleetslo.sim.profile import builtin_profile
from hypothesis import given, settings
from hypothesis import strategies as st

MI325X = step_cost(builtin_profile("mi325x-qwen3-235b-fp8-tp4"))
#: A target this close to the solved p90 (relative) may be judged either way: the bisection stops
#: within 2^-24 of its bracket, which is at most a few times the p90 itself.
EDGE = 1e-6

lengths = st.lists(st.floats(1.0, 60_000.0), min_size=1, max_size=24)
outputs = st.lists(st.integers(1, 4_000).map(float), min_size=1, max_size=24)


@st.composite
def operating_points(draw: st.DrawFn) -> tuple[StepCost, float, RequestMix, int | None, float, float]:
    prompt = draw(lengths)
    output = draw(st.lists(st.sampled_from(draw(outputs)), min_size=len(prompt), max_size=len(prompt)))
    return (
        draw(st.sampled_from([MI325X, CONSERVATIVE_PRIOR])),
        draw(st.floats(1e-4, 40.0)),
        RequestMix(tuple(prompt), tuple(output)),
        draw(st.sampled_from([None, 1, 2, 8, 64, 512])),
        draw(st.sampled_from([0.5, 0.9, 0.99])),
        draw(st.floats(0.25, 4.0)),
    )


@settings(max_examples=400, deadline=None)
@given(operating_points(), st.sampled_from([0.3, 0.97, 0.999, 1.0, 1.001, 1.03, 3.0]), st.floats(0.5, 2.0))
def test_meets_answers_as_the_solved_p90s_compared_with_the_targets(
    point: tuple[StepCost, float, RequestMix, int | None, float, float], factor: float, bias: float
) -> None:
    cost, rate, mix, limit, q, interference = point
    p = predict(cost, rate, mix, limit, q, interference=interference)
    ttft_p90 = p.ttft_p90 * bias

    def finite(t: float) -> float:
        return t if math.isfinite(t) else 1e9

    at, above = (
        (finite(ttft_p90 * factor), finite(p.tpot_p90 * factor)),
        (finite(ttft_p90 * 3), finite(p.tpot_p90 * 3)),
    )
    for ttft, tpot in ((at[0], above[1]), (above[0], at[1]), at, (10.0, 0.05)):
        fast = meets(
            cost, rate, mix, limit, q, ttft=ttft, tpot=tpot, interference=interference, ttft_scale=bias
        )
        solved = ttft_p90 <= ttft and p.tpot_p90 <= tpot
        near = any(
            math.isfinite(v) and abs(v - t) <= EDGE * max(v, t)
            for v, t in ((ttft_p90, ttft), (p.tpot_p90, tpot))
        )
        assert fast == solved or near, (ttft_p90, p.tpot_p90, ttft, tpot)


def test_a_replica_that_cannot_serve_the_rate_meets_no_finite_ttft_target() -> None:
    mix = RequestMix((2_000.0,), (400.0,))
    assert predict(MI325X, 40.0, mix, 8).ttft_p90 == INF
    assert not meets(MI325X, 40.0, mix, 8, 0.9, ttft=1e6, tpot=1.0)
    assert not meets(MI325X, 1e6, mix, None, 0.9, ttft=1e6, tpot=1e6)  # the prefill queue grows


@pytest.mark.parametrize("limit", [None, 8])
def test_a_nan_target_is_met_by_nothing_as_the_solved_p90s_meet_none(limit: int | None) -> None:
    mix = RequestMix((2_000.0, 9_000.0), (3.0, 400.0))
    for rate in (0.01, 40.0):
        assert not predict(MI325X, rate, mix, limit).meets(math.nan, 1.0)
        assert not meets(MI325X, rate, mix, limit, 0.9, ttft=math.nan, tpot=1.0)
        assert not meets(MI325X, rate, mix, limit, 0.9, ttft=1e6, tpot=math.nan)


def test_the_learned_model_meets_as_its_prediction_with_the_learned_bias_and_speed() -> None:
    model = PerformanceModel(MI325X, ln_speed=math.log(1.4), ln_interference=math.log(1.5), ln_ttft_bias=0.3)
    mix = RequestMix((900.0, 6_000.0, 14_000.0), (30.0, 250.0, 900.0))
    for rate in (0.01, 0.1, 0.3, 0.6):
        assert model.predict(rate, mix, None).ttft_p90 < INF
        p = model.predict(rate, mix, None)
        for scale in (0.9, 1.1):
            ttft, tpot = p.ttft_p90 * scale, p.tpot_p90 * scale
            assert model.meets(rate, mix, None, 0.9, ttft=ttft, tpot=p.tpot_p90 * 2) == (scale > 1)
            assert model.meets(rate, mix, None, 0.9, ttft=p.ttft_p90 * 2, tpot=tpot) == (scale > 1)
