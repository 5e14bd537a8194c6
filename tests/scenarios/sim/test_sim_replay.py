"""Whole replays: conservation, determinism, the result contract, warm-fleet sizing and the oracle."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from fleetslo.policy.baselines import StaticPolicy
from fleetslo.policy.oracle import OraclePolicy
from fleetslo.sim import oracle
from fleetslo.sim.result_types import SimResult
from fleetslo.sim.scenario import Scenario, initial_replicas, run_policy
from fleetslo.sim.traces import fixed_tokens, lognormal_tokens, poisson, step_spike, window
from fleetslo.sim.workload import Request, Trace

from tests.unit.sim.sim_support import ScriptedPolicy, spec_for, tiny_profile

RESULT_KEYS = {
    "policy", "trace", "profile", "slo", "requests", "completed", "rejected", "in_flight_at_end",
    "window_attainment", "request_attainment", "p90_ttft_s", "p90_tpot_s", "replica_hours", "gpu_hours",
    "cost_per_million_tokens", "scale_events", "sim_seconds", "wall_seconds", "windows", "events",
    "decisions",
}  # fmt: skip
WINDOW_KEYS = {
    "start_s", "requests", "arrival_rate", "p90_ttft_s", "p90_tpot_s", "met", "ready_replicas",
    "starting_replicas", "batch_limit", "queue_length",
}  # fmt: skip
EVENT_KEYS = {"t_s", "replicas_from", "replicas_to", "batch_limit", "reason", "message"}


def scenario(**changes: object) -> Scenario:
    profile = tiny_profile(**changes.pop("profile", {}))  # type: ignore[arg-type]
    trace = step_spike(
        4.0,
        900.0,
        lognormal_tokens(400, 80, 0.8),
        spike_at_s=300.0,
        spike_duration_s=240.0,
        factor=3.0,
        seed=3,
    )
    base = Scenario(trace, "spike", profile, spec_for(profile, ttft_s=1.0, tpot_s=0.05), initial_replicas=2)
    return replace(base, **changes)  # type: ignore[arg-type]


SCRIPT = ((0.0, 2, None), (200.0, 0, 4), (260.0, 5, 16), (600.0, 1, None))


def test_every_request_completes_is_rejected_or_is_still_in_flight() -> None:
    sc = replace(scenario(), router_queue_limit=50, drain_timeout_s=20.0)
    result = run_policy(sc, ScriptedPolicy(SCRIPT))
    assert result.rejected > 0  # zero replicas for a minute overflowed the router queue
    assert result.completed + result.rejected + result.in_flight_at_end == result.requests
    assert result.requests == len(sc.trace)
    assert sum(w.requests for w in result.windows) == result.requests
    changes = [(e.replicas_from, e.replicas_to, e.batch_limit) for e in result.events]
    assert changes[:3] == [(2, 0, 4), (0, 5, 16), (5, 1, 16)]
    assert {e.reason for e in result.events} == {"Scheduled"}


def test_same_seed_same_result_and_a_new_seed_changes_it() -> None:
    noisy = scenario(profile={"step_time": {"noise_cv": 0.1}}, cold_start_sigma=0.3)
    policy = ScriptedPolicy(((0.0, 2, None), (250.0, 6, None), (700.0, 2, None)))

    def strip(result: SimResult) -> SimResult:
        return replace(result, wall_seconds=0.0)

    first = strip(run_policy(replace(noisy, seed=7), policy))
    assert strip(run_policy(replace(noisy, seed=7), policy)) == first
    assert strip(run_policy(replace(noisy, seed=8), policy)) != first


def test_result_is_one_json_object_with_the_contract_keys() -> None:
    typed = run_policy(scenario(), StaticPolicy(2))
    result = typed.to_dict()
    assert set(result) >= RESULT_KEYS
    assert set(result["slo"]) == {"ttft_s", "tpot_s", "quantile"}
    assert all(set(w) >= WINDOW_KEYS for w in result["windows"])
    assert result["windows"][0]["start_s"] == 0.0 and result["windows"][1]["start_s"] == 60.0
    json.dumps(result, allow_nan=False)
    assert typed.gpu_hours == pytest.approx(2 * typed.replica_hours)
    assert typed.replica_hours == pytest.approx(2 * typed.sim_seconds / 3600)
    moved = run_policy(scenario(), ScriptedPolicy(((0.0, 3, 8),)))
    assert all(set(e) == EVENT_KEYS for e in moved.to_dict()["events"]) and moved.scale_events == 1


def test_windows_without_traffic_are_not_judged() -> None:
    profile = tiny_profile()
    trace = poisson(2.0, 60.0, fixed_tokens(200, 20), seed=1)
    late = poisson(2.0, 60.0, fixed_tokens(200, 20), seed=2)
    shifted = tuple(Request(r.arrival_s + 240.0, r.input_tokens, r.output_tokens) for r in late.requests)
    sc = Scenario(Trace(trace.requests + shifted), "gap", profile, spec_for(profile), initial_replicas=1)
    result = run_policy(sc, StaticPolicy(1))
    assert [w.met for w in result.windows][:5] == [True, None, None, None, True]
    assert result.window_attainment == 1.0


def test_the_warm_fleet_is_the_smallest_static_fleet_meeting_the_first_five_minutes() -> None:
    sc = scenario()
    n = initial_replicas(sc)

    def meets(k: int) -> bool:
        head = replace(sc, trace=window(sc.trace, 0.0, 300.0), initial_replicas=k)
        return run_policy(head, StaticPolicy(k)).window_attainment == 1.0

    assert n >= 1 and meets(n)
    assert n == 1 or not meets(n - 1)


def test_a_minute_no_fleet_can_meet_does_not_start_the_replay_at_the_maximum() -> None:
    """Prompts of 20k tokens take 2 s to prefill on an idle replica (10K tokens/s): against a 1 s
    TTFT target the minute they arrive in fails at any size. The warm fleet used to be the spec's
    maximum (50) then; it is now the smallest that does as well as the maximum does."""
    sc = scenario()
    long = [
        Request(r.arrival_s, 20_000, r.output_tokens) if 60.0 <= r.arrival_s < 120.0 else r
        for r in sc.trace.requests
    ]
    hopeless = replace(sc, trace=Trace(tuple(long), "long minute"))
    n = initial_replicas(hopeless)

    def head(k: int) -> SimResult:
        return run_policy(replace(hopeless, trace=window(hopeless.trace, 0.0, 300.0), initial_replicas=k),
                          StaticPolicy(k))  # fmt: skip

    at_max = head(hopeless.spec.replicas.max)
    assert at_max.window_attainment is not None and at_max.window_attainment < 1.0
    assert n < hopeless.spec.replicas.max / 4  # 8: the long prompts' prefill is load too
    assert (head(n).window_attainment or 0.0) >= at_max.window_attainment
    assert n == 1 or (head(n - 1).window_attainment or 0.0) < at_max.window_attainment


def test_oracle_meets_the_targets_for_less_than_a_peak_sized_static_fleet() -> None:
    sc = scenario()
    peak = replace(sc, initial_replicas=20)
    static = run_policy(peak, StaticPolicy(20))
    plan = oracle.plan(sc)
    result = run_policy(sc, OraclePolicy(plan.schedule))
    assert result.window_attainment == pytest.approx(plan.window_attainment)
    assert result.window_attainment >= 0.9
    assert result.replica_hours < static.replica_hours
    # capacity must be ready when the spike starts: a step up is requested a cold start before it
    up = [e for e in result.events if e.replicas_to > e.replicas_from]
    assert up and min(e.t_s for e in up) <= 300.0 - sc.spec.replicas.cold_start


def test_schedule_holds_dips_shorter_than_a_cold_start() -> None:
    need = [2, 2, 5, 1, 5, 2, 2, 2, 2]
    steps = oracle.schedule_for(need, lead_s=75.0, floor=1)
    policy = OraclePolicy(steps)
    assert policy.planned(0.0) == 2
    assert policy.planned(60.0 - 75.0 + 120.0) == 5  # requested 75 s before minute 2
    assert policy.planned(3 * 60.0 + 10) == 5  # the one-minute dip is held through
    assert policy.planned(5 * 60.0 + 30) == 2
    assert policy.planned(math.inf) == 1


def test_the_no_foresight_schedule_reacts_only_to_minutes_that_have_ended() -> None:
    need = [2, 2, 5, 1, 1, 1, 4]
    steps = oracle.no_foresight_schedule(need, headroom=0.5, memory_minutes=2, start=3, floor=1)
    policy = OraclePolicy(steps)
    assert policy.planned(0.0) == 3  # the warm fleet until the first minute ends
    assert policy.planned(60.0) == 3  # ceil(2 x 1.5)
    assert policy.planned(2 * 60.0 + 59) == 3  # minute 2's need is not known while it runs
    assert policy.planned(3 * 60.0) == 8  # ceil(5 x 1.5), the moment minute 2 ends
    assert policy.planned(4 * 60.0) == 8  # remembered for two minutes
    assert policy.planned(5 * 60.0) == 2
    assert policy.planned(7 * 60.0) == 6
    with pytest.raises(ValueError, match="memory_minutes"):
        oracle.no_foresight_schedule(need, 0.1, 0, start=1)


def test_without_foresight_the_oracles_need_costs_attainment_or_headroom() -> None:
    sc = scenario()
    plan = oracle.plan(sc)
    lean = oracle.no_foresight(sc, plan, headroom=0.0, memory_minutes=1)
    ample = oracle.no_foresight(sc, plan, headroom=1.0, memory_minutes=5)
    # The spike outruns a cold start: reacting to exact knowledge still misses minutes...
    assert lean.window_attainment < (plan.window_attainment or 0.0)
    # ...unless headroom is paid for, which costs more than the plan that saw it coming.
    assert ample.window_attainment >= lean.window_attainment
    assert ample.replica_hours > (plan.replica_hours or 0.0)


def test_the_oracle_repairs_bursts_within_a_minute_that_its_minute_averages_miss() -> None:
    # every minute's requests arrive within its first 4 seconds: the minute's average says little
    bursts = [
        Request(60.0 * m + 4.0 * i / 400, 400, 60) for m in range(12) for i in range(400 if m % 3 else 100)
    ]
    profile = tiny_profile()
    spec = spec_for(profile, ttft_s=1.0, tpot_s=0.05, max_replicas=40)
    sc = Scenario(Trace(tuple(bursts), "bursts"), "bursts", profile, spec, initial_replicas=1)
    capacity = oracle.calibrate(sc)
    gentle = oracle._repair(sc, capacity, oracle.minute_need(sc, capacity), growth=0.05, rounds=4)
    planned = oracle.plan(sc)
    assert (gentle.window_attainment or 0) < 0.5  # +5 % per miss, four rounds: far from enough
    assert (planned.window_attainment or 0) >= 0.9
