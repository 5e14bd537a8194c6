"""Each baseline on hand-built observations: scale up on breach, hold inside tolerance, stabilization
delays scale-down, missing data holds, bounds clamp."""

from __future__ import annotations

from typing import Any

import pytest
from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.base import Policy
from fleetslo.policy.baselines import (
    HpaRunningPolicy,
    HpaUtilizationPolicy,
    KedaWaitingPolicy,
    LlmdSloPolicy,
    StaticPolicy,
)


def run(policy: Policy[Any], spec: FleetSLOSpec, steps: list[tuple[float, Observation]]) -> list[Decision]:
    """Feed observations at the given times, threading the state; the decisions in order."""
    state = policy.initial_state(spec)
    out = []
    for now, obs in steps:
        decision, state = policy.decide(obs, state, spec, now)
        out.append(decision)
    return out


def one(policy: Policy[Any], spec: FleetSLOSpec, obs: Observation) -> Decision:
    return run(policy, spec, [(0.0, obs)])[0]


# --- static -----------------------------------------------------------------------------------


def test_static_is_fixed_whatever_it_sees(spec, observe) -> None:  # type: ignore[no-untyped-def]
    policy = StaticPolicy(replicas=6)
    for obs in (observe(ready=2, gpu_utilization=1.0, waiting=500.0), observe(ready=9)):
        decision = one(policy, spec, obs)
        assert (decision.replicas, decision.reason) == (6, Reason.FIXED_SIZE)
        assert decision.batch_limit == 128
    assert one(StaticPolicy(), spec, observe()).replicas == spec.replicas.min


# --- hpa-util ---------------------------------------------------------------------------------


def test_hpa_util_scales_up_on_high_utilization(spec, observe) -> None:  # type: ignore[no-untyped-def]
    decision = one(HpaUtilizationPolicy(), spec, observe(ready=4, gpu_utilization=1.0))
    assert (decision.replicas, decision.reason) == (5, Reason.METRIC_ABOVE_TARGET)
    assert decision.message.startswith("hpa-util: ")


def test_hpa_util_holds_inside_tolerance(spec, observe) -> None:  # type: ignore[no-untyped-def]
    decision = one(HpaUtilizationPolicy(), spec, observe(ready=4, gpu_utilization=0.86))
    assert (decision.replicas, decision.reason) == (4, Reason.WITHIN_TOLERANCE)


def test_hpa_util_scale_down_waits_300s(spec, observe) -> None:  # type: ignore[no-untyped-def]
    busy, idle = observe(ready=8, gpu_utilization=0.8), observe(ready=8, gpu_utilization=0.2)
    steps = [(0.0, busy)] + [(float(t), idle) for t in range(15, 301, 15)]
    decisions = run(HpaUtilizationPolicy(), spec, steps)
    held = decisions[1:-1]  # 15 s .. 285 s: the t=0 recommendation of 8 is still in the window
    assert all((d.replicas, d.reason) == (8, Reason.STABILIZED) for d in held)
    assert decisions[-1].replicas == 2  # t=300: ceil(8 × 0.25)


def test_hpa_util_holds_on_missing_metric(spec, observe) -> None:  # type: ignore[no-untyped-def]
    for obs in (observe(ready=5), observe(ready=0, starting=3, gpu_utilization=0.9)):
        decision = one(HpaUtilizationPolicy(), spec, obs)
        assert (decision.replicas, decision.reason) == (obs.replicas.provisioned, Reason.HOLD_NO_DATA)


def test_hpa_util_clamps_and_rate_limits(make_spec, observe) -> None:  # type: ignore[no-untyped-def]
    spec = make_spec(min_replicas=3, max_replicas=7)
    assert (
        one(HpaUtilizationPolicy(), spec, observe(ready=2, gpu_utilization=4.0)).replicas == 6
    )  # 2 + 4 pods
    hot = one(HpaUtilizationPolicy(), spec, observe(ready=6, gpu_utilization=4.0))
    assert (hot.replicas, hot.reason) == (7, Reason.CLAMPED_MAX)
    cold = run(HpaUtilizationPolicy(), spec, [(0.0, observe(ready=4, gpu_utilization=0.01))])[0]
    assert (cold.replicas, cold.reason) == (3, Reason.CLAMPED_MIN)


def test_hpa_util_does_not_ask_twice_while_replicas_start(spec, observe) -> None:  # type: ignore[no-untyped-def]
    decision = one(HpaUtilizationPolicy(), spec, observe(ready=4, starting=2, gpu_utilization=1.0))
    assert (decision.replicas, decision.reason) == (6, Reason.HOLD_REPLICAS_STARTING)


# --- hpa-running ------------------------------------------------------------------------------


def test_hpa_running_target_from_max_num_seqs(spec, observe) -> None:  # type: ignore[no-untyped-def]
    assert HpaRunningPolicy().target(spec) == pytest.approx(0.8 * 256)
    policy = HpaRunningPolicy(max_num_seqs=100)  # target 80 running per replica
    up = one(policy, spec, observe(ready=4, running=400.0))
    assert (up.replicas, up.reason) == (5, Reason.METRIC_ABOVE_TARGET)  # capped gauge: at most ×1.25
    steady = one(policy, spec, observe(ready=4, running=330.0))
    assert (steady.replicas, steady.reason) == (4, Reason.WITHIN_TOLERANCE)
    missing = one(policy, spec, observe(ready=4))
    assert (missing.replicas, missing.reason) == (4, Reason.HOLD_NO_DATA)


# --- keda-waiting -----------------------------------------------------------------------------


def test_keda_waiting_five_per_replica(spec, observe) -> None:  # type: ignore[no-untyped-def]
    policy = KedaWaitingPolicy()
    assert one(policy, spec, observe(ready=4, waiting=40.0)).replicas == 8
    steady = one(policy, spec, observe(ready=4, waiting=21.0))
    assert (steady.replicas, steady.reason) == (4, Reason.WITHIN_TOLERANCE)
    missing = one(policy, spec, observe(ready=4, request_rate=3.0))
    assert (missing.replicas, missing.reason) == (4, Reason.HOLD_NO_DATA)


def test_keda_waiting_scale_down_is_stabilized_then_floors_at_one(spec, observe) -> None:  # type: ignore[no-untyped-def]
    steps = [(0.0, observe(ready=4, waiting=20.0))] + [
        (t, observe(ready=4, waiting=0.0)) for t in (150, 299, 300)
    ]
    decisions = run(KedaWaitingPolicy(), spec, steps)
    assert [d.replicas for d in decisions] == [4, 4, 4, 1]
    assert decisions[1].reason == Reason.STABILIZED


def test_keda_waiting_scales_to_zero_after_cooldown_and_back(make_spec, observe) -> None:  # type: ignore[no-untyped-def]
    spec = make_spec(min_replicas=0)
    idle = observe(ready=1, waiting=0.0, request_rate=0.0)
    steps = [(0.0, observe(ready=1, waiting=0.0, request_rate=1.0)), (300.0, idle), (360.0, idle)]
    decisions = run(KedaWaitingPolicy(), spec, steps)
    assert [d.replicas for d in decisions] == [1, 1, 0]
    assert decisions[-1].reason == Reason.SCALE_DOWN_LOW_LOAD
    woken = one(KedaWaitingPolicy(), spec, observe(ready=0, request_rate=0.5))
    assert (woken.replicas, woken.reason) == (1, Reason.SCALE_UP_QUEUE)
    asleep = one(KedaWaitingPolicy(), spec, observe(ready=0, request_rate=0.0))
    assert asleep.replicas == 0


def test_keda_cooldown_does_not_apply_above_zero(spec, observe) -> None:  # type: ignore[no-untyped-def]
    idle = observe(ready=1, waiting=0.0, request_rate=0.0)
    decisions = run(KedaWaitingPolicy(), spec, [(t, idle) for t in (0.0, 400.0, 800.0)])
    assert all(d.replicas == 1 for d in decisions)


# --- llmd-slo ---------------------------------------------------------------------------------


def test_llmd_scales_up_above_055(spec, observe) -> None:  # type: ignore[no-untyped-def]
    decision = one(LlmdSloPolicy(), spec, observe(ready=4, ttft=1.5, tpot=0.01))  # s = 0.75
    assert (decision.replicas, decision.reason) == (6, Reason.SCALE_UP_SLO_BREACH)  # 4 + ceil(4 × 0.364)
    by_tpot = one(LlmdSloPolicy(), spec, observe(ready=4, ttft=0.1, tpot=0.04))  # s = 0.8
    assert by_tpot.replicas == 6


def test_llmd_credits_warming_replicas(spec, observe) -> None:  # type: ignore[no-untyped-def]
    decision = one(LlmdSloPolicy(), spec, observe(ready=2, starting=2, ttft=1.5))  # s·c = 0.375
    assert (decision.replicas, decision.reason) == (4, Reason.HOLD_REPLICAS_STARTING)


def test_llmd_holds_in_the_band_and_inside_tolerance(make_spec, observe) -> None:  # type: ignore[no-untyped-def]
    spec = make_spec(max_replicas=40)
    band = one(LlmdSloPolicy(), spec, observe(ready=4, ttft=1.0))  # s = 0.5
    assert (band.replicas, band.reason) == (4, Reason.STEADY)
    near = one(LlmdSloPolicy(), spec, observe(ready=20, ttft=1.12))  # d = 21: +5 % is within ±10 %
    assert (near.replicas, near.reason) == (20, Reason.WITHIN_TOLERANCE)


def test_llmd_scales_down_one_pod_per_120s(spec, observe) -> None:  # type: ignore[no-untyped-def]
    policy, state = LlmdSloPolicy(), LlmdSloPolicy().initial_state(spec)
    replicas, seen = 4, {}
    for now in range(0, 256, 15):
        obs = observe(ready=replicas, ttft=0.2)  # s = 0.1: the law wants 1 replica
        decision, state = policy.decide(obs, state, spec, float(now))
        replicas = seen[now] = decision.replicas
        if now == 105:
            assert decision.reason == Reason.RATE_LIMITED
    assert {now: n for now, n in seen.items() if now in (0, 105, 120, 225, 240, 255)} == {
        0: 3,
        105: 3,
        120: 2,
        225: 2,
        240: 1,
        255: 1,
    }


def test_llmd_smooths_over_45s_and_caps_at_2(spec, observe) -> None:  # type: ignore[no-untyped-def]
    steps = [
        (0.0, observe(ready=4, ttft=20.0)),
        (15.0, observe(ready=4, ttft=0.4)),
        (30.0, observe(ready=4, ttft=0.4)),
    ]
    # samples 2.0 (capped from 10), 0.2, 0.2: mean 0.8 > 0.55, so still scaling up at t=30
    assert "SLO signal 0.80" in run(LlmdSloPolicy(), spec, steps)[-1].message


def test_llmd_missing_latency_holds_but_known_idle_scales_down(spec, observe) -> None:  # type: ignore[no-untyped-def]
    unknown = one(LlmdSloPolicy(), spec, observe(ready=4, request_rate=2.0))
    assert (unknown.replicas, unknown.reason) == (4, Reason.HOLD_NO_DATA)
    idle = one(LlmdSloPolicy(), spec, observe(ready=4, request_rate=0.0))
    assert idle.replicas == 3  # signal 0 -> d = 0, one pod per 120 s
