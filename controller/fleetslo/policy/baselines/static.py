"""``static``: a fixed pool, the baseline every autoscaler must beat on cost (research/autoscalers.md §0:
the llm-d benchmark's static pool of 8 met 100 % where its autoscaler averaged 5.93 replicas).

It never reads the observation's signals, so it cannot react, and it never does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetslo.core.errors import ConfigError
from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.baselines.decisions import decision
from fleetslo.policy.stages import Step


@dataclass(frozen=True, slots=True)
class StaticPolicy:
    """Always ``replicas`` (default: the spec's ``replicas.min``)."""

    name = "static"
    interval = 60.0
    replicas: int | None = None

    def __post_init__(self) -> None:
        if self.replicas is not None and self.replicas < 0:
            raise ConfigError(f"static: replicas must be >= 0 (got {self.replicas})")

    def initial_state(self, spec: FleetSLOSpec) -> None:
        return None

    def decide(self, obs: Observation, state: None, spec: FleetSLOSpec, now: float) -> tuple[Decision, None]:
        size = spec.replicas.min if self.replicas is None else self.replicas
        return decision(Step(size, Reason.FIXED_SIZE, f"fixed at {size} replicas"), obs, self.name), None
