"""``llmd-slo``: llm-d's "SLO-aware" KEDA recipe (research/autoscalers.md §2.8), the one published loop
that scales on p90 TTFT and TPOT against their SLOs.

* Signal: ``s_raw = max(P90 TTFT / S_ttft, P90 TPOT / S_tpot)``, clamped at 2.0 (near the knee one
  sample can read 10–90× the SLO), smoothed as ``avg_over_time[45s]`` of the samples taken every
  decision. The quantile is the spec's objective quantile (0.9 in the recipe). A missing quantile
  counts as 0 (the recipe maps NaN to 0); both missing holds — unless the fleet saw no requests at all
  (``request_rate == 0``), which is the recipe's "no traffic → signal 0 → scale down".
* Law, with n provisioned, r ready and credit c = r/n for replicas still warming:
  ``s > 0.55``: ``d = n + ceil(n·(s·c/0.55 − 1))`` (never below n); ``s < 0.40``:
  ``d = n − floor(n·(1 − s/0.40))`` on the uncredited signal; otherwise hold.
* HPA layer: ``d`` is an External metric with AverageValue 1, so the HPA tolerance (±10 %) applies,
  then the recipe's behavior: scale-up max(4 pods, 100 %) per 60 s with a 30 s window, scale-down
  1 pod per 120 s with a 180 s window.

No I/O; time comes in as ``now``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.baselines.decisions import current_replicas, decision, hold
from fleetslo.policy.baselines.hpa import (
    Behavior,
    HpaState,
    RatePolicy,
    ScalingRules,
    Step,
    run_chain,
    within_tolerance,
)

LLMD_BEHAVIOR = Behavior(
    scale_up=ScalingRules(30.0, (RatePolicy("Pods", 4, 60.0), RatePolicy("Percent", 100, 60.0))),
    scale_down=ScalingRules(180.0, (RatePolicy("Pods", 1, 120.0),)),
)


@dataclass(frozen=True, slots=True)
class LlmdState:
    #: (time, clamped signal) of the samples inside the smoothing window
    samples: tuple[tuple[float, float], ...] = ()
    hpa: HpaState = field(default_factory=HpaState)


@dataclass(frozen=True, slots=True)
class LlmdSloPolicy:
    """The llm-d SLO-aware law on top of an HPA with the recipe's behavior."""

    name = "llmd-slo"
    interval = 15.0
    scale_up_above: float = 0.55
    scale_down_below: float = 0.40
    signal_cap: float = 2.0
    smoothing_s: float = 45.0
    behavior: Behavior = field(default_factory=lambda: LLMD_BEHAVIOR)

    def initial_state(self, spec: FleetSLOSpec) -> LlmdState:
        return LlmdState()

    def decide(
        self, obs: Observation, state: LlmdState, spec: FleetSLOSpec, now: float
    ) -> tuple[Decision, LlmdState]:
        raw_signal = slo_signal(obs, spec)
        if raw_signal is None:
            return hold(obs, Reason.HOLD_NO_DATA, "no p90 TTFT or TPOT yet: holding", self.name), state
        recent = tuple((t, v) for t, v in state.samples if t > now - self.smoothing_s)
        samples = (*recent, (now, min(raw_signal, self.signal_cap)))
        signal = sum(v for _, v in samples) / len(samples)
        current = current_replicas(obs)
        raw = self.law(signal, current, obs.replicas.ready)
        if raw[0] != current and current > 0 and within_tolerance(raw[0] / current, self.behavior.tolerance):
            raw = Step(current, Reason.WITHIN_TOLERANCE, f"{raw[2]}; within HPA tolerance")
        bounds = (spec.replicas.min, spec.replicas.max)
        step, hpa = run_chain(raw, current, state.hpa, self.behavior, bounds=bounds, now=now)
        return decision(step, obs, self.name), LlmdState(samples, hpa)

    def law(self, signal: float, provisioned: int, ready: int) -> Step:
        """The recipe's scaling formula (module docstring) on the smoothed signal."""
        n = provisioned
        shown = f"SLO signal {signal:.2f}"
        if signal > self.scale_up_above:
            credit = ready / n if n else 1.0
            desired = n + math.ceil(n * (signal * credit / self.scale_up_above - 1))
            if desired <= n:
                return Step(
                    n,
                    Reason.HOLD_REPLICAS_STARTING,
                    f"{shown} > {self.scale_up_above}, {n - ready} warming",
                )
            return Step(
                desired, Reason.SCALE_UP_SLO_BREACH, f"{shown} > {self.scale_up_above}: {desired} replicas"
            )
        if signal < self.scale_down_below:
            desired = n - math.floor(n * (1 - signal / self.scale_down_below))
            return Step(
                desired,
                Reason.SCALE_DOWN_LOW_LOAD,
                f"{shown} < {self.scale_down_below}: {desired} replicas",
            )
        return Step(n, Reason.STEADY, f"{shown} inside [{self.scale_down_below}, {self.scale_up_above}]")


def slo_signal(obs: Observation, spec: FleetSLOSpec) -> float | None:
    """``max(TTFT_q / S_ttft, TPOT_q / S_tpot)``; None when unknown (see the module docstring)."""
    ttft, tpot = spec.objectives.ttft, spec.objectives.tpot
    ratios = [
        value / objective.threshold
        for value, objective in ((obs.ttft.at(ttft.quantile), ttft), (obs.tpot.at(tpot.quantile), tpot))
        if value is not None
    ]
    if ratios:
        return max(ratios)
    return 0.0 if obs.request_rate == 0 else None
