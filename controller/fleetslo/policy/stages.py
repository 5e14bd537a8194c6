"""Limit stages shared by every replica policy: stabilize, rate-limit, clamp, cool down.

Each stage takes a proposed replica count and returns ``(value, reason, message)``: the value after
the stage, the ``Reason`` it acted for (``Reason.STEADY`` when it let the value through) and a
sentence for people. The arithmetic follows the Kubernetes HorizontalPodAutoscaler (research/
autoscalers.md §2.5; ``horizontal.go``) so that ``fleetslo`` and the HPA-driven baselines are limited
by one piece of code, and each stage is tested alone. Pure: time comes in as ``now``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from fleetslo.core.model import Reason

#: (replica count, why, a sentence for people)
Step = tuple[int, Reason, str]

DEFAULT_TOLERANCE = 0.1


@dataclass(frozen=True, slots=True)
class RatePolicy:
    """``behavior.scale{Up,Down}.policies[]``: at most ``value`` pods or percent per ``period_s``."""

    kind: Literal["Pods", "Percent"]
    value: int
    period_s: float


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """``behavior.scaleUp`` or ``behavior.scaleDown``."""

    stabilization_s: float
    policies: tuple[RatePolicy, ...]
    select: Literal["Max", "Min", "Disabled"] = "Max"


@dataclass(frozen=True, slots=True)
class Behavior:
    """An HPA's ``behavior`` with the Kubernetes defaults, plus the tolerance (``--horizontal-pod-
    autoscaler-tolerance``, or per direction since v1.33)."""

    scale_up: ScalingRules = ScalingRules(
        0.0, (RatePolicy("Pods", 4, 15.0), RatePolicy("Percent", 100, 15.0))
    )
    scale_down: ScalingRules = ScalingRules(300.0, (RatePolicy("Percent", 100, 15.0),))
    tolerance: float = DEFAULT_TOLERANCE


# --- stabilize -----------------------------------------------------------------------------


def stabilize(
    desired: int, current: int, recommendations: tuple[tuple[float, int], ...], behavior: Behavior, now: float
) -> tuple[Step, tuple[tuple[float, int], ...]]:
    """``stabilizeRecommendationWithBehaviors``; also returns the history with ``desired`` recorded."""
    up_cutoff = now - behavior.scale_up.stabilization_s
    down_cutoff = now - behavior.scale_down.stabilization_s
    up = min([desired, *(n for t, n in recommendations if t > up_cutoff)])
    down = max([desired, *(n for t, n in recommendations if t > down_cutoff)])
    value = min(max(current, up), down)
    step: Step = (value, Reason.STEADY, "")
    if value > desired:
        step = (
            value,
            Reason.STABILIZED,
            f"scale-down stabilized at {value} (highest recommendation in window)",
        )
    elif value < desired:
        step = (
            value,
            Reason.UP_STABILIZED,
            f"scale-up stabilized at {value} (lowest recommendation in window)",
        )
    oldest = min(up_cutoff, down_cutoff)
    kept = (*((t, n) for t, n in recommendations if t > oldest), (now, desired))
    return step, kept


# --- rate limit ----------------------------------------------------------------------------


def rate_limit(
    desired: int, current: int, events: tuple[tuple[float, int], ...], behavior: Behavior, now: float
) -> Step:
    """``convertDesiredReplicasWithBehaviorRate`` without the min/max part (that is ``clamp``)."""
    if desired > current:
        limit = max(current, _up_limit(current, events, behavior.scale_up, now))
        if desired > limit:
            return limit, Reason.RATE_LIMITED, f"scale-up rate limited to {limit} (wanted {desired})"
    elif desired < current:
        limit = min(current, _down_limit(current, events, behavior.scale_down, now))
        if desired < limit:
            return limit, Reason.RATE_LIMITED, f"scale-down rate limited to {limit} (wanted {desired})"
    return desired, Reason.STEADY, ""


def _period_start(current: int, events: tuple[tuple[float, int], ...], period_s: float, now: float) -> int:
    """Replicas at the start of the period: current minus what was added plus what was removed since."""
    return current - sum(change for t, change in events if t > now - period_s)


def _up_limit(current: int, events: tuple[tuple[float, int], ...], rules: ScalingRules, now: float) -> int:
    if rules.select == "Disabled":
        return current
    proposals = []
    for policy in rules.policies:
        start = _period_start(current, events, policy.period_s, now)
        if policy.kind == "Pods":
            proposals.append(start + policy.value)
        else:  # rounded up, or a small deployment could never grow
            proposals.append(math.ceil(start * (1 + policy.value / 100)))
    return min(proposals) if rules.select == "Min" else max(proposals)


def _down_limit(current: int, events: tuple[tuple[float, int], ...], rules: ScalingRules, now: float) -> int:
    if rules.select == "Disabled":
        return current
    proposals = []
    for policy in rules.policies:
        start = _period_start(current, events, policy.period_s, now)
        if policy.kind == "Pods":
            proposals.append(start - policy.value)
        else:
            proposals.append(int(start * (1 - policy.value / 100)))
    # "Max" = the policy allowing the biggest change, which for scale-down is the lowest floor
    return max(proposals) if rules.select == "Min" else min(proposals)


# --- clamp ---------------------------------------------------------------------------------


def clamp(desired: int, low: int, high: int) -> Step:
    if desired > high:
        return high, Reason.CLAMPED_MAX, f"capped at max replicas {high} (wanted {desired})"
    if desired < low:
        return low, Reason.CLAMPED_MIN, f"raised to min replicas {low} (wanted {desired})"
    return desired, Reason.STEADY, ""


# --- cool down ------------------------------------------------------------------------------


def cooldown(desired: int, current: int, last_change_at: float | None, cooldown_s: float, now: float) -> Step:
    """No scale-down sooner than ``cooldown_s`` after the last change in either direction.

    A scale-up is never held back (an SLO at risk outranks churn); a scale-down right after a
    change would act on data that does not yet show the change's effect.
    """
    if desired >= current or last_change_at is None or now - last_change_at >= cooldown_s:
        return desired, Reason.STEADY, ""
    left = cooldown_s - (now - last_change_at)
    return current, Reason.COOLDOWN, f"scale-down to {desired} waits {left:.0f}s more (cooldown)"
