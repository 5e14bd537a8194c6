"""The demo's results: the live run judged by the simulator's judge, beside two simulations of it.

``live_result`` turns what the demo recorded — every client's request with simulated timestamps, the
fleet samples and scale events of the control loop, the replica time the local fleet paid for — into
the simulator's ``Run`` and judges it with ``build_result``, so the report, the JSON and the verdict
use one schema and one set of rules. ``simulated_results`` replays the same scenario in the simulator:
the ``fleetslo`` policy (what the live run should agree with) and a static fleet sized for the
average (the verdict's baseline). ``verdict`` is the one line printed at the end.

Judging and arithmetic only: no processes, no files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fleetslo.policy.baselines import StaticPolicy
from fleetslo.policy.registry import make_policy
from fleetslo.sim.demo.scenario import DemoOptions, average_sized
from fleetslo.sim.records import SimRequest
from fleetslo.sim.result import build_result
from fleetslo.sim.runner import FleetSample, Run, ScaleEvent
from fleetslo.sim.scenario import Scenario, run_policy

LIVE, SIMULATED = "fleetslo · live demo", "fleetslo · simulated"


@dataclass(frozen=True, slots=True)
class LiveRecord:
    """Everything the live run leaves behind, in simulated seconds."""

    requests: list[SimRequest]
    samples: list[FleetSample]
    events: list[ScaleEvent]
    end: float
    replica_seconds: float
    preemptions: int
    wall_seconds: float
    interrupted: bool = False


def live_result(record: LiveRecord, scenario: Scenario, options: DemoOptions) -> dict[str, Any]:
    """The live run as a simulator result (``fleetslo.sim.result`` schema)."""
    rejected = sum(1 for r in record.requests if r.rejected)
    in_flight = sum(1 for r in record.requests if r.finish is None and not r.rejected)
    run = Run(
        requests=record.requests,
        samples=record.samples,
        events=record.events,
        end=record.end,
        replica_seconds=record.replica_seconds,
        rejected=rejected,
        preemptions=record.preemptions,
        in_flight=in_flight,
        wall_seconds=record.wall_seconds,
    )
    return build_result(
        run,
        policy=LIVE,
        trace=scenario.trace_name,
        profile=scenario.profile,
        spec=scenario.spec,
        extra=_extra(scenario, options, interrupted=record.interrupted),
    )


def simulated_results(scenario: Scenario, options: DemoOptions) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The scenario replayed in the simulator: ``fleetslo``, and the static fleet sized for the average."""
    fleetslo = run_policy(scenario, make_policy("fleetslo", scenario.spec), label=SIMULATED)
    fleetslo.update(_extra(scenario, options))
    size = average_sized(scenario)
    static = run_policy(
        replace(scenario, initial_replicas=size),
        StaticPolicy(size),
        label=f"static ×{size} (sized for the average) · simulated",
    )
    static.update(_extra(scenario, options))
    return fleetslo, static, size


def _extra(scenario: Scenario, options: DemoOptions, *, interrupted: bool = False) -> dict[str, Any]:
    extra = {
        "initial_replicas": scenario.initial_replicas,
        "cold_start_s": scenario.spec.replicas.cold_start,
        "seed": scenario.seed,
        "speedup": options.speedup,
    }
    if interrupted:
        extra["interrupted"] = True
    return extra


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def verdict(live: dict[str, Any], static: dict[str, Any], size: int) -> str:
    """One line: SLO attainment and replica-hours live, and what the static fleet would have done."""

    def held(r: dict[str, Any]) -> str:
        return (
            f"{_share(r['window_attainment'])} of minutes ({_share(r['request_attainment'])} of requests) "
            f"for {r['replica_hours']:.2f} replica-hours"
        )

    static_fleet = f"a static fleet of {size} sized for the average"
    return f"fleetslo held the SLO in {held(live)}; {static_fleet}: {held(static)}."


def agreement(live: dict[str, Any], simulated: dict[str, Any]) -> str:
    """How the live run compares with its simulation, for the end of the output."""
    keys = ("window_attainment", "request_attainment", "replica_hours")
    parts = [f"{k.replace('_', ' ')} {_fmt(live[k])} live vs {_fmt(simulated[k])} simulated" for k in keys]
    return "; ".join(parts)


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def title(scenario: Scenario, options: DemoOptions) -> str:
    slo = scenario.spec.objectives
    return (
        f"fleetslo demo: {scenario.trace_name} on {scenario.profile.name}, "
        f"p90 TTFT ≤ {slo.ttft.threshold:g}s, TPOT ≤ {slo.tpot.threshold * 1000:g}ms, "
        f"{options.speedup:g}× real time"
    )
