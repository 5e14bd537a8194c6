"""Builders shared by the simulator tests: small profiles, specs, and scripted policies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.sim.profile import EngineProfile, profile_from_mapping
from fleetslo.sim.scenario import make_spec


def tiny_profile(**changes: Any) -> EngineProfile:
    """A small, round-numbered engine: 10 ms steps, 10K prefill tokens/s, room for everything."""
    data: dict[str, Any] = {
        "name": "tiny",
        "model": "tiny-model",
        "hardware": "test",
        "gpus_per_replica": 2,
        "tensor_parallel": 2,
        "cold_start_s": 60.0,
        "max_num_seqs": 64,
        "max_num_batched_tokens": 4096,
        "max_model_len": 65536,
        "kv_capacity_tokens": 1_000_000,
        "gpu_hour_usd": 1.5,
        "step_time": {
            "overhead_s": 0.010,
            "per_seq_s": 0.0002,
            "per_prefill_token_s": 0.0001,
            "per_kv_token_s": 1e-8,
        },
    }
    step = changes.pop("step_time", {})
    data["step_time"] = {**data["step_time"], **step}
    data.update(changes)
    return profile_from_mapping(data, "tiny profile")


def spec_for(profile: EngineProfile, **changes: Any) -> FleetSLOSpec:
    return make_spec(profile, **{"max_replicas": 50, **changes})


@dataclass
class ScriptedPolicy:
    """Follows a script of (from_s, replicas, batch_limit) steps; records what it observed."""

    script: Sequence[tuple[float, int, int | None]]
    name: str = "scripted"
    interval: float = 15.0

    def __post_init__(self) -> None:
        self.seen: list[Observation] = []

    def initial_state(self, spec: FleetSLOSpec) -> None:
        return None

    def decide(self, obs: Observation, state: None, spec: FleetSLOSpec, now: float) -> tuple[Decision, None]:
        self.seen.append(obs)
        step = [s for s in self.script if s[0] <= now][-1]
        return Decision(step[1], step[2], Reason.SCHEDULED, f"script step at {step[0]:g}s"), None
