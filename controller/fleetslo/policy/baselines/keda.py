"""``keda-waiting``: the vLLM production-stack KEDA recipe (research/autoscalers.md §2.7, §2.6).

The recipe's ScaledObject: Prometheus trigger ``vllm:num_requests_waiting``, ``threshold: '5'``
(KEDA's default ``metricType: AverageValue``), ``pollingInterval: 15``, ``cooldownPeriod: 360``. KEDA
hands the number to the HPA it owns as an External metric, so the HPA computes
``desired = ceil(total waiting / 5)`` (no change within ±10 % of ``5 × current``) and applies its default
behavior (300 s scale-down stabilization, up max(4 pods, 100 %) per 15 s). The cooldown only governs
scaling *to zero*: with ``replicas.min`` 0 KEDA itself deactivates the target after 360 s without
activity and activates it (0 → 1) on the first sign of traffic — the recipe's keepalive trigger on the
incoming request rate, modelled with ``Observation.request_rate``.

We sum the waiting gauge over pods. The recipe's unwrapped query returns one series per pod, which
KEDA rejects with more than one pod (§2.7); we model what its authors meant, not that bug.

A missing queue metric holds (KEDA's ``ignoreNullValues`` default is to error, i.e. no scaling). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetslo.core.errors import ConfigError
from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.baselines.decisions import current_replicas, decision, hold
from fleetslo.policy.baselines.hpa import Behavior, HpaState, Step, external_recommendation, run_chain


@dataclass(frozen=True, slots=True)
class KedaState:
    hpa: HpaState = field(default_factory=HpaState)
    #: When the trigger was last active; None before the first observation.
    last_active: float | None = None


@dataclass(frozen=True, slots=True)
class KedaWaitingPolicy:
    """KEDA ScaledObject → HPA on the fleet's waiting requests, ``threshold`` per replica."""

    name = "keda-waiting"
    interval = 15.0
    threshold: float = 5.0
    cooldown_s: float = 360.0
    behavior: Behavior = field(default_factory=Behavior)

    def __post_init__(self) -> None:
        if self.threshold <= 0:
            raise ConfigError(f"keda-waiting: threshold must be > 0 (got {self.threshold})")

    def initial_state(self, spec: FleetSLOSpec) -> KedaState:
        return KedaState()

    def decide(
        self, obs: Observation, state: KedaState, spec: FleetSLOSpec, now: float
    ) -> tuple[Decision, KedaState]:
        active = _active(obs)
        last_active = now if active or state.last_active is None else state.last_active
        state = KedaState(state.hpa, last_active)
        current = current_replicas(obs)
        if spec.replicas.min == 0:
            zero = self._scale_to_from_zero(obs, current, active, now - last_active)
            if zero is not None:
                return zero, state
        if obs.waiting is None:
            return hold(
                obs, Reason.HOLD_NO_DATA, "vllm:num_requests_waiting unavailable: holding", self.name
            ), state
        raw = external_recommendation(obs.waiting, self.threshold, current, self.behavior.tolerance)
        # the HPA KEDA creates never goes below 1: zero is KEDA's own decision (above)
        bounds = (max(1, spec.replicas.min), spec.replicas.max)
        step, hpa = run_chain(raw, current, state.hpa, self.behavior, bounds=bounds, now=now)
        return decision(step, obs, self.name), KedaState(hpa, last_active)

    def _scale_to_from_zero(
        self, obs: Observation, current: int, active: bool | None, idle_s: float
    ) -> Decision | None:
        """KEDA's activation (0 → 1) and deactivation after the cooldown (→ 0); None leaves it to the HPA."""
        if current == 0:
            if active:
                return decision(
                    Step(1, Reason.SCALE_UP_QUEUE, "trigger active: activating from zero"), obs, self.name
                )
            return decision(Step(0, Reason.STEADY, "idle at zero"), obs, self.name)
        if active is False and idle_s >= self.cooldown_s:
            message = f"inactive for {idle_s:.0f}s >= cooldown {self.cooldown_s:.0f}s: scaling to zero"
            return decision(Step(0, Reason.SCALE_DOWN_LOW_LOAD, message), obs, self.name)
        return None


def _active(obs: Observation) -> bool | None:
    """Is any trigger above its activation threshold (0)? None when neither signal is known."""
    signals = [v for v in (obs.waiting, obs.request_rate) if v is not None]
    return None if not signals else any(v > 0 for v in signals)
