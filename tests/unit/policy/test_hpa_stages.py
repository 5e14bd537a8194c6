"""The HPA stages alone, against the Kubernetes controller's arithmetic (research/autoscalers.md §2.5)."""

from __future__ import annotations

import pytest
from fleetslo.core.model import Reason
from fleetslo.policy.baselines import LLMD_BEHAVIOR, Behavior, HpaState, RatePolicy, ScalingRules
from fleetslo.policy.baselines.hpa import (
    clamp,
    external_recommendation,
    per_pod_recommendation,
    rate_limit,
    run_chain,
    stabilize,
)
from fleetslo.policy.stages import ChainState

DEFAULT = Behavior()


@pytest.mark.parametrize(
    ("average", "ready", "starting", "expected", "reason"),
    [
        (0.85, 4, 0, 4, Reason.WITHIN_TOLERANCE),  # ratio 1.06
        (0.73, 4, 0, 4, Reason.WITHIN_TOLERANCE),  # ratio 0.91
        (1.0, 4, 0, 5, Reason.METRIC_ABOVE_TARGET),  # ceil(4 × 1.25)
        (0.4, 4, 0, 2, Reason.METRIC_BELOW_TARGET),  # ceil(4 × 0.5)
        (0.1, 4, 2, 1, Reason.METRIC_BELOW_TARGET),  # scale-down ignores starting pods
        (1.0, 4, 2, 6, Reason.HOLD_REPLICAS_STARTING),  # starting pods at 0 %: 4/6 × 1.25 = 0.83
        (1.0, 2, 1, 3, Reason.HOLD_REPLICAS_STARTING),  # 2/3 × 1.25 = 0.83
    ],
)
def test_per_pod_recommendation(
    average: float, ready: int, starting: int, expected: int, reason: Reason
) -> None:
    value, why, _ = per_pod_recommendation(average, 0.8, ready, starting, 0.1)
    assert (value, why) == (expected, reason)


def test_per_pod_scale_up_through_starting_pods() -> None:
    # ratio 2.0; with 2 starting pods at 0 %: 2.0 × 4/6 = 1.33 -> ceil(1.33 × 6) = 8
    assert per_pod_recommendation(1.0, 0.5, 4, 2, 0.1)[:2] == (8, Reason.METRIC_ABOVE_TARGET)


@pytest.mark.parametrize(
    ("total", "current", "expected", "reason"),
    [
        (40.0, 4, 8, Reason.METRIC_ABOVE_TARGET),
        (21.0, 4, 4, Reason.WITHIN_TOLERANCE),
        (12.0, 4, 3, Reason.METRIC_BELOW_TARGET),
        (0.0, 4, 0, Reason.METRIC_BELOW_TARGET),
        (3.0, 0, 1, Reason.METRIC_ABOVE_TARGET),
    ],
)
def test_external_average_value(total: float, current: int, expected: int, reason: Reason) -> None:
    assert external_recommendation(total, 5.0, current, 0.1)[:2] == (expected, reason)


def test_scale_down_stabilization_takes_the_max_over_300s() -> None:
    history = ((0.0, 10), (100.0, 6))
    (value, reason, _), kept = stabilize(4, 10, history, DEFAULT, now=200.0)
    assert (value, reason) == (10, Reason.STABILIZED)
    assert kept == ((0.0, 10), (100.0, 6), (200.0, 4))
    (value, _, _), kept = stabilize(4, 10, history, DEFAULT, now=300.0)  # t=0 is exactly 300 s old: out
    assert value == 6
    assert kept == ((100.0, 6), (300.0, 4))


def test_scale_up_is_not_stabilized_by_default_but_is_with_a_window() -> None:
    history = ((0.0, 5),)
    assert stabilize(10, 5, history, DEFAULT, now=15.0)[0][:2] == (10, Reason.STEADY)
    assert stabilize(10, 5, history, LLMD_BEHAVIOR, now=15.0)[0][:2] == (5, Reason.UP_STABILIZED)
    assert stabilize(10, 5, history, LLMD_BEHAVIOR, now=30.0)[0][:2] == (10, Reason.STEADY)


def test_default_scale_up_rate_is_max_of_4_pods_and_100_percent() -> None:
    assert rate_limit(50, 2, (), DEFAULT, now=0.0)[:2] == (6, Reason.RATE_LIMITED)  # 2 + 4 > 2 × 2
    assert rate_limit(50, 10, (), DEFAULT, now=0.0)[:2] == (20, Reason.RATE_LIMITED)  # 10 × 2 > 10 + 4
    assert rate_limit(5, 2, (), DEFAULT, now=0.0)[:2] == (5, Reason.STEADY)


def test_rate_is_measured_from_the_start_of_the_period() -> None:
    events = ((10.0, 4),)  # 2 -> 6 at t=10
    assert rate_limit(50, 6, events, DEFAULT, now=20.0)[0] == 6  # period start 2: limit 6, no more yet
    assert rate_limit(50, 6, events, DEFAULT, now=25.0)[0] == 12  # t=10 left the 15 s period


def test_default_scale_down_rate_allows_everything_llmd_allows_one_pod_per_120s() -> None:
    assert rate_limit(1, 10, (), DEFAULT, now=0.0)[:2] == (1, Reason.STEADY)
    assert rate_limit(5, 10, (), LLMD_BEHAVIOR, now=0.0)[:2] == (9, Reason.RATE_LIMITED)
    assert rate_limit(5, 9, ((0.0, -1),), LLMD_BEHAVIOR, now=60.0)[0] == 9
    assert rate_limit(5, 9, ((0.0, -1),), LLMD_BEHAVIOR, now=120.0)[0] == 8


def test_select_min_and_disabled() -> None:
    rules = ScalingRules(0.0, (RatePolicy("Pods", 4, 15.0), RatePolicy("Percent", 100, 15.0)), select="Min")
    assert rate_limit(50, 10, (), Behavior(scale_up=rules), now=0.0)[0] == 14
    off = ScalingRules(0.0, (RatePolicy("Pods", 4, 15.0),), select="Disabled")
    assert rate_limit(50, 10, (), Behavior(scale_up=off), now=0.0)[0] == 10
    assert rate_limit(1, 10, (), Behavior(scale_down=off), now=0.0)[0] == 10


def test_clamp() -> None:
    assert clamp(30, 1, 20)[:2] == (20, Reason.CLAMPED_MAX)
    assert clamp(0, 1, 20)[:2] == (1, Reason.CLAMPED_MIN)
    assert clamp(7, 1, 20)[:2] == (7, Reason.STEADY)


def test_chain_reports_the_last_stage_that_acted_and_records_events() -> None:
    raw = (50, Reason.METRIC_ABOVE_TARGET, "wanted 50")
    (value, reason, message), state = run_chain(raw, 2, HpaState(), DEFAULT, bounds=(1, 5), now=0.0)
    assert (value, reason) == (5, Reason.CLAMPED_MAX)  # rate limit gave 6, max replicas 5
    assert "wanted 50" in message and "rate limited" in message and "max replicas" in message
    assert state.events == ((0.0, 3),)
    assert state.recommendations == ((0.0, 50),)
    (value, reason, _), state = run_chain(
        (5, Reason.WITHIN_TOLERANCE, ""), 5, state, DEFAULT, bounds=(1, 5), now=10.0
    )
    assert (value, reason) == (5, Reason.WITHIN_TOLERANCE)
    assert state.events == ((0.0, 3),)


def test_chain_prunes_history_older_than_every_window() -> None:
    state = HpaState(recommendations=((0.0, 3),), events=((0.0, 1),))
    _, state = run_chain((3, Reason.STEADY, ""), 3, state, DEFAULT, bounds=(1, 9), now=1000.0)
    assert state.recommendations == ((1000.0, 3),)
    assert state.events == ()


def test_the_chain_says_whether_it_removed_replicas_after_a_time() -> None:
    chain = ChainState(events=((100.0, 3), (160.0, -2), (220.0, 1)))
    assert chain.shrank_since(100.0) and chain.shrank_since(159.0)
    assert not chain.shrank_since(160.0)  # the scale-down at 160 s is not after 160 s
    assert not ChainState().shrank_since(0.0)
