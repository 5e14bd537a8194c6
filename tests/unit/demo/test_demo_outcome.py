"""The demo's judging and presentation: the simulator's judge on live records, the verdict, the view."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

from fleetslo.core.model import ReplicaCounts
from fleetslo.sim.demo import app, outcome, view
from fleetslo.sim.demo.files import DemoPaths
from fleetslo.sim.demo.scenario import DemoOptions
from fleetslo.sim.records import SimRequest
from fleetslo.sim.result_types import ScaleEventRecord
from fleetslo.sim.runner import FleetSample
from fleetslo.sim.scenario import Scenario, make_spec
from fleetslo.sim.workload import Request, Trace
from rich.console import Console

from tests.unit.sim.sim_support import tiny_profile

OPTIONS = DemoOptions(duration_s=12.0, speedup=10.0)


def scenario() -> Scenario:
    profile = tiny_profile()
    trace = Trace(tuple(Request(float(i), 100, 10) for i in range(120)))
    return Scenario(trace, "tiny trace", profile, make_spec(profile, max_replicas=4), 2)


def record(ttft: float) -> outcome.LiveRecord:
    requests = []
    for i, r in enumerate(scenario().trace.requests):
        req = SimRequest.of(i, r)
        req.first_token, req.finish = r.arrival_s + ttft, r.arrival_s + ttft + 0.09
        requests.append(req)
    requests[-1].first_token = requests[-1].finish = None  # still in flight at the end
    samples = [FleetSample(t, 2, 0, 0, 64, 0) for t in (0.0, 15.0, 30.0)]
    events = [ScaleEventRecord(15.0, 2, 3, 64, "ScaleUpForecast", "more traffic")]
    return outcome.LiveRecord(requests, samples, events, 120.0, 240.0, 0, 12.0)


def test_the_live_run_is_judged_by_the_simulators_rules() -> None:
    result = outcome.live_result(record(ttft=0.5), scenario(), OPTIONS)
    assert result.policy == outcome.LIVE and result.requests == 120
    assert result.in_flight_at_end == 1 and result.rejected == 0
    assert result.window_attainment == 1.0
    assert result.replica_hours == 240.0 / 3600 and result.speedup == 10.0
    assert result.events[0].reason == "ScaleUpForecast"
    slow = outcome.live_result(record(ttft=5.0), scenario(), OPTIONS)
    assert slow.window_attainment == 0.0


def test_the_verdict_is_one_line_with_attainment_and_replica_hours() -> None:
    live = outcome.live_result(record(ttft=0.5), scenario(), OPTIONS)
    baseline = outcome.live_result(record(ttft=5.0), scenario(), OPTIONS)
    baseline = replace(baseline, policy="keda-waiting (threshold 2) · best of 7 baselines · simulated")
    line = outcome.verdict(live, baseline, 120.0)
    assert "\n" not in line
    assert line.startswith(
        "fleetslo held the SLO in 100% of minutes (99% of requests) for 0.07 replica-hours"
    )
    assert "the best baseline, keda-waiting (threshold 2): 0% of minutes" in line
    assert "replica hours 0.0667 live vs 0.0667 simulated" in outcome.agreement(live, live)


def interrupted(at: float) -> outcome.LiveRecord:
    """Ctrl-C at ``at`` simulated seconds: the requests before it served well, the rest never sent."""
    full = record(ttft=0.5)
    for req in full.requests:
        if req.arrival >= at:
            req.first_token = req.finish = None
    return replace(full, stopped_by="SIGINT", cut=at, end=at)


def test_a_partial_run_is_judged_on_the_part_that_ran_against_the_same_part_simulated() -> None:
    partial = interrupted(60.0)
    judged = outcome.judged_scenario(scenario(), partial)
    assert len(judged.trace) == 60 and "interrupted at 1:00" in judged.trace_name
    live = outcome.live_result(partial, judged, OPTIONS)
    assert live.requests == 60 and live.window_attainment == 1.0 and live.stop is not None
    assert live.stop.interrupted is True and live.stop.judged_until_s == 60.0
    simulated, baseline = outcome.simulated_results(judged, OPTIONS)
    assert simulated.requests == baseline.requests == 60
    line = outcome.verdict(live, baseline, 120.0)
    assert line.startswith("INTERRUPTED — judged on the first 1:00 of 2:00 (simulated)"), line
    whole = outcome.live_result(partial, scenario(), OPTIONS)  # judged as a whole, as it was
    assert whole.window_attainment == 0.0 and whole.request_attainment == 0.5


def test_the_comparison_is_the_best_tuned_baseline_on_the_same_scenario() -> None:
    best = outcome.best_baseline(scenario())
    tried = best.baselines_tried or ()
    assert len(tried) == 1 + len(outcome.BASELINES)
    assert any(t.policy.startswith("static") for t in tried)
    assert any(t.policy.startswith("keda-waiting") for t in tried)
    assert any(t.policy.startswith("hpa-running") for t in tried)
    top = max(t.window_attainment for t in tried)
    assert best.window_attainment == top
    cheapest = min(t.replica_hours for t in tried if t.window_attainment == top)
    assert best.replica_hours <= cheapest + 1e-9 or best.request_attainment > 0
    assert best.policy.endswith(f"best of {len(tried)} baselines · simulated")


def test_the_live_view_renders_and_summarises_in_one_line() -> None:
    status = view.Status(
        title="demo",
        now=75.0,
        span=120.0,
        wall=7.5,
        arrival_rate=2.5,
        p90_ttft=0.4,
        p90_tpot=0.061,
        ttft_target=2.0,
        tpot_target=0.05,
        sent=100,
        served=95,
        rejected=0,
        counts=ReplicaCounts(2, 1, 0),
        batch_limit=12,
        in_flight=5,
        waiting=0,
        observed_ttft=None,
        observed_tpot=0.04,
        decisions=[ScaleEventRecord(60.0, 2, 3, 12, "ScaleUpForecast", "arrivals rising")],
        notes=["HOST BEHIND 10×: engines p90 lag 25 ms of wall time = 0.25 s simulated (budget 0.10 s)"],
    )
    console = Console(width=120, record=True)
    console.print(view.render(status))
    text = console.export_text()
    assert "0.40 s / 2 s ✓" in text and "61.0 ms / 50 ms ✗" in text and "2 → 3" in text
    assert view.line(status).startswith("[1:15/2:00] 2.50 req/s · p90 TTFT 0.40s · p90 TPOT 61.0ms")
    assert "HOST BEHIND 10×: engines p90 lag 25 ms" in text and "HOST BEHIND 10×" in view.line(status)


def test_results_json_keeps_the_demo_keys_of_an_interrupted_run(tmp_path: Path) -> None:
    """The JSON edge: ``results.json`` is the typed results' ``to_dict``, the demo's keys flat."""
    paths = DemoPaths(tmp_path / "report.html").prepare()
    partial = replace(interrupted(60.0), host={"kept_up": True, "checks": 3})
    quiet = Console(file=io.StringIO(), width=200)
    app._judge(partial, scenario(), OPTIONS, paths, quiet, restarts=[])
    saved = json.loads((paths.files / "results.json").read_text(encoding="utf-8"))
    live = saved["live"]
    assert live["interrupted"] is True and live["stopped_by"] == "SIGINT" and live["judged_until_s"] == 60.0
    assert live["host"] == {"kept_up": True, "checks": 3, "restarts": []}
    assert live["speedup"] == 10.0 and live["requests"] == 60 and live["windows"][0]["met"] is True
    assert len(saved["baseline"]["baselines_tried"]) == 1 + len(outcome.BASELINES)
    assert "interrupted" not in saved["simulated"] and "host" not in saved["simulated"]
    assert (paths.report).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_the_demo_judges_the_policy_the_printed_replay_command_runs() -> None:
    """Reproduces a defect: the demo's controller and its simulated side started fleetslo's capacity
    model from the conservative prior, while the ``fleetslo simulate --profile …`` it printed (and
    ``fleetslo run`` with ``spec.profile``) start it from the profile: the replay was another run."""
    from fleetslo.sim.compare import SimulateOptions, make_named_policy

    sc = scenario()
    demo = outcome.fleetslo_policy(sc).initial_state(sc.spec)
    cli = make_named_policy("fleetslo", sc, SimulateOptions()).initial_state(sc.spec)
    assert demo.model.prior == cli.model.prior
    assert "engine profile" in demo.model.describe()
