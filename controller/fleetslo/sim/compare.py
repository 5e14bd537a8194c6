"""``fleetslo simulate``'s work between parsing flags and printing: shape the trace, build the
scenario, run each requested policy on it, and lay the results out as one table.

Policies come from ``fleetslo.policy.registry`` by name; ``oracle`` is planned here first (it
needs the whole trace). Every policy runs on the same scenario from the same warm fleet.

Reading files and writing output is ``cli.py``'s job; this module takes values and returns values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rich.table import Table

from fleetslo.core.errors import ConfigError
from fleetslo.policy.base import Policy
from fleetslo.policy.fleetslo.physics import StepCost
from fleetslo.policy.registry import POLICIES, make_policy
from fleetslo.sim import oracle, sampled
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.result_types import SimResult
from fleetslo.sim.scenario import Scenario, initial_replicas, make_spec, run_policy
from fleetslo.sim.traces import rate_scale, time_scale, window
from fleetslo.sim.workload import Trace

#: progress(policy label, virtual seconds done, virtual seconds expected)
Progress = Callable[[str, float, float], None]


@dataclass(frozen=True, slots=True)
class SimulateOptions:
    """What the user asked for, already parsed into numbers (durations in seconds)."""

    policies: tuple[str, ...] = ("static",)
    ttft_s: float = 2.0
    tpot_s: float = 0.05
    quantile: float = 0.9
    min_replicas: int = 1
    max_replicas: int = 100
    replicas: int | None = None
    initial_replicas: int | None = None
    cold_start_s: float | None = None
    seed: int = 0
    rate_scale: float | None = None
    time_scale: float | None = None
    start_s: float | None = None
    duration_s: float | None = None
    scrape_interval_s: float = 15.0
    window_s: float = 60.0
    #: ``--policy-option KEY=VALUE`` pairs, handed to every policy (each takes those it knows).
    policy_options: tuple[tuple[str, Any], ...] = ()
    #: ``--sample M``: simulate one replica in M (``fleetslo.sim.sampled``); None: every replica.
    sample: int | None = None


def parse_policy_options(pairs: Sequence[str]) -> tuple[tuple[str, Any], ...]:
    """``["headroom=0.2", "trend_window_s=60"]`` into (key, number or text) pairs."""
    parsed: list[tuple[str, Any]] = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip() or not text.strip():
            raise ConfigError(f"--policy-option: expected KEY=VALUE, got {pair!r}")
        value: Any = text.strip()
        for convert in (int, float):
            try:
                value = convert(value)
                break
            except ValueError:
                continue
        if value in ("true", "false"):
            value = value == "true"
        parsed.append((key.strip(), value))
    return tuple(parsed)


def parse_policies(text: str) -> tuple[str, ...]:
    """``static,hpa-util,...`` into names, each checked against the registry."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise ConfigError("policy: no policy given")
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise ConfigError(f"policy: unknown {', '.join(unknown)}; valid policies: {', '.join(POLICIES)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"policy: a policy is listed twice in {text!r}")
    return names


def shape_trace(trace: Trace, options: SimulateOptions) -> Trace:
    """Cut, stretch and scale the trace, in that order (``--start/--duration``, ``--time-scale``,
    ``--rate-scale``), so start and duration refer to the original trace's clock."""
    if options.start_s is not None or options.duration_s is not None:
        trace = window(trace, options.start_s or 0.0, options.duration_s)
    if options.time_scale is not None:
        trace = time_scale(trace, options.time_scale)
    if options.rate_scale is not None:
        trace = rate_scale(trace, options.rate_scale, seed=options.seed)
    if not trace.requests:
        raise ConfigError(f"trace: no requests left after --start/--duration ({trace.source})")
    return trace


def build_scenario(
    trace: Trace, trace_name: str, profile: EngineProfile, options: SimulateOptions
) -> Scenario:
    """The scenario every policy runs; sizes the warm starting fleet unless it was given.

    With ``sample``, the scenario is the sampled one (every m-th request, bounds and a given warm
    fleet divided by m) and the warm fleet is sized on it."""
    spec = make_spec(
        profile,
        ttft_s=options.ttft_s,
        tpot_s=options.tpot_s,
        quantile=options.quantile,
        min_replicas=options.min_replicas,
        max_replicas=options.max_replicas,
        cold_start_s=options.cold_start_s,
    )
    scenario = Scenario(
        trace=trace,
        trace_name=trace_name,
        profile=profile,
        spec=spec,
        initial_replicas=options.initial_replicas or 1,
        seed=options.seed,
        window_s=options.window_s,
        scrape_interval_s=options.scrape_interval_s,
    )
    if options.sample is not None:
        scenario = sampled.sampled_scenario(scenario, options.sample)
    if options.initial_replicas is None:
        scenario = replace(scenario, initial_replicas=initial_replicas(scenario))
    return scenario


def run_all(
    scenario: Scenario, options: SimulateOptions, progress: Progress | None = None
) -> list[SimResult]:
    """One result per requested policy, in the order asked."""
    results = []
    for name in options.policies:
        policy = make_named_policy(name, scenario, options)

        def report(done: float, total: float, label: str = name) -> None:
            if progress is not None:
                progress(label, done, total)

        result = run_policy(scenario, policy, label=name, progress=report)
        results.append(result if options.sample is None else sampled.scaled_result(result, options.sample))
    return results


def make_named_policy(name: str, scenario: Scenario, options: SimulateOptions) -> Policy[Any]:
    """The registry's policy; the oracle's schedule is planned on the scenario first."""
    spec = scenario.spec
    if name == "oracle":
        return make_policy(name, spec, **oracle.oracle_options(oracle.plan(scenario)))
    replicas = scenario.initial_replicas
    if options.replicas is not None:
        replicas = (
            options.replicas
            if options.sample is None
            else sampled.sampled_replicas(options.replicas, options.sample)
        )
    return make_policy(
        name,
        spec,
        **{
            "replicas": replicas,
            "max_num_seqs": scenario.profile.max_num_seqs,
            # The simulated FleetSLO names its engine profile: fleetslo's model starts from it.
            "step_cost": step_cost(scenario.profile),
            **dict(options.policy_options),
        },
    )


def step_cost(profile: EngineProfile) -> StepCost:
    """An engine profile's step-time coefficients as the policy's ``StepCost`` (the policy layer
    never imports the simulator's profile type)."""
    st = profile.step_time
    return StepCost(
        overhead_s=st.overhead_s,
        per_seq_s=st.per_seq_s,
        per_prefill_token_s=st.per_prefill_token_s,
        per_kv_token_s=st.per_kv_token_s,
        per_attention_token2_s=st.per_attention_token2_s,
        max_num_seqs=profile.max_num_seqs,
        max_batched_tokens=profile.max_num_batched_tokens,
        source=f"engine profile {profile.name}",
    )


#: (heading, ``SimResult`` field, format)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("policy", "policy", "{}"),
    ("windows met", "window_attainment", "{:.1%}"),
    ("requests met", "request_attainment", "{:.1%}"),
    ("p90 TTFT s", "p90_ttft_s", "{:.3f}"),
    ("p90 TPOT ms", "p90_tpot_s", "ms"),
    ("replica-h", "replica_hours", "{:.2f}"),
    ("GPU-h", "gpu_hours", "{:.1f}"),
    ("$/M tokens", "cost_per_million_tokens", "{:.3f}"),
    ("scale events", "scale_events", "{}"),
    ("rejected", "rejected", "{}"),
    ("wall s", "wall_seconds", "{:.1f}"),
)


def summary_table(
    results: Sequence[object], title: str, columns: Sequence[tuple[str, str, str]] = COLUMNS
) -> Table:
    """One row per policy: attainment, latency, cost (``columns``: heading, field, format)."""
    table = Table(title=title)
    for heading, _, _ in columns:
        table.add_column(heading, justify="left" if heading == "policy" else "right")
    for result in results:
        table.add_row(*(cell(getattr(result, field), fmt) for _, field, fmt in columns))
    return table


def cell(value: Any, fmt: str) -> str:
    if value is None:
        return "—"
    if fmt == "ms":
        return f"{value * 1000:.1f}"
    return fmt.format(value)


def title_for(scenario: Scenario, sample: int | None = None) -> str:
    slo = scenario.spec.objectives
    warm = f"{scenario.initial_replicas} warm replicas"
    if sample is not None:
        warm = f"{scenario.initial_replicas * sample} warm replicas ({scenario.initial_replicas} simulated)"
    return (
        f"{scenario.trace_name} on {scenario.profile.name}: p{slo.ttft.quantile * 100:g} TTFT ≤ "
        f"{slo.ttft.threshold:g}s, TPOT ≤ {slo.tpot.threshold * 1000:g}ms, "
        f"{warm}, cold start {scenario.spec.replicas.cold_start:g}s"
    )
