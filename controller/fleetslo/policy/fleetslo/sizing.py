"""The numbers behind one sizing of the fleet, and the reason and message they give the decision."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fleetslo.core.model import Observation, Reason
from fleetslo.policy.fleetslo.perf_model import Prediction


@dataclass(frozen=True, slots=True)
class Sizing:
    need: int
    current: int
    arrival: float
    forecast_load: float
    instant_load: float
    #: What the model predicts for ``need`` replicas at the sized load (headroom included).
    prediction: Prediction
    tokens_per_request: float
    #: Where a backlog's sizing was capped (``backlog.useful``): the ready replicas holding it.
    queue_held_by: int | None = None

    def why(self) -> tuple[Reason, str]:
        load = max(self.forecast_load, self.instant_load)
        p = self.prediction
        basis = (
            f"arrivals {self.arrival:.2f}/s, {self.forecast_load:.2f}/s expected in one cold start; "
            f"sized for {load:.2f}/s ({self.tokens_per_request:,.0f} tokens per request): {self.need} "
            f"replicas predict p90 TTFT {p.ttft_p90:.2f}s, TPOT {p.tpot_p90 * 1000:.0f}ms"
        )
        if self.need > self.current:
            if self.instant_load > self.forecast_load:
                held = self.queue_held_by
                cap = "" if held is None else f"; the queue stays on the {held} ready replicas holding it"
                return Reason.SCALE_UP_QUEUE, f"{basis} (instant load outruns the forecast{cap})"
            return Reason.SCALE_UP_FORECAST, basis
        if self.need < self.current:
            return Reason.SCALE_DOWN_LOW_LOAD, basis
        return Reason.STEADY, f"{basis}: hold"


def smallest(ok: Callable[[int], bool], at: Callable[[int], Prediction], high: int) -> tuple[int, Prediction]:
    """The smallest n in [1, high] with ``ok(n)`` (monotone), by doubling then bisection; ``high``
    when none is."""
    low, n = 1, 1
    while n < high and not ok(n):
        low, n = n + 1, min(high, n * 2)
    while low < n:
        mid = (low + n) // 2
        low, n = (low, mid) if ok(mid) else (mid + 1, n)
    return n, at(n)


def reachable(idle: Prediction, ttft: float, tpot: float, relaxed: float) -> tuple[float, float, str | None]:
    """The targets (p90 TTFT, TPOT) to size for, given what an ``idle`` replica gives by the model,
    and why one was relaxed (``None`` when neither was).

    A target that even an idle replica misses by the model is out of reach at any size: the
    prompts' own prefill outlasts a TTFT target (Mooncake's long prompts at 5 s, a mix read long
    while a reasoning fleet fills), or the engine's step a TPOT target. No count of replicas
    changes that, and sizing for it would buy the maximum; giving up sizing altogether left a
    filling reasoning fleet on breach feedback for four minutes (TPOT 50-53 ms, nine windows
    lost). So the other target is sized for, and the unreachable one is held to ``relaxed`` times
    what an idle replica gives (the policy passes 1 + its headroom): replicas still keep its
    queue short. Both out of reach: both returned as they are, and no size meets them.

    A target an idle replica meets with less than that to spare is held the same way: replicas
    buy only the queue's share of a p90, and a target just above an idle replica's leaves the
    queue almost nothing, so the count that meets it grows without bound as the room closes (a
    4 s TTFT over Mooncake's prompts, an idle replica at 3.1 s by the model and 1.24x that
    measured: 192 replicas wanted at 1.5 requests/s where 26 had served, and the fleet at its
    maximum of 96 met no more windows than at 29). Holding it to ``relaxed`` times the idle p90
    makes the sizing continuous where the target crosses what an idle replica gives.
    """

    def why(target: str, idle_p90: float, sized: float, unit: str) -> str:
        near = "" if idle_p90 > sized else f", within x{relaxed:g} of the {_shown(sized, unit)} sized for"
        idle_says = f"p90 {target} {_shown(idle_p90, unit)} on an idle replica by the model"
        return f"{idle_says}{near}: {target} held to x{relaxed:g} that"

    if idle.ttft_p90 > ttft and idle.tpot_p90 > tpot:
        return ttft, tpot, None
    reasons = []
    if idle.ttft_p90 * relaxed > ttft:
        reasons.append(why("TTFT", idle.ttft_p90, ttft, "s"))
        ttft = idle.ttft_p90 * relaxed
    if idle.tpot_p90 * relaxed > tpot:
        reasons.append(why("TPOT", idle.tpot_p90, tpot, "ms"))
        tpot = idle.tpot_p90 * relaxed
    return ttft, tpot, "; ".join(reasons) or None


def _shown(seconds: float, unit: str) -> str:
    return f"{seconds:.2f}s" if unit == "s" else f"{seconds * 1000:.0f}ms"


def kv_floor(obs: Observation, arrival: float, load: float, limit: float) -> int:
    """Replicas keeping each one's KV cache under ``limit`` (a share) at ``load`` (KV ∝ load)."""
    usage = obs.kv_cache_usage
    if usage is None or usage <= 0 or arrival <= 0 or not math.isfinite(usage):
        return 1
    return max(1, math.ceil(obs.replicas.ready * usage * load / arrival / limit))
