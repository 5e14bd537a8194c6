"""The Kubernetes HorizontalPodAutoscaler's replica arithmetic as small pure stages.

One implementation shared by every HPA-driven baseline (``hpa-util``, ``hpa-running``, ``keda-waiting``
and the HPA layer of ``llmd-slo``), following research/autoscalers.md §2.5 and the upstream controller
(kubernetes ``pkg/controller/podautoscaler``: ``replica_calculator.go``, ``horizontal.go``):

1. recommend — ``per_pod_recommendation`` (Resource / Pods metrics: ``ceil(ready × metric/target)``,
   starting pods counted at 0 % on scale-up) or ``external_recommendation`` (External AverageValue, as
   KEDA creates: ``ceil(total/target)``); no change while the ratio is within the tolerance (±0.1);
The limit stages (2–4) and the one chain that runs them (``run_chain``, its order as data in
``CHAIN``) live in ``fleetslo.policy.stages``, shared with the ``fleetslo`` policy:

2. ``stabilize`` — the current count bounded below by the *min* recommendation of the scale-up window
   and above by the *max* recommendation of the scale-down window (default 0 s / 300 s);
3. ``rate_limit`` — scaling policies over their periods, measured from the replica count at the start
   of each period (default up: max(4 pods, 100 %) per 15 s; down: 100 % per 15 s);
4. ``clamp`` — min and max replicas.

Each stage returns ``(value, reason, message)``. Nothing here reads a clock or an Observation.
"""

from __future__ import annotations

import math

from fleetslo.core.model import Reason
from fleetslo.policy.stages import (
    DEFAULT_TOLERANCE,
    Behavior,
    ChainState,
    RatePolicy,
    ScalingRules,
    Step,
    clamp,
    rate_limit,
    run_chain,
    stabilize,
)

__all__ = [
    "DEFAULT_TOLERANCE", "Behavior", "HpaState", "RatePolicy", "ScalingRules", "Step", "clamp",
    "external_recommendation", "per_pod_recommendation", "rate_limit", "run_chain", "stabilize",
    "within_tolerance",
]  # fmt: skip


#: What the HPA controller remembers between syncs: the shared chain's state.
HpaState = ChainState


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
        return Step(ready + starting, Reason.WITHIN_TOLERANCE, f"{shown}: within tolerance")
    if ratio < 1.0:
        desired = math.ceil(ratio * ready)
        return Step(desired, Reason.METRIC_BELOW_TARGET, f"{shown}: {desired} replicas")
    if starting:
        ratio = average * ready / (ready + starting) / target
        if ratio <= 1.0 + tolerance:
            return Step(
                ready + starting, Reason.HOLD_REPLICAS_STARTING, f"{shown}: {starting} starting cover it"
            )
    desired = math.ceil(ratio * (ready + starting))
    return Step(desired, Reason.METRIC_ABOVE_TARGET, f"{shown}: {desired} replicas")


def external_recommendation(total: float, target_per_pod: float, current: int, tolerance: float) -> Step:
    """An External metric with an AverageValue target (``GetExternalPerPodMetricReplicas``)."""
    shown = f"{total:.3g} total vs {target_per_pod:.3g} per pod × {current}"
    if current > 0 and within_tolerance(total / (target_per_pod * current), tolerance):
        return Step(current, Reason.WITHIN_TOLERANCE, f"{shown}: within tolerance")
    desired = math.ceil(total / target_per_pod)
    reason = Reason.METRIC_ABOVE_TARGET if desired > current else Reason.METRIC_BELOW_TARGET
    return Step(desired, reason, f"{shown}: {desired} replicas")
