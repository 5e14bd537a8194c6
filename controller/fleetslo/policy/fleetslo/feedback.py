"""Breach feedback: what an observed p90 above its target does to a plan.

The sizing answers from the model; these answer from what the fleet shows. Without a model to
size by (the first window, no request mix yet, a model that cannot meet the targets at all),
``without_model`` scales up in proportion to the worst breach. With one, ``corrected`` adds
replicas in proportion when a p90 breaches although the sizing said enough, except where the
breach is a newcomer's flood rather than a lack of capacity (``replicas_joined``).

Pure: the plan, the observation, the policy's state and the spec in; a plan out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetslo.core.model import Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.fleetslo import signals
from fleetslo.policy.fleetslo.state import FleetSLOState

#: Feedback multiplies the ready replicas by the breach ratio, at most by this much per decision.
MAX_STEP = 2.0


@dataclass(frozen=True, slots=True)
class Plan:
    """A replica count, the reason and message behind it, and the load sized for."""

    replicas: int
    reason: Reason
    message: str
    #: The load sized for (tokens/s, before the margin), checked one horizon later.
    tokens: float | None = None


def without_model(obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, band: float, why: str) -> Plan:
    """Without a model to size by: scale up in proportion to the worst breach, otherwise hold.

    A TTFT breach alone in a window replicas joined holds, as in ``corrected``: it is the
    newcomers' flood, and multiplying the ready fleet by it (ServeGen's reasoning traffic, a mix
    the model briefly called unreachable: 53 ready x 1.81 -> the maximum of 96, where 15 served
    the next window within both targets) buys replicas that would flood the same way. A breach
    with TPOT in it is multiplied onto the replicas that served the window, as in ``corrected``.
    """
    current = obs.replicas.provisioned
    pressure = signals.breach(obs, spec, band)
    if pressure is None:
        return Plan(current, Reason.STEADY, f"{why}; targets met: hold at {current}")
    if newcomers_flood(state, obs, spec, band):
        return Plan(current, Reason.STEADY, f"{why}; p90 at {pressure:.2f}x while replicas joined: hold")
    served = _served(state, obs)
    need = max(current, math.ceil(served * min(pressure, MAX_STEP)))
    on = "" if served == obs.replicas.ready else f" on the {served} ready before replicas joined"
    return Plan(need, Reason.SCALE_UP_SLO_BREACH, f"{why}; p90 at {pressure:.2f}x target{on}: {need}")


def corrected(
    plan: Plan,
    obs: Observation,
    state: FleetSLOState,
    spec: FleetSLOSpec,
    band: float,
    *,
    held_to: tuple[float, float] | None = None,
    level: bool = False,
) -> Plan:
    """A p90 above target although the sizing says enough: add replicas in proportion.

    ``held_to``: the p90 TTFT and TPOT (seconds, as observed) the sizing planned for where it held
    a target an idle replica misses or nearly misses above it (``sizing.reachable``): a p90 under
    that is what the sizing planned, not a breach it missed. Read against the target itself, such
    p90s bought replicas that no longer buy latency (drawn 131: 29 -> 40 and 19 -> 29 on p90s
    1.1-1.35x a 4 s TTFT target that the sizing held to about 5.3 s).

    In proportion to the *ready* replicas, with the starting ones credited: the breach lasts
    through their cold start, and multiplying again every decision until they serve would
    compound one breach into a fleet many times too large. In a window replicas joined, the fewest
    ready within it: those served the window the p90s describe.

    Not for TTFT alone while replicas joined within the window (and none left): a least-loaded
    router sends a new replica every arrival until it holds as many as the others, and their
    prefills queue there, so p90 TTFT spikes for that window on a fleet that just grew; more
    replicas would repeat it.

    A breach the proportion already covers holds the fleet, and ``level`` (no queue building,
    no forecast above the arrivals) lets go of the starting replicas beyond what the sizing and
    the breach ask, never of a ready one: drawn 248's prior model ordered 86 on a flat load, the
    model checked 30 seconds later asked 38-55, and the 31 ready breaching 1 s by 1.00-1.07x
    held all 86 five more minutes until they joined (78.3 replica-hours -> 68.4, the same
    attainment). On a rising load they stay: they are the margin the load grows into (drawn 42,
    let go at 42 requests/s in a burst that rose to 88-102, lost a window).
    """
    current = obs.replicas.provisioned
    spec = spec if held_to is None else _judged(spec, *held_to)
    pressure = signals.breach(obs, spec, band)
    if pressure is None or plan.replicas > current:
        return plan
    joined = newcomers_flood(state, obs, spec, band)
    served = _served(state, obs)
    need = current if joined else math.ceil(served * min(pressure, MAX_STEP))
    if need <= current:
        earlier = served < obs.replicas.ready
        if plan.replicas == current and not joined and not earlier:
            return plan
        why = (
            f"p90 at {pressure:.2f}x while replicas joined" if joined
            else f"p90 at {pressure:.2f}x on the {served} ready before replicas joined" if earlier
            else "breach"
        )  # fmt: skip
        reason = plan.reason if plan.replicas == current else Reason.STEADY
        keep = max(plan.replicas, need, obs.replicas.ready)
        if level and keep < current:
            let_go = f"the ready kept, {current - keep} starting let go"
            return Plan(keep, reason, f"{plan.message}; {why} on a level load: {let_go}")
        return Plan(current, reason, f"{plan.message}; {why}: hold")
    message = f"p90 at {pressure:.2f}x its target although sized for it: {current} -> {need}"
    return Plan(need, Reason.SCALE_UP_SLO_BREACH, message)


def _served(state: FleetSLOState, obs: Observation) -> int:
    """The ready replicas behind the window's p90s: where replicas joined within it, the fewest
    ready in it (after a spike's cold start, 4 ready replicas' backlog read 12x on the 24 now
    ready, and the ready count times that bought 48 where 7 served: drawn 94)."""
    if not replicas_joined(state, obs) or state.ready_before is None:
        return obs.replicas.ready
    # the count before the last join, or fewer: replicas may have joined more than once
    during = [int(r) for t, r in state.ready_history if t >= obs.at - obs.window]
    return min([state.ready_before, *during])


def _judged(spec: FleetSLOSpec, ttft: float, tpot: float) -> FleetSLOSpec:
    """``spec`` with each threshold raised to what the sizing held it to, never lowered."""
    o = spec.objectives
    ttft_o = o.ttft.model_copy(update={"threshold": max(o.ttft.threshold, ttft)})
    tpot_o = o.tpot.model_copy(update={"threshold": max(o.tpot.threshold, tpot)})
    return spec.model_copy(update={"objectives": o.model_copy(update={"ttft": ttft_o, "tpot": tpot_o})})


def newcomers_flood(state: FleetSLOState, obs: Observation, spec: FleetSLOSpec, band: float) -> bool:
    """A breach of TTFT alone (TPOT within ``band`` of its target) in a window replicas joined:
    the router's flood onto the newcomers, which more replicas would repeat, not missing capacity."""
    return replicas_joined(state, obs) and signals.tpot_breach(obs, spec, band) is None


def replicas_joined(state: FleetSLOState, obs: Observation) -> bool:
    """The ready count last changed within the window, and grew: not by a scale-down, not by
    replicas lost (a crash is capacity gone, and its breach is the feedback's to answer)."""
    since, before = state.ready_since, state.ready_before
    if since is None or before is None or since[0] <= before or obs.at - since[1] >= obs.window:
        return False
    return not state.chain.shrank_since(obs.at - obs.window)
