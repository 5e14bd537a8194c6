"""The batch limit: the engine's maximum, except while new replicas start under overload.

Pure: the observation, the policy's state and the spec in; a limit out.
"""

from __future__ import annotations

from fleetslo.core.model import Observation
from fleetslo.core.spec import BatchActuator, FleetSLOSpec
from fleetslo.policy.fleetslo.state import FleetSLOState


def batch_limit(obs: Observation, state: FleetSLOState, spec: FleetSLOSpec) -> int | None:
    """The engine's maximum, unless the ready replicas would break TPOT while others start and
    TTFT can absorb the queue until they serve: then the largest limit that protects TPOT.

    A limit below the batch the load needs cuts throughput, so requests queue: worth it only
    for the cold start of replicas already asked for, and only if the wait it adds (the backlog
    built meanwhile, served by the limited fleet) keeps p90 TTFT inside its target. The backlog
    builds until the first of them serves (``until_ready``), not for a whole cold start: read
    as a whole one, the limit was declined at drawn 34's step (x1.4 with 3-minute cold starts,
    p90 TPOT 107 ms against 100 while replicas already asked for were a minute from serving).
    With no replica starting a limit would be a standing cap, which is never worth it.
    """
    if spec.batch_limit.actuator == BatchActuator.NONE:
        return None
    arrival = obs.request_rate  # as the sizing reads it (``FleetSLOPolicy._plan``)
    top, bottom = spec.batch_limit.max, spec.batch_limit.min
    ready = obs.replicas.ready
    if state.mix is None or not arrival or ready <= 0 or obs.replicas.starting == 0:
        return top
    mix, model, q = state.mix, state.model, spec.objectives.tpot.quantile
    ttft, tpot = spec.objectives.ttft.threshold, spec.objectives.tpot.threshold
    rate = arrival / ready
    if model.predict(rate, mix, top, q).tpot_p90 <= tpot:
        return top

    def protects(limit: int) -> bool:
        return model.predict(rate, mix, limit, q).tpot_p90 <= tpot

    if not protects(bottom):
        return top
    lo, hi = bottom, top  # protects(lo), not protects(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if protects(mid) else (lo, mid)
    limited = model.predict(rate, mix, lo, q)
    if not limited.limited:
        # The cap carries the load; what it costs is the wait for a free slot, in the model's TTFT.
        return lo if limited.ttft_p90 <= ttft else top
    served = limited.served
    backlog = max(0.0, rate - served) * until_ready(state, spec, obs.at)
    unlimited_ttft = model.predict(min(rate, served), mix, top, q).ttft_p90
    return lo if unlimited_ttft + backlog / max(served, 1e-9) <= ttft else top


def until_ready(state: FleetSLOState, spec: FleetSLOSpec, now: float) -> float:
    """Seconds until the first replica still starting serves: a cold start after the oldest
    scale-up the chain remembers within the last cold start. A whole cold start where it
    remembers none (replicas replacing lost ones, or scale-ups older than the events it keeps):
    the longest the queue can build."""
    cold = spec.replicas.cold_start
    ups = [t for t, change in state.chain.events if change > 0 and now - cold < t <= now]
    return min(ups) + cold - now if ups else cold
