"""The demo's results: the live run judged by the simulator's judge, beside two simulations of it.

``live_result`` turns what the demo recorded — every client's request with simulated timestamps, the
fleet samples and scale events of the control loop, the replica time the local fleet paid for — into
the simulator's ``Run`` and judges it with ``build_result``, so the report, the JSON and the verdict
use one schema and one set of rules. ``simulated_results`` replays the same scenario in the simulator:
the ``fleetslo`` policy (what the live run should agree with) and the best of the baselines a team
would otherwise run, each tuned over a few settings (``BASELINES``: KEDA on waiting requests, the
HPA on running requests, a static fleet sized for the average) — the verdict's comparison.

A run stopped early (Ctrl-C) is judged on the part that ran: the requests that arrived before the
first one that was never sent, against the simulation of that same part of the trace
(``judged_scenario``), and every line says it was interrupted. ``verdict`` is the one line printed
at the end. Judging and arithmetic only: no processes, no files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fleetslo.policy.base import Policy
from fleetslo.policy.baselines import StaticPolicy
from fleetslo.policy.registry import make_policy
from fleetslo.sim.compare import SimulateOptions, make_named_policy
from fleetslo.sim.demo.lag import Behind
from fleetslo.sim.demo.scenario import DemoOptions, average_sized
from fleetslo.sim.records import SimRequest
from fleetslo.sim.result import build_result
from fleetslo.sim.result_types import BaselineTried, RunStop, ScaleEventRecord, SimResult
from fleetslo.sim.runner import FleetSample, Run
from fleetslo.sim.scenario import Scenario, run_policy
from fleetslo.sim.traces import window

LIVE, SIMULATED = "fleetslo · live demo", "fleetslo · simulated"
#: ``LiveRecord.stopped_by`` when the host fell behind the speed-up (the run is not judged).
HOST = "host"


#: The baselines tried in the simulator on the same scenario: (label, policy) makers. The tuned
#: settings are those a team that load-tested would pick among (KEDA's recipe uses 5 waiting).
def _keda(threshold: float) -> Callable[[Scenario], Policy[Any]]:
    return lambda sc: make_policy("keda-waiting", sc.spec, waiting_threshold=threshold)


def _hpa_running(per_replica: int) -> Callable[[Scenario], Policy[Any]]:
    return lambda sc: make_policy("hpa-running", sc.spec, max_num_seqs=per_replica, target_fraction=1.0)


BASELINES: tuple[tuple[str, Callable[[Scenario], Policy[Any]]], ...] = (
    *((f"keda-waiting (threshold {t:g})", _keda(t)) for t in (1.0, 2.0, 5.0)),
    *((f"hpa-running ({n} running per replica)", _hpa_running(n)) for n in (4, 8, 16)),
)


@dataclass(frozen=True, slots=True)
class LiveRecord:
    """Everything the live run leaves behind, in simulated seconds."""

    requests: list[SimRequest]
    samples: list[FleetSample]
    events: list[ScaleEventRecord]
    end: float
    replica_seconds: float
    preemptions: int
    wall_seconds: float
    #: "SIGINT", "SIGTERM" or ``HOST`` when the replay ended early; ``None`` when it ran to the end.
    stopped_by: str | None = None
    #: Simulated seconds of the trace that were replayed, when it ended early (``None``: all of it).
    cut: float | None = None
    #: ``HostCheck.summary()``: whether the host kept up, and its worst lag.
    host: dict[str, Any] = field(default_factory=dict)
    behind: Behind | None = None

    @property
    def interrupted(self) -> bool:
        return self.stopped_by in ("SIGINT", "SIGTERM")


def judged_scenario(scenario: Scenario, record: LiveRecord) -> Scenario:
    """The scenario the live run is judged against: all of it, or the part before ``cut``."""
    if record.cut is None:
        return scenario
    return replace(
        scenario,
        trace=window(scenario.trace, 0.0, max(record.cut, 1e-9)),
        trace_name=f"{scenario.trace_name}, interrupted at {_clock(record.cut)}",
    )


def live_result(record: LiveRecord, scenario: Scenario, options: DemoOptions) -> SimResult:
    """The live run as a simulator result (``fleetslo.sim.result``), over ``scenario``'s requests
    (``judged_scenario``: the part that ran)."""
    requests = record.requests[: len(scenario.trace)]
    rejected = sum(1 for r in requests if r.rejected)
    in_flight = sum(1 for r in requests if r.finish is None and not r.rejected)
    run = Run(
        requests=requests,
        samples=record.samples,
        events=record.events,
        end=record.end,
        replica_seconds=record.replica_seconds,
        rejected=rejected,
        preemptions=record.preemptions,
        in_flight=in_flight,
        wall_seconds=record.wall_seconds,
    )
    judged = build_result(
        run,
        policy=LIVE,
        trace=scenario.trace_name,
        profile=scenario.profile,
        spec=scenario.spec,
    )
    stop = None
    if record.stopped_by is not None:
        stop = RunStop(
            interrupted=record.interrupted, stopped_by=record.stopped_by, judged_until_s=record.cut
        )
    return _with_settings(judged, scenario, options, stop=stop, host=record.host)


def simulated_results(scenario: Scenario, options: DemoOptions) -> tuple[SimResult, SimResult]:
    """The scenario replayed in the simulator: ``fleetslo``, and the best baseline (``best_baseline``)."""
    fleetslo = run_policy(scenario, fleetslo_policy(scenario), label=SIMULATED)
    return _with_settings(fleetslo, scenario, options), _with_settings(
        best_baseline(scenario), scenario, options
    )


def fleetslo_policy(scenario: Scenario) -> Policy[Any]:
    """The ``fleetslo`` policy as the printed ``fleetslo simulate --profile …`` command makes it (and
    ``fleetslo run`` with ``spec.profile``): its capacity model starts from the demo's engine
    profile, not from the conservative prior. The live controller and both replays use this one,
    or the replay the demo prints would not be the run it judged."""
    return make_named_policy("fleetslo", scenario, SimulateOptions())


def best_baseline(scenario: Scenario) -> SimResult:
    """What a team would otherwise run, at its best on this scenario: of the tuned ``BASELINES``
    and a static fleet sized for the average, the one with the most minutes meeting the SLO, then
    the most requests, then the fewest replica-hours. Its label says which and among how many."""
    size = average_sized(scenario)
    static: Policy[Any] = StaticPolicy(size)
    candidates = [
        (f"static ×{size} (sized for the average)", replace(scenario, initial_replicas=size), static)
    ]
    candidates += [(label, scenario, make(scenario)) for label, make in BASELINES]
    results = [run_policy(sc, policy, label=label) for label, sc, policy in candidates]
    best = max(results, key=_rank)
    return replace(
        best,
        policy=f"{best.policy} · best of {len(results)} baselines · simulated",
        baselines_tried=tuple(
            BaselineTried(r.policy, r.window_attainment, r.request_attainment, r.replica_hours)
            for r in results
        ),
    )


def _rank(result: SimResult) -> tuple[float, float, float]:
    def value(v: float | None) -> float:
        return -1.0 if v is None else v

    return value(result.window_attainment), value(result.request_attainment), -result.replica_hours


def _with_settings(
    result: SimResult,
    scenario: Scenario,
    options: DemoOptions,
    *,
    stop: RunStop | None = None,
    host: Mapping[str, Any] | None = None,
) -> SimResult:
    return replace(
        result,
        initial_replicas=scenario.initial_replicas,
        cold_start_s=scenario.spec.replicas.cold_start,
        seed=scenario.seed,
        speedup=options.speedup,
        max_num_seqs=scenario.profile.max_num_seqs,  # the batch limit that means "no limit"
        stop=stop if stop is not None else result.stop,
        host=host if host is not None else result.host,
    )


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def verdict(live: SimResult, baseline: SimResult, span_s: float) -> str:
    """One line: SLO attainment and replica-hours live, and what the best baseline would have done."""

    def held(r: SimResult) -> str:
        return (
            f"{_share(r.window_attainment)} of minutes ({_share(r.request_attainment)} of requests) "
            f"for {r.replica_hours:.2f} replica-hours"
        )

    name = baseline.policy.split(" · ")[0]
    line = f"fleetslo held the SLO in {held(live)}; the best baseline, {name}: {held(baseline)}."
    if live.stop is not None and live.stop.interrupted:
        until = live.stop.judged_until_s
        part = "all of the trace" if until is None else f"the first {_clock(until)} of {_clock(span_s)}"
        return f"INTERRUPTED — judged on {part} (simulated), against the same part in the simulator: {line}"
    return line


def agreement(live: SimResult, simulated: SimResult) -> str:
    """How the live run compares with its simulation, for the end of the output."""
    pairs = (
        ("window attainment", live.window_attainment, simulated.window_attainment),
        ("request attainment", live.request_attainment, simulated.request_attainment),
        ("replica hours", live.replica_hours, simulated.replica_hours),
    )
    return "; ".join(f"{name} {_fmt(a)} live vs {_fmt(b)} simulated" for name, a, b in pairs)


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def title(scenario: Scenario, options: DemoOptions) -> str:
    slo = scenario.spec.objectives
    return (
        f"fleetslo demo: {scenario.trace_name} on {scenario.profile.name}, "
        f"p90 TTFT ≤ {slo.ttft.threshold:g}s, TPOT ≤ {slo.tpot.threshold * 1000:g}ms, "
        f"{options.speedup:g}× real time"
    )
