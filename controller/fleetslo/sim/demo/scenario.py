"""What the demo replays and against which objectives: options in, a shaped trace and a ``Scenario`` out.

The demo runs in simulated time compressed ``speedup`` times: ``duration`` of wall time covers
``duration × speedup`` simulated seconds (the *span*). The default traffic is a real trace squeezed
into that span — the whole Azure 2023 code trace (57 minutes) time-compressed, rate-scaled to an
average of ``rps`` requests per simulated second, with a step spike of ``spike``× from 40 % to 60 %
of the span spliced in. ``--scenario spike`` replaces the trace with Poisson arrivals and log-normal
lengths around the same step.

The ``Scenario`` is exactly what ``fleetslo simulate`` builds for the same settings (the spec from
``make_spec``, SLO-aligned buckets, the warm fleet sized by ``initial_replicas``), so the live run
and the simulation can be compared number for number. ``average_sized`` is the static baseline of
the verdict: the smallest fixed fleet that holds the targets under steady traffic at the trace's
average rate. Values only: files are read and written by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import FleetSLO, FleetSLOSpec
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.scenario import Scenario, initial_replicas, make_spec
from fleetslo.sim.traces import (
    lognormal_tokens,
    poisson,
    rate_scale,
    resampled_tokens,
    splice_spike,
    step_spike,
    time_scale,
)
from fleetslo.sim.workload import Request, Trace

DEFAULT_TRACE = "traces/azure2023/AzureLLMInferenceTrace_code.csv"
DEFAULT_PROFILE = "mi300x-llama3.1-8b-fp8-tp1"
SCENARIOS = ("spike",)
ENGINES = ("sim", "vllm")
#: The spike covers this share of the span, starting at this share.
SPIKE_AT, SPIKE_LENGTH = 0.4, 0.2
TARGET_NAME = "demo"


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``fleetslo demo`` was asked for, parsed into numbers (durations in seconds)."""

    trace: str | None = DEFAULT_TRACE
    scenario: str | None = None
    duration_s: float = 120.0
    speedup: float = 10.0
    rps: float = 2.5
    spike: float = 2.5
    profile: str = DEFAULT_PROFILE
    ttft_s: float = 2.0
    tpot_s: float = 0.05
    min_replicas: int = 1
    max_replicas: int = 8
    cold_start_s: float | None = None
    seed: int = 0
    report: str = "fleetslo-demo-report.html"
    prometheus: bool = False
    #: ``--log-level``: ``debug`` puts everything in ``demo.log`` and the replicas' logs.
    log_level: str = "info"
    #: ``sim``: simulated replicas (``fleetslo sim-server``); ``vllm``: real vLLM replicas (``demo.vllm``).
    engine: str = "sim"
    #: The vLLM environment's interpreter (``--engine vllm``; default: the ``.venv-vllm`` of the checkout).
    vllm_python: str | None = None

    @property
    def span_s(self) -> float:
        """Simulated seconds of traffic."""
        return self.duration_s * self.speedup

    def check(self) -> DemoOptions:
        """``ConfigError`` naming the option for a value the demo cannot run with."""
        checks = [
            ("--duration", self.duration_s, self.duration_s >= 10, "at least 10s"),
            ("--speedup", self.speedup, 0 < self.speedup <= 100, "between 0 and 100"),
            ("--rps", self.rps, self.rps > 0, "above 0"),
            ("--spike", self.spike, self.spike >= 1, "at least 1 (1: no spike)"),
            ("--max-replicas", self.max_replicas, 1 <= self.max_replicas <= 32, "between 1 and 32"),
            (
                "--min-replicas",
                self.min_replicas,
                1 <= self.min_replicas <= self.max_replicas,
                "between 1 and --max-replicas",
            ),
        ]
        for flag, value, ok, allowed in checks:
            if not ok:
                raise ConfigError(f"{flag}: must be {allowed} (got {value:g})")
        if self.engine not in ENGINES:
            raise ConfigError(f"--engine: unknown {self.engine!r} (known: {', '.join(ENGINES)})")
        if self.engine == "vllm" and self.speedup != 1:
            raise ConfigError(f"--speedup: --engine vllm runs in real time, so 1 (got {self.speedup:g})")
        if self.scenario is not None and self.scenario not in SCENARIOS:
            raise ConfigError(f"--scenario: unknown {self.scenario!r} (known: {', '.join(SCENARIOS)})")
        return self


def shape_trace(base: Trace | None, options: DemoOptions) -> Trace:
    """The traffic of the demo: ``base`` squeezed into the span, scaled, spiked (or the synthetic one)."""
    span = options.span_s
    at, length = SPIKE_AT * span, SPIKE_LENGTH * span
    if base is None:
        tokens = lognormal_tokens(1024, 64, sigma=0.8, max_tokens=8192)
        synthetic = step_spike(
            options.rps,
            span,
            tokens,
            spike_at_s=at,
            spike_duration_s=length,
            factor=options.spike,
            seed=options.seed,
        )
        return shorten(synthetic) if options.engine == "vllm" else synthetic
    if len(base) < 2 or base.duration_s <= 0:
        raise ConfigError(f"trace: {base.source} needs at least two requests at different times")
    trace = time_scale(base, span / base.duration_s)
    trace = rate_scale(trace, options.rps * span / len(trace), seed=options.seed)
    if options.spike > 1:
        trace = splice_spike(trace, at, options.spike, length, seed=options.seed)
    return shorten(trace) if options.engine == "vllm" else trace


def trace_name(options: DemoOptions) -> str:
    source = Path(options.trace).name if options.scenario is None and options.trace else "synthetic step"
    spike = f", spike ×{options.spike:g}" if options.spike > 1 else ""
    return f"{source} in {options.span_s / 60:.3g} min, {options.rps:g} req/s{spike}"


def build_scenario(trace: Trace, profile: EngineProfile, options: DemoOptions) -> Scenario:
    """The scenario ``fleetslo simulate`` would build for these settings, warm fleet sized the same way."""
    spec = make_spec(
        profile,
        ttft_s=options.ttft_s,
        tpot_s=options.tpot_s,
        min_replicas=options.min_replicas,
        max_replicas=options.max_replicas,
        cold_start_s=options.cold_start_s,
        name=TARGET_NAME,
    )
    scenario = Scenario(trace, trace_name(options), profile, spec, 1, seed=options.seed)
    return replace(scenario, initial_replicas=initial_replicas(scenario))


def average_sized(scenario: Scenario) -> int:
    """Replicas of a static fleet sized for the average: enough for steady (Poisson) traffic at the
    trace's mean rate with its own request lengths, every minute, over the whole span."""
    trace = scenario.trace
    span = max(trace.duration_s, 60.0)
    steady = poisson(len(trace) / span, span, resampled_tokens(trace), seed=scenario.seed)
    return initial_replicas(replace(scenario, trace=steady), horizon_s=span)


def fleet_slo(spec: FleetSLOSpec) -> FleetSLO:
    """The FleetSLO document the demo's controller runs with (the scenario's spec under a name)."""
    document = {"apiVersion": "fleetslo/v1", "kind": "FleetSLO", "metadata": {"name": spec.target.name}}
    return FleetSLO.model_validate({**document, "spec": spec})


def trace_csv(trace: Trace) -> str:
    """The trace as a plain CSV that ``fleetslo simulate --trace`` reads back exactly."""
    rows = [f"{r.arrival_s!r},{r.input_tokens},{r.output_tokens}" for r in trace.requests]
    return "arrival_s,input_tokens,output_tokens\n" + "\n".join(rows) + "\n"


#: ``--engine vllm``: the trace's prompts are this many times shorter and its answers at most this
#: long, for a CPU replica of a tiny model (a 2048-token context, a few thousand tokens/s of prefill).
PROMPT_SHRINK, MAX_OUTPUT_TOKENS, MAX_MODEL_LEN = 8, 64, 2048


def shorten(trace: Trace) -> Trace:
    """The trace with its prompts ``PROMPT_SHRINK`` times shorter and answers capped, so that each
    request fits the tiny model's context and a CPU replica's pace (arrivals unchanged)."""
    requests = []
    for r in trace.requests:
        output = max(1, min(r.output_tokens, MAX_OUTPUT_TOKENS))
        prompt = max(1, min(-(-r.input_tokens // PROMPT_SHRINK), MAX_MODEL_LEN - output))
        requests.append(Request(r.arrival_s, prompt, output))
    return Trace(tuple(requests), f"{trace.source}, prompts /{PROMPT_SHRINK}, answers <= {MAX_OUTPUT_TOKENS}")
