"""Builders shared by the simulator tests: small profiles, specs, and scripted policies."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.fleetslo.mix import RequestMix, banded
from fleetslo.sim.profile import EngineProfile, profile_from_mapping
from fleetslo.sim.scenario import make_spec
from fleetslo.sim.workload import Request

#: Length points (prompts, outputs) the model-against-engine tests draw requests from: 16k-token
#: prompts with short answers, and a chat mix.
Lengths = tuple[tuple[int, ...], tuple[int, ...]]
LONG: Lengths = ((4000, 8000, 12000, 16000, 20000, 24000, 28000, 32000, 12000, 16000),
                 (50, 100, 150, 200, 250, 300, 400, 500, 150, 200))  # fmt: skip
CHAT: Lengths = ((200, 400, 600, 800, 1000, 1200, 1500, 2000, 3000, 300),
                 (50, 100, 150, 200, 250, 300, 400, 500, 600, 150))  # fmt: skip
#: Long prompts with the short answers of a retrieval or agent workload (Mooncake's shape).
SHORT_ANSWERS: Lengths = (LONG[0], (2, 5, 9, 18, 31, 53, 86, 139, 234, 463))


def poisson_requests(
    lengths: Lengths, rate: float, n: int, seed: int = 1, *, continuous: bool = False
) -> list[Request]:
    """``n`` Poisson arrivals at ``rate``, each length drawn from the points; ``continuous``: each
    prompt from the continuous distribution whose mid-quantiles the points are (lognormal between
    them, as ``RequestMix.prompt_band`` reads a p90 TTFT), as real prompts are, not the points alone."""
    prompts, outputs = lengths
    if continuous:
        prompts = tuple(round(x) for x in banded(sorted(prompts), 1000))
    rng = random.Random(seed)
    t, requests = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        requests.append(Request(t, rng.choice(prompts), rng.choice(outputs)))
    return requests


def mix_of(lengths: Lengths) -> RequestMix:
    """The policy's request mix at exactly these length points."""
    return RequestMix(tuple(map(float, lengths[0])), tuple(map(float, lengths[1])))


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
