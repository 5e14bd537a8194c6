"""Limit stages shared by every replica policy: stabilize, rate-limit, clamp, cool down.

Each stage takes a proposed replica count and returns ``(value, reason, message)``: the value after
the stage, the ``Reason`` it acted for (``Reason.STEADY`` when it let the value through) and a
sentence for people. The arithmetic follows the Kubernetes HorizontalPodAutoscaler (research/
autoscalers.md §2.5; ``horizontal.go``) so that ``fleetslo`` and the HPA-driven baselines are limited
by one piece of code, and each stage is tested alone. Pure: time comes in as ``now``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from fleetslo.core.model import Reason


class Step(NamedTuple):
    """A replica count after a stage, why (``Reason.STEADY`` when the stage let it through), and a
    sentence for people."""

    replicas: int
    reason: Reason
    message: str


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
    step = Step(value, Reason.STEADY, "")
    if value > desired:
        step = Step(
            value, Reason.STABILIZED, f"scale-down stabilized at {value} (highest recommendation in window)"
        )
    elif value < desired:
        step = Step(
            value, Reason.UP_STABILIZED, f"scale-up stabilized at {value} (lowest recommendation in window)"
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
            return Step(limit, Reason.RATE_LIMITED, f"scale-up rate limited to {limit} (wanted {desired})")
    elif desired < current:
        limit = min(current, _down_limit(current, events, behavior.scale_down, now))
        if desired < limit:
            return Step(limit, Reason.RATE_LIMITED, f"scale-down rate limited to {limit} (wanted {desired})")
    return Step(desired, Reason.STEADY, "")


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
        return Step(high, Reason.CLAMPED_MAX, f"capped at max replicas {high} (wanted {desired})")
    if desired < low:
        return Step(low, Reason.CLAMPED_MIN, f"raised to min replicas {low} (wanted {desired})")
    return Step(desired, Reason.STEADY, "")


# --- cool down ------------------------------------------------------------------------------


def cooldown(desired: int, current: int, last_change_at: float | None, cooldown_s: float, now: float) -> Step:
    """No scale-down sooner than ``cooldown_s`` after the last change in either direction.

    A scale-up is never held back (an SLO at risk outranks churn); a scale-down right after a
    change would act on data that does not yet show the change's effect.
    """
    if desired >= current or last_change_at is None or now - last_change_at >= cooldown_s:
        return Step(desired, Reason.STEADY, "")
    left = cooldown_s - (now - last_change_at)
    return Step(current, Reason.COOLDOWN, f"scale-down to {desired} waits {left:.0f}s more (cooldown)")


# --- the chain ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChainState:
    """What the chain remembers between decisions: past recommendations, its own scale events
    (time, replicas added (> 0) or removed (< 0)) and when the count last changed."""

    recommendations: tuple[tuple[float, int], ...] = ()
    events: tuple[tuple[float, int], ...] = ()
    last_change_at: float | None = None

    def shrank_since(self, start: float) -> bool:
        """Whether the chain removed replicas after ``start`` (``run_chain`` keeps events for its
        longest rate-limit period or ``keep_events_s``: an older ``start`` is not answered)."""
        return any(change < 0 and t > start for t, change in self.events)


@dataclass(frozen=True, slots=True)
class _Context:
    current: int
    state: ChainState
    behavior: Behavior
    bounds: tuple[int, int]
    cooldown_s: float
    now: float


Stage = Callable[[int, _Context], tuple[Step, tuple[tuple[float, int], ...] | None]]


def _stabilize_stage(desired: int, c: _Context) -> tuple[Step, tuple[tuple[float, int], ...] | None]:
    return stabilize(desired, c.current, c.state.recommendations, c.behavior, c.now)


def _rate_limit_stage(desired: int, c: _Context) -> tuple[Step, tuple[tuple[float, int], ...] | None]:
    return rate_limit(desired, c.current, c.state.events, c.behavior, c.now), None


def _clamp_stage(desired: int, c: _Context) -> tuple[Step, tuple[tuple[float, int], ...] | None]:
    return clamp(desired, *c.bounds), None


def _cooldown_stage(desired: int, c: _Context) -> tuple[Step, tuple[tuple[float, int], ...] | None]:
    return cooldown(desired, c.current, c.state.last_change_at, c.cooldown_s, c.now), None


#: The one limit chain every replica policy runs, in this order (the HPA's: ``horizontal.go``
#: stabilizes, then rate-limits, then clamps; the cooldown, 0 s for the HPA-driven baselines, last).
CHAIN: tuple[tuple[str, Stage], ...] = (
    ("stabilize", _stabilize_stage),
    ("rate_limit", _rate_limit_stage),
    ("clamp", _clamp_stage),
    ("cooldown", _cooldown_stage),
)


def run_chain(
    recommendation: Step | tuple[int, Reason, str],
    current: int,
    state: ChainState,
    behavior: Behavior,
    *,
    bounds: tuple[int, int],
    now: float,
    cooldown_s: float = 0.0,
    keep_events_s: float = 0.0,
) -> tuple[Step, ChainState]:
    """Run a recommendation through ``CHAIN``; record the scale event if the count changes.

    The result's reason is that of the last stage that changed the value (the recommendation's own
    if none did), and its message strings together every stage that had something to say. Events
    are kept for the longest rate-limit period, or ``keep_events_s`` if longer.
    """
    context = _Context(current, state, behavior, bounds, cooldown_s, now)
    value, reason, messages = recommendation[0], recommendation[1], [recommendation[2]]
    history = state.recommendations
    for _, stage in CHAIN:
        step, recorded = stage(value, context)
        if recorded is not None:
            history = recorded
        value = step.replicas
        if step.reason is not Reason.STEADY:
            reason = step.reason
        messages.append(step.message)
    longest = max(
        (p.period_s for p in (*behavior.scale_up.policies, *behavior.scale_down.policies)), default=0.0
    )
    events = tuple((t, c) for t, c in state.events if t > now - max(longest, keep_events_s))
    after = replace(state, recommendations=history, events=events)
    if value != current:
        after = replace(after, events=(*events, (now, value - current)), last_change_at=now)
    return Step(value, reason, "; ".join(m for m in messages if m)), after
