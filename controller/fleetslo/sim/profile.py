"""Engine profiles: what one simulated vLLM replica can do, with where each number came from.

A profile is data: scheduler limits (``max_num_seqs``, ``max_num_batched_tokens``), KV-cache
capacity, cold start, GPUs per replica, an assumed price, and the coefficients of the per-step
time model. Packaged profiles live in ``controller/fleetslo/sim/profiles/*.yaml``; each one says which of
its numbers were measured, which derived, and which assumed.

This module validates and loads profiles; it must not simulate anything. Packaged profiles are
read through ``importlib.resources`` (they are part of the package); user files are read by the
command line and handed in as mappings.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fleetslo.core.config import load
from fleetslo.core.errors import ConfigError

_PACKAGE, _FOLDER = "fleetslo.sim", "profiles"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StepTime(_Frozen):
    """Coefficients of the time one engine step takes, in seconds.

    ``t = overhead + per_seq·seqs + per_prefill_token·P + per_kv_token·Σctx_decode
    + per_attention_token2·Σ chunk·(context before the chunk + chunk/2)``: a fixed cost (weights
    read once per step, launch and sync), a per-sequence cost (sampling, bookkeeping), the
    compute of prefill tokens, the KV reads of decode attention, and the quadratic part of
    prefill attention.
    """

    overhead_s: float = Field(gt=0)
    per_seq_s: float = Field(ge=0)
    per_prefill_token_s: float = Field(gt=0)
    per_kv_token_s: float = Field(ge=0)
    per_attention_token2_s: float = Field(default=0.0, ge=0)
    #: Coefficient of variation of a lognormal factor drawn once per planned run of steps
    #: (expert imbalance, scheduling jitter). 0 makes the engine fully deterministic.
    noise_cv: float = Field(default=0.0, ge=0, le=1)


class Frontend(_Frozen):
    """The API server's time around the engine, as a client sees it (``fleetslo profile`` fits it).

    vLLM's own TTFT starts when the engine client gets the request, after the HTTP parsing, chat
    template and tokenizing, and ends before detokenizing and streaming; a client's includes both.
    The first token reaches the client ``per_request_s + per_prompt_token_s·prompt`` after the
    engine made it, and every later one ``per_output_token_s`` later than the engine's pace.
    """

    per_request_s: float = Field(default=0.0, ge=0)
    per_prompt_token_s: float = Field(default=0.0, ge=0)
    per_output_token_s: float = Field(default=0.0, ge=0)


class FrontendQueue(_Frozen):
    """The API server as a queue (``fleetslo.sim.frontend``): its CPU work per request, per prompt
    token and per output token, and the wall seconds per CPU second it got (``cpu_stretch``: 1 on
    an idle host). ``fleetslo profile`` measures them from the server process's CPU time."""

    per_request_cpu_s: float = Field(ge=0)
    per_prompt_token_cpu_s: float = Field(default=0.0, ge=0)
    per_output_token_cpu_s: float = Field(default=0.0, ge=0)
    cpu_stretch: float = Field(default=1.0, ge=1)
    #: The host's wake-up latency on a request's path (client, API server, engine core: each hop
    #: waits for a CPU on a busy host), lognormal per request: median and sigma. 0: none.
    host_delay_median_s: float = Field(default=0.0, ge=0)
    host_delay_sigma: float = Field(default=0.0, ge=0, le=3)


class Provenance(_Frozen):
    """Where the numbers came from: each list names profile keys with a one-line source."""

    measured: list[str] = []
    derived: list[str] = []
    assumed: list[str] = []
    sources: list[str] = []


class CalibrationWorkload(_Frozen):
    """The closed-loop benchmark the calibration points came from (``vllm bench serve``)."""

    input_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=1)
    num_prompts_per_concurrency: int = Field(ge=1)


class CalibrationPoint(_Frozen):
    """One published measurement the profile must reproduce."""

    concurrency: int = Field(ge=1)
    mean_ttft_s: float = Field(gt=0)
    mean_tpot_s: float = Field(gt=0)
    output_tokens_per_s: float = Field(gt=0)


class Calibration(_Frozen):
    workload: CalibrationWorkload
    points: list[CalibrationPoint]


class EngineProfile(_Frozen):
    """One replica of one model on one kind of hardware, as the simulator models it."""

    name: str = Field(min_length=1)
    description: str = ""
    model: str = Field(min_length=1)
    hardware: str = Field(min_length=1)
    gpus_per_replica: int = Field(ge=1, le=64)
    tensor_parallel: int = Field(ge=1, le=64)
    cold_start_s: float = Field(gt=0)
    max_num_seqs: int = Field(ge=1, le=65_536)
    max_num_batched_tokens: int = Field(ge=1)
    max_model_len: int = Field(ge=1)
    kv_capacity_tokens: int = Field(ge=1)
    gpu_hour_usd: float = Field(default=0.0, ge=0)
    step_time: StepTime
    #: The API server's share of client latency; ``None``: not modelled (the engine's clock only).
    frontend: Frontend | None = None
    #: The API server as a queue that grows with load; when set it replaces ``frontend``'s fixed
    #: delays in the simulator (``None``: today's fixed delays, or none).
    frontend_queue: FrontendQueue | None = None
    calibration: Calibration | None = None
    provenance: Provenance = Provenance()

    @model_validator(mode="after")
    def _consistent(self) -> EngineProfile:
        if self.max_num_batched_tokens < self.max_num_seqs:
            # Every running sequence needs one token of budget per decode step.
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                f"max_num_seqs ({self.max_num_seqs})"
            )
        return self

    @property
    def replica_hour_usd(self) -> float:
        return self.gpu_hour_usd * self.gpus_per_replica

    def with_overrides(self, **changes: Any) -> EngineProfile:
        """A copy with some top-level fields replaced (``cold_start_s``, ``max_num_seqs`` …)."""
        data = self.model_dump()
        data.update(changes)
        return profile_from_mapping(data, f"profile {self.name}")


def profile_from_mapping(data: Mapping[str, Any], source: str) -> EngineProfile:
    """Validate a profile; a ``ConfigError`` names the key, the value and the rule."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    return load(EngineProfile, data, source)


def builtin_profiles() -> tuple[str, ...]:
    """Names of the packaged profiles."""
    files = resources.files(_PACKAGE).joinpath(_FOLDER).iterdir()
    return tuple(sorted(f.name.removesuffix(".yaml") for f in files if f.name.endswith(".yaml")))


def builtin_profile(name: str) -> EngineProfile:
    """A packaged profile by name; a ``ConfigError`` listing the known names otherwise."""
    if name not in builtin_profiles():
        known = ", ".join(builtin_profiles())
        raise ConfigError(f"profile: unknown profile {name!r} (known: {known}; or give a YAML file)")
    text = resources.files(_PACKAGE).joinpath(_FOLDER, f"{name}.yaml").read_text(encoding="utf-8")
    return profile_from_mapping(yaml.safe_load(text), f"profile {name}")
