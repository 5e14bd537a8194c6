"""``hpa-util`` and ``hpa-running``: a stock Kubernetes HPA on one per-pod metric (research/autoscalers.md
§2.5), with its defaults — 15 s sync, ±10 % tolerance, 300 s scale-down stabilization, scale-up
max(4 pods, 100 %) per 15 s, scale-down 100 % per 15 s.

* ``hpa-util`` targets 80 % mean GPU utilization (a Resource-style utilization target). GPU busy time
  saturates near 100 % long before latency does (bentoml/Yatai#500), which is exactly why it is a
  baseline.
* ``hpa-running`` targets running requests per pod (a Pods metric, ``vllm:num_requests_running``) at
  ``target_fraction`` × ``max_num_seqs``, default 0.8 × the spec's ``batch_limit.max`` (or the engine's
  ``max_num_seqs`` when the simulator passes it). The running count cannot exceed ``max_num_seqs``,
  so the ratio tops out at 1/0.8 = 1.25 and each sync can grow the fleet by at most 25 % — the
  "gauge capped near its target" failure (defilantech/LLMKube#482), reproduced faithfully.

A missing metric holds the current count (the HPA's ``FailedGetResourceMetric``: no scaling). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetslo.core.errors import ConfigError
from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.baselines.decisions import current_replicas, decision, hold
from fleetslo.policy.baselines.hpa import Behavior, HpaState, per_pod_recommendation, run_chain

HPA_SYNC_S = 15.0


def _decide_per_pod(
    policy: str,
    average: float | None,
    target: float,
    behavior: Behavior,
    *,
    obs: Observation,
    state: HpaState,
    spec: FleetSLOSpec,
    now: float,
) -> tuple[Decision, HpaState]:
    if average is None or obs.replicas.ready == 0:
        return hold(obs, Reason.HOLD_NO_DATA, "metric unavailable: holding", policy), state
    raw = per_pod_recommendation(
        average, target, obs.replicas.ready, obs.replicas.starting, behavior.tolerance
    )
    bounds = (spec.replicas.min, spec.replicas.max)
    step, state = run_chain(raw, current_replicas(obs), state, behavior, bounds=bounds, now=now)
    return decision(step, obs, policy), state


@dataclass(frozen=True, slots=True)
class HpaUtilizationPolicy:
    """HPA on mean GPU utilization (``Observation.gpu_utilization``, a 0–1 busy fraction)."""

    name = "hpa-util"
    interval = HPA_SYNC_S
    target: float = 0.8
    behavior: Behavior = field(default_factory=Behavior)

    def __post_init__(self) -> None:
        if not 0 < self.target <= 1:
            raise ConfigError(f"hpa-util: target utilization must be in (0, 1] (got {self.target})")

    def initial_state(self, spec: FleetSLOSpec) -> HpaState:
        return HpaState()

    def decide(
        self, obs: Observation, state: HpaState, spec: FleetSLOSpec, now: float
    ) -> tuple[Decision, HpaState]:
        return _decide_per_pod(
            self.name,
            obs.gpu_utilization,
            self.target,
            self.behavior,
            obs=obs,
            state=state,
            spec=spec,
            now=now,
        )


@dataclass(frozen=True, slots=True)
class HpaRunningPolicy:
    """HPA on running requests per ready pod (``Observation.running`` is the sum over ready replicas)."""

    name = "hpa-running"
    interval = HPA_SYNC_S
    max_num_seqs: int | None = None
    target_fraction: float = 0.8
    behavior: Behavior = field(default_factory=Behavior)

    def __post_init__(self) -> None:
        if not 0 < self.target_fraction <= 1:
            raise ConfigError(f"hpa-running: target_fraction must be in (0, 1] (got {self.target_fraction})")
        if self.max_num_seqs is not None and self.max_num_seqs < 1:
            raise ConfigError(f"hpa-running: max_num_seqs must be >= 1 (got {self.max_num_seqs})")

    def target(self, spec: FleetSLOSpec) -> float:
        """Running requests per pod the HPA aims for."""
        seqs = spec.batch_limit.max if self.max_num_seqs is None else self.max_num_seqs
        return self.target_fraction * seqs

    def initial_state(self, spec: FleetSLOSpec) -> HpaState:
        return HpaState()

    def decide(
        self, obs: Observation, state: HpaState, spec: FleetSLOSpec, now: float
    ) -> tuple[Decision, HpaState]:
        ready = obs.replicas.ready
        average = None if obs.running is None or ready == 0 else obs.running / ready
        target = self.target(spec)
        return _decide_per_pod(
            self.name, average, target, self.behavior, obs=obs, state=state, spec=spec, now=now
        )
