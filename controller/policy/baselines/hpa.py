"""The Kubernetes HorizontalPodAutoscaler's replica arithmetic as small pure stages.

One implementation shared by every HPA-driven baseline (``hpa-util``, ``hpa-running``, ``keda-waiting``
and the HPA layer of ``llmd-slo``), following research/autoscalers.md §2.5 and the upstream controller
(kubernetes ``pkg/controller/podautoscaler``: ``replica_calculator.go``, ``horizontal.go``):

1. recommend — ``per_pod_recommendation`` (Resource / Pods metrics: ``ceil(ready × metric/target)``,
   starting pods counted at 0 % on scale-up) or ``external_recommendation`` (External AverageValue, as
   KEDA creates: ``ceil(total/target)``); no change while the ratio is within the tolerance (±0.1);
2. ``stabilize`` — the current count bounded below by the *min* recommendation of the scale-up window
   and above by the *max* recommendation of the scale-down window (default 0 s / 300 s);
3. ``rate_limit`` — scaling policies over their periods, measured from the replica count at the start
   of each period (default up: max(4 pods, 100 %) per 15 s; down: 100 % per 15 s);
4. ``clamp`` — min and max replicas.

Each stage returns ``(value, reason, message)``. Nothing here reads a clock or an Observation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from controller.model import Reason

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


@dataclass(frozen=True, slots=True)
class HpaState:
    """What the HPA controller remembers between syncs: past recommendations and its own scale events."""

    recommendations: tuple[tuple[float, int], ...] = ()
    #: (time, replicas added (> 0) or removed (< 0))
    events: tuple[tuple[float, int], ...] = ()


# --- 1. recommend -----------------------------------------------------------------------------


def within_tolerance(ratio: float, tolerance: float) -> bool:
    return abs(ratio - 1.0) <= tolerance


def per_pod_recommendation(
    average: float, target: float, ready: int, starting: int, tolerance: float
) -> Step:
    """A Resource or Pods metric averaged over the ready pods (``calcPlainMetricReplicas``).

    On scale-up, pods that are still starting count as 0 % of target, so a fleet already warming up
    the capacity it asked for does not ask again; on scale-down they are left out.
    """
    ratio = average / target
    shown = f"{average:.3g} per pod vs target {target:.3g}"
    if within_tolerance(ratio, tolerance):
        return ready + starting, Reason.WITHIN_TOLERANCE, f"{shown}: within tolerance"
    if ratio < 1.0:
        desired = math.ceil(ratio * ready)
        return desired, Reason.METRIC_BELOW_TARGET, f"{shown}: {desired} replicas"
    if starting:
        ratio = average * ready / (ready + starting) / target
        if ratio <= 1.0 + tolerance:
            return ready + starting, Reason.HOLD_REPLICAS_STARTING, f"{shown}: {starting} starting cover it"
    desired = math.ceil(ratio * (ready + starting))
    return desired, Reason.METRIC_ABOVE_TARGET, f"{shown}: {desired} replicas"


def external_recommendation(total: float, target_per_pod: float, current: int, tolerance: float) -> Step:
    """An External metric with an AverageValue target (``GetExternalPerPodMetricReplicas``)."""
    shown = f"{total:.3g} total vs {target_per_pod:.3g} per pod × {current}"
    if current > 0 and within_tolerance(total / (target_per_pod * current), tolerance):
        return current, Reason.WITHIN_TOLERANCE, f"{shown}: within tolerance"
    desired = math.ceil(total / target_per_pod)
    reason = Reason.METRIC_ABOVE_TARGET if desired > current else Reason.METRIC_BELOW_TARGET
    return desired, reason, f"{shown}: {desired} replicas"


# --- 2. stabilize -----------------------------------------------------------------------------


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


# --- 3. rate limit ----------------------------------------------------------------------------


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


# --- 4. clamp ---------------------------------------------------------------------------------


def clamp(desired: int, low: int, high: int) -> Step:
    if desired > high:
        return high, Reason.CLAMPED_MAX, f"capped at max replicas {high} (wanted {desired})"
    if desired < low:
        return low, Reason.CLAMPED_MIN, f"raised to min replicas {low} (wanted {desired})"
    return desired, Reason.STEADY, ""


# --- the chain --------------------------------------------------------------------------------


def run_chain(
    recommendation: Step,
    current: int,
    state: HpaState,
    behavior: Behavior,
    *,
    bounds: tuple[int, int],
    now: float,
) -> tuple[Step, HpaState]:
    """Stabilize → rate limit → clamp a recommendation; record the scale event if the count changes.

    The result's reason is that of the last stage that changed the value (the recommendation's own
    if none did), and its message strings together every stage that had something to say.
    """
    stabilized, history = stabilize(recommendation[0], current, state.recommendations, behavior, now)
    limited = rate_limit(stabilized[0], current, state.events, behavior, now)
    clamped = clamp(limited[0], *bounds)
    value, reason = clamped[0], recommendation[1]
    for stage in (stabilized, limited, clamped):
        if stage[1] is not Reason.STEADY:
            reason = stage[1]
    message = "; ".join(part for part in (recommendation[2], stabilized[2], limited[2], clamped[2]) if part)
    longest = max(
        (p.period_s for p in (*behavior.scale_up.policies, *behavior.scale_down.policies)), default=0.0
    )
    events = tuple((t, c) for t, c in state.events if t > now - longest)
    if value != current:
        events += ((now, value - current),)
    return (value, reason, message), replace(state, recommendations=history, events=events)
