"""``fleetslo demo``: the whole loop on one machine — fleet, sidecars, gates, controller, traffic, report.

``run_demo`` shapes the traffic and sizes the warm fleet (``scenario``), then runs it live
(``live.Demo``: the replicas, the clock, the control loop, the load generator and the live view).
If the host falls behind the speed-up (``lag``), that run is not judged: it starts again at a
lower speed-up, the same simulated span over more wall time, down to 1×. Then the live run (or the
part of it that ran, if it was interrupted) is judged, replayed in the simulator beside the best
tuned baseline on the same scenario, and written as the HTML report plus ``results.json``; the last
line printed is the verdict. The exit status is 0, 130 after Ctrl-C (143 after SIGTERM), 1 when
the fleet could not start or the host could not keep up even at 1×.

Orchestration only; the parts live in their own modules. Files are written under the report's folder.
"""

from __future__ import annotations

import json
import logging
import secrets
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from fleetslo.control.local.fleet import LocalFleetError
from fleetslo.core.logs import JsonFormatter
from fleetslo.sim.demo import lag, outcome
from fleetslo.sim.demo.files import DemoPaths, simulate_command
from fleetslo.sim.demo.live import Demo
from fleetslo.sim.demo.scenario import DemoOptions, build_scenario, shape_trace, trace_csv
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.report import render_report
from fleetslo.sim.result_types import SimResult
from fleetslo.sim.scenario import Scenario
from fleetslo.sim.workload import Trace

#: The lowest speed-up the demo falls back to when the host cannot keep up (1: real time).
MIN_SPEEDUP = 1.0
EXIT_OK, EXIT_FAILURE = 0, 1
EXIT_ON_SIGNAL = {"SIGINT": 128 + signal.SIGINT, "SIGTERM": 128 + signal.SIGTERM}


def run_demo(options: DemoOptions, base: Trace | None, profile: EngineProfile, console: Console) -> int:
    """The demo from start to verdict; returns the exit status."""
    trace = shape_trace(base, options)
    scenario = build_scenario(trace, profile, options)
    paths = DemoPaths(Path(options.report)).prepare()
    _log_to_file(paths.files / "demo.log", debug=options.log_level == "debug")
    (paths.files / "trace.csv").write_text(trace_csv(trace), encoding="utf-8")
    token = paths.files / "admin-token"
    token.write_text(secrets.token_urlsafe(24), encoding="utf-8")
    token.chmod(0o600)
    speedup, restarts = options.speedup, []
    while True:
        attempt = replace(options, speedup=speedup, duration_s=options.span_s / speedup)
        try:
            record = Demo(attempt, scenario, paths, console).run()
        except LocalFleetError as exc:  # the machine could not start the fleet: nothing to judge
            console.print(f"fleetslo demo: {exc}", style="red", highlight=False)
            return EXIT_FAILURE
        if record.stopped_by != outcome.HOST or record.behind is None:
            break
        restarts.append({"speedup": speedup, "behind": record.behind.describe()})
        lower = lag.slower(speedup, record.behind, MIN_SPEEDUP)
        if lower is None:
            console.print(
                f"fleetslo demo: this machine cannot keep up even at {speedup:g}× real time "
                f"({record.behind.describe()}); no verdict — a busy host would be judged, not the "
                "controller. Free some CPU and run it again.",
                style="bold red",
                highlight=False,
            )
            return EXIT_FAILURE
        console.print(
            f"the host fell behind {speedup:g}× real time ({record.behind.describe()}): starting again at "
            f"{lower:g}× (the same {options.span_s / 60:.3g} simulated minutes in "
            f"{options.span_s / lower:.0f}s of wall time)",
            style="bold yellow",
            highlight=False,
        )
        speedup = lower
    return _judge(record, scenario, attempt, paths, console, restarts=restarts)


def _judge(
    record: outcome.LiveRecord,
    scenario: Scenario,
    options: DemoOptions,
    paths: DemoPaths,
    console: Console,
    *,
    restarts: list[dict[str, Any]],
) -> int:
    """Judge the run (the part that ran), compare, write the report and results, print the verdict."""
    status = EXIT_ON_SIGNAL.get(record.stopped_by or "", EXIT_OK)
    judged = outcome.judged_scenario(scenario, record)
    if not judged.trace.requests:
        console.print("interrupted before the first request: nothing to judge", highlight=False)
        return status
    live = outcome.live_result(record, judged, options)
    live = replace(live, host={**(live.host or {}), "restarts": restarts})
    simulated, baseline = outcome.simulated_results(judged, options)
    notes = _notes(live, options, restarts)
    title = outcome.title(judged, options)
    command = simulate_command(paths, scenario, options, record.cut)
    results = {
        "live": live.to_dict(),
        "simulated": simulated.to_dict(),
        "baseline": baseline.to_dict(),
        "simulate_command": command,
    }
    (paths.files / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    paths.report.write_text(render_report([live, simulated, baseline], title, notes), encoding="utf-8")
    console.print(f"report: {paths.report}   logs: {paths.logs}")
    for note in notes:
        console.print(note, highlight=False)
    console.print(f"live vs simulated: {outcome.agreement(live, simulated)}")
    console.print(f"replay it in the simulator: {' '.join(command)}", soft_wrap=True)
    console.print(outcome.verdict(live, baseline, options.span_s), soft_wrap=True, highlight=False)
    return status


def _notes(live: SimResult, options: DemoOptions, restarts: list[dict[str, Any]]) -> list[str]:
    """What the report and the output say about how the run went (besides its numbers)."""
    host = live.host or {}
    worst = ", ".join(f"{k} {v:g} ms" for k, v in (host.get("worst_lag_wall_ms") or {}).items())
    in_a_row = f", never {lag.PATIENCE} in a row" if lag.PATIENCE > 1 else ""
    tokens = host.get("token_lag_budget_simulated_s", 0)
    notes = [
        f"Host: kept up with {options.speedup:g}× real time — p90 lag of every part within "
        f"{host.get('lag_budget_simulated_s', 0):.2f} s simulated ({tokens:.2f} s "
        f"on the tokens' path: clients, router, engines) in {host.get('checks', 0)} checks of "
        f"{lag.WINDOW_S:g} s ({host.get('checks_behind', 0)} found it behind"
        f"{in_a_row}); worst single lag: {worst or '—'}."
    ]
    notes += [f"Restarted: at {r['speedup']:g}× the host fell behind ({r['behind']})." for r in restarts]
    if live.stop is not None and live.stop.interrupted:
        until = live.stop.judged_until_s
        part = "every request had been sent" if until is None else f"judged up to simulated {until:.0f} s"
        notes.append(f"Interrupted ({live.stop.stopped_by}): {part}; the simulations replay the same part.")
    return notes


def _log_to_file(path: Path, *, debug: bool) -> None:
    """Every decision's audit line (everything with ``debug``) to ``path``; only warnings on the
    terminal, which belongs to the live view."""
    root = logging.getLogger()
    for handler in root.handlers:
        handler.setLevel(max(handler.level, logging.WARNING))
    level = logging.DEBUG if debug else logging.INFO
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(JsonFormatter())
    handler.setLevel(level)
    root.addHandler(handler)
    root.setLevel(level)
