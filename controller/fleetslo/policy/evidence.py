"""The evidence every scale-down needs, whichever policy asked for it.

DESIGN's rule is that missing, stale or partial data holds and never scales down. The ``fleetslo``
policy follows it inside ``decide``; the baselines reproduce other autoscalers as those projects
define them, and some of them act on data 15 minutes old or on 1 replica of 8 reporting. The
policies stay faithful to those tools; the controller applies ``guard_scale_down`` to every
decision before acting (``control.loop``, which the simulator runs too), so nothing fleetslo runs
or simulates removes replicas on a picture it cannot trust. Scale-ups pass: a partial picture may
still show too little capacity. Pure.
"""

from __future__ import annotations

from dataclasses import replace

from fleetslo.core.model import Decision, Observation, Reason

#: Data older than this cannot justify removing replicas (the ``fleetslo`` policy's default too).
STALE_AFTER_S = 120.0


def scale_down_blocker(obs: Observation, stale_after_s: float = STALE_AFTER_S) -> tuple[Reason, str] | None:
    """Why ``obs`` cannot justify a scale-down, or ``None`` when it is whole and fresh."""
    if obs.replicas_reporting <= 0 or obs.data_age is None:
        return Reason.HOLD_NO_DATA, "no replica reported data"
    if obs.data_age > stale_after_s:
        return Reason.HOLD_STALE_DATA, f"newest data is {obs.data_age:.0f}s old (limit {stale_after_s:.0f}s)"
    if obs.replicas_reporting < obs.replicas.ready:
        return (
            Reason.HOLD_PARTIAL_DATA,
            f"{obs.replicas_reporting} of {obs.replicas.ready} ready replicas reported",
        )
    return None


def guard_scale_down(decision: Decision, obs: Observation, current: int) -> Decision:
    """``decision``, unless it removes replicas on data ``scale_down_blocker`` refuses: then a hold."""
    if decision.replicas >= current:
        return decision
    blocker = scale_down_blocker(obs)
    if blocker is None:
        return decision
    reason, why = blocker
    held = f"{why}: the scale-down to {decision.replicas} waits for whole, fresh data ({decision.message})"
    return replace(decision, replicas=current, reason=reason, message=held)
