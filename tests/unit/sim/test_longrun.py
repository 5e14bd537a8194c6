"""The streaming long-run driver: the same windows as the exact runner and judge, in bounded memory."""

from __future__ import annotations

import math

import pytest
from fleetslo.policy.registry import make_policy
from fleetslo.sim.longrun import simulate_stream
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.result import build_result
from fleetslo.sim.runner import SimConfig, simulate
from fleetslo.sim.traces import lognormal_tokens, step_spike
from fleetslo.sim.traces.multiday import MultiDayCurve, arrivals

from tests.unit.sim.sim_support import spec_for, tiny_profile


@pytest.mark.parametrize("policy_name", ["hpa-util", "fleetslo"])
def test_streamed_windows_equal_the_exact_runner(policy_name: str) -> None:
    profile = tiny_profile()
    spec = spec_for(profile, ttft_s=0.5, tpot_s=0.02, cold_start_s=60.0)
    trace = step_spike(
        20.0, 900.0, lognormal_tokens(300, 60, 0.8), spike_at_s=300, spike_duration_s=240, factor=3, seed=5
    )
    config = SimConfig(spec=spec, profile=profile, initial_replicas=2)
    exact = build_result(
        simulate(trace, make_policy(policy_name, spec), config),
        policy=policy_name,
        trace="t",
        profile=profile,
        spec=spec,
    )
    streamed = simulate_stream(iter(trace.requests), make_policy(policy_name, spec), config)
    assert exact.scale_events > 0  # the policy scaled: the loops agree on a moving fleet
    assert tuple(streamed.windows) == exact.windows
    assert streamed.replica_seconds / 3600 == pytest.approx(exact.replica_hours, rel=1e-12)
    assert streamed.requests == exact.requests
    assert streamed.met_requests / streamed.requests == pytest.approx(exact.request_attainment)
    assert streamed.window_attainment() == pytest.approx(exact.window_attainment)
    assert streamed.rejected == exact.rejected
    # both replays go through the one control plane: the same controller, the same scale events
    assert [
        (e.t_s, e.replicas_from, e.replicas_to, e.batch_limit, e.reason, e.message) for e in streamed.events
    ] == [(e.t_s, e.replicas_from, e.replicas_to, e.batch_limit, e.reason, e.message) for e in exact.events]
    assert sum(streamed.replica_seconds_by_day.values()) == pytest.approx(streamed.replica_seconds)


def test_days_split_the_replica_hours_and_requests() -> None:
    profile = builtin_profile("mi325x-qwen3-235b-fp8-tp4")
    spec = spec_for(profile, cold_start_s=300.0)
    day = 7200.0  # two "days" of two hours keep the test fast
    curve = MultiDayCurve(0.5)
    reqs = arrivals(curve, 2 * day, lognormal_tokens(200, 50, 0.5), seed=1)
    result = simulate_stream(
        reqs, make_policy("static", spec, replicas=2), SimConfig(spec, profile, 2), day_s=day
    )
    days = [result.day(0, day), result.day(1, day)]
    assert [d["replica_hours"] for d in days] == pytest.approx([4.0, 4.0], rel=0.01)
    assert sum(d["requests"] for d in days) == result.requests
    assert all(d["window_attainment"] is not None and not math.isnan(d["window_attainment"]) for d in days)
