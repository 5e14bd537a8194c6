"""The demo's judging and presentation: the simulator's judge on live records, the verdict, the view."""

from __future__ import annotations

from fleetslo.core.model import ReplicaCounts
from fleetslo.sim.demo import outcome, view
from fleetslo.sim.demo.scenario import DemoOptions
from fleetslo.sim.records import SimRequest
from fleetslo.sim.runner import FleetSample, ScaleEvent
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
    events = [ScaleEvent(15.0, 2, 3, 64, "ScaleUpForecast", "more traffic")]
    return outcome.LiveRecord(requests, samples, events, 120.0, 240.0, 0, 12.0)


def test_the_live_run_is_judged_by_the_simulators_rules() -> None:
    result = outcome.live_result(record(ttft=0.5), scenario(), OPTIONS)
    assert result["policy"] == outcome.LIVE and result["requests"] == 120
    assert result["in_flight_at_end"] == 1 and result["rejected"] == 0
    assert result["window_attainment"] == 1.0
    assert result["replica_hours"] == 240.0 / 3600 and result["speedup"] == 10.0
    assert result["events"][0]["reason"] == "ScaleUpForecast"
    slow = outcome.live_result(record(ttft=5.0), scenario(), OPTIONS)
    assert slow["window_attainment"] == 0.0


def test_the_verdict_is_one_line_with_attainment_and_replica_hours() -> None:
    live = outcome.live_result(record(ttft=0.5), scenario(), OPTIONS)
    static = outcome.live_result(record(ttft=5.0), scenario(), OPTIONS)
    line = outcome.verdict(live, static, 1)
    assert "\n" not in line
    assert line.startswith(
        "fleetslo held the SLO in 100% of minutes (99% of requests) for 0.07 replica-hours"
    )
    assert "a static fleet of 1 sized for the average: 0% of minutes" in line
    assert "replica hours 0.0667 live vs 0.0667 simulated" in outcome.agreement(live, live)


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
        decisions=[ScaleEvent(60.0, 2, 3, 12, "ScaleUpForecast", "arrivals rising")],
    )
    console = Console(width=120, record=True)
    console.print(view.render(status))
    text = console.export_text()
    assert "0.40 s / 2 s ✓" in text and "61.0 ms / 50 ms ✗" in text and "2 → 3" in text
    assert view.line(status).startswith("[1:15/2:00] 2.50 req/s · p90 TTFT 0.40s · p90 TPOT 61.0ms")
