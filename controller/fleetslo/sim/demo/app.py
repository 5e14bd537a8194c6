"""``fleetslo demo``: the whole loop on one machine — fleet, sidecars, gates, controller, traffic, report.

``run_demo`` shapes the traffic and sizes the warm fleet (``scenario``), then ``Demo.run`` starts the
replicas (``LocalFleet``: a sim-server and a sidecar process each), starts the clock, the control loop
and the load generator, and shows the live view until the trace has been replayed, or Ctrl-C / SIGTERM.
Whatever happens, every process it started is stopped (the cleanup itself ignores further signals so
it is never cut short). Then the live run is judged, replayed in the simulator beside a static fleet
sized for the average, and written as the HTML report plus ``results.json``; the last line printed is
the verdict.

Orchestration only; the parts live in their own modules. Files are written under the report's folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import secrets
import signal
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from rich.console import Console
from rich.live import Live

from fleetslo.control.local.fleet import LocalFleet, LocalFleetError
from fleetslo.control.local.replica import ReplicaRecipe, free_port
from fleetslo.core.logs import JsonFormatter
from fleetslo.sim.demo import outcome, view
from fleetslo.sim.demo.control import ControlLoop
from fleetslo.sim.demo.loadgen import LoadGenerator
from fleetslo.sim.demo.prometheus import LocalPrometheus, find_prometheus
from fleetslo.sim.demo.router import Router, router_app
from fleetslo.sim.demo.scenario import (
    SPIKE_AT,
    SPIKE_LENGTH,
    DemoOptions,
    build_scenario,
    fleet_slo,
    shape_trace,
    trace_csv,
)
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.report import render_report
from fleetslo.sim.scenario import Scenario
from fleetslo.sim.server.clock import SpeedClock
from fleetslo.sim.workload import Trace

#: Wall seconds between two looks at what Prometheus scrapes (its /api/v1/targets).
PROMETHEUS_CHECK_S = 5.0
#: Wall seconds requests still in flight after the last arrival get to finish.
FINISH_GRACE_S = 15.0


@dataclass(frozen=True, slots=True)
class DemoPaths:
    """Where the demo writes: the report, and a folder beside it for everything else."""

    report: Path

    @property
    def files(self) -> Path:
        return self.report.parent / f"{self.report.stem}-files"

    @property
    def logs(self) -> Path:
        return self.files / "logs"

    def prepare(self) -> DemoPaths:
        self.logs.mkdir(parents=True, exist_ok=True)
        return self


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
    try:
        record = Demo(options, scenario, paths, console).run()
    except LocalFleetError as exc:  # the machine could not start the fleet: nothing to judge
        console.print(f"fleetslo demo: {exc}", style="red", highlight=False)
        return 1
    live = outcome.live_result(record, scenario, options)
    simulated, static, size = outcome.simulated_results(scenario, options)
    title = outcome.title(scenario, options)
    paths.report.write_text(render_report([live, simulated, static], title), encoding="utf-8")
    command = simulate_command(paths, scenario, options)
    results = {"live": live, "simulated": simulated, "static": static, "simulate_command": command}
    (paths.files / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    console.print(f"report: {paths.report}   logs: {paths.logs}")
    console.print(f"live vs simulated: {outcome.agreement(live, simulated)}")
    console.print(f"replay it in the simulator: {' '.join(command)}", soft_wrap=True)
    console.print(outcome.verdict(live, static, size), soft_wrap=True, highlight=False)
    return 0


def simulate_command(paths: DemoPaths, scenario: Scenario, options: DemoOptions) -> list[str]:
    """``fleetslo simulate`` with the settings of this demo (the trace as it was replayed)."""
    spec = scenario.spec
    command = [
        "fleetslo",
        "simulate",
        "--trace",
        str(paths.files / "trace.csv"),
        "--profile",
        options.profile,
        "--policy",
        "fleetslo",
        "--slo-ttft",
        f"{options.ttft_s:g}s",
        "--slo-tpot",
        f"{options.tpot_s:g}s",
        "--min-replicas",
        str(spec.replicas.min),
        "--max-replicas",
        str(spec.replicas.max),
        "--initial-replicas",
        str(scenario.initial_replicas),
        "--seed",
        str(options.seed),
    ]
    if options.cold_start_s is not None:
        command += ["--cold-start", f"{options.cold_start_s:g}s"]
    return command


class Demo:
    """One live run: processes, clock, controller, traffic, view; ``run`` always cleans up."""

    def __init__(self, options: DemoOptions, scenario: Scenario, paths: DemoPaths, console: Console) -> None:
        self.options, self.scenario, self.paths, self.console = options, scenario, paths, console
        spec = scenario.spec
        self.clock = SpeedClock(options.speedup)
        self.token = (paths.files / "admin-token").read_text(encoding="utf-8")
        recipe = ReplicaRecipe(
            profile=options.profile,
            model_name=spec.target.model_name,
            speedup=options.speedup,
            cold_start_s=spec.replicas.cold_start,
            token_file=paths.files / "admin-token",
            log_dir=paths.logs,
            slo_ttft_s=spec.objectives.ttft.threshold,
            slo_tpot_s=spec.objectives.tpot.threshold,
            buckets=scenario.bucket_layout(),
            max_inflight=scenario.profile.max_num_seqs,
            log_level="debug" if options.log_level == "debug" else "warning",
        )
        self.fleet = LocalFleet(spec.target, recipe, self.clock.now)
        self.prometheus: LocalPrometheus | None = None
        self._prometheus_checked = -math.inf
        #: Lines the live view shows under the numbers (what Prometheus scrapes, host lag).
        self.notes: dict[str, str] = {}
        self.control: ControlLoop | None = None
        self.loadgen = LoadGenerator(
            scenario.trace, Router(self.fleet.gates), self.clock, spec.target.model_name
        )
        self.metrics_port = free_port()

    def run(self) -> outcome.LiveRecord:
        started = time.monotonic()
        interrupted, end, replica_seconds, preemptions = True, 0.0, 0.0, 0
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            self._start()
            interrupted = asyncio.run(self._live())
            signal.signal(signal.SIGTERM, _interrupt)  # asyncio left SIGTERM at its default
            end = self._end()
            replica_seconds, preemptions = self.fleet.replica_seconds(end), int(self.fleet.preemptions())
        except KeyboardInterrupt:
            interrupted = True
        finally:
            with _shielded():
                self._stop()
            signal.signal(signal.SIGTERM, previous)
        return outcome.LiveRecord(
            self.loadgen.records,
            self.control.samples if self.control else [],
            self.control.events if self.control else [],
            end,
            replica_seconds,
            preemptions,
            time.monotonic() - started,
            interrupted,
        )

    def _start(self) -> None:
        warm = self.scenario.initial_replicas
        self.console.print(_intro(self.scenario, self.options, warm), highlight=False)
        self.fleet.start(warm)
        if self.options.prometheus:
            self.prometheus = self._start_prometheus()
        self.clock.origin = time.monotonic()  # simulated time 0: the trace starts now
        self.control = ControlLoop(
            fleet_slo(self.scenario.spec),
            self.fleet,
            self.token,
            self.clock,
            router_waiting=lambda: self.loadgen.router.waiting,
            default_limit=self.scenario.profile.max_num_seqs,
        )
        self.control.start()

    def _start_prometheus(self) -> LocalPrometheus | None:
        binary = find_prometheus()
        if binary is None:
            self.console.print(
                "--prometheus: no `prometheus` on PATH (apt-get install prometheus); going on without"
            )
            return None
        prometheus = LocalPrometheus(
            binary, self.paths.files, fleet_slo(self.scenario.spec), self.metrics_port
        )
        prometheus.start()
        loaded, rules = prometheus.rules_summary()
        self.console.print(f"Prometheus: {prometheus.url} ({rules})", style=None if loaded else "red")
        return prometheus

    def _stop(self) -> None:
        if self.control is not None:
            self.control.stop()
        self.fleet.close()
        if self.prometheus is not None:
            self.prometheus.stop()

    def _end(self) -> float:
        """The simulated time of the last thing that happened (a finish, or the last arrival)."""
        records = self.loadgen.records[: self.loadgen.sent]
        times = [r.finish for r in records if r.finish is not None] + [r.arrival for r in records]
        return max(times, default=0.0)

    async def _live(self) -> bool:
        """Replay the trace with the live view; True if stopped by a signal."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
            self._fronts(session),
        ):
            sending = asyncio.create_task(self.loadgen.run(session))
            stopped = asyncio.create_task(stop.wait())
            with self._view() as show:
                showing = asyncio.create_task(show())
                await asyncio.wait({sending, stopped}, return_when=asyncio.FIRST_COMPLETED)
                sending.cancel()
                finishing = asyncio.create_task(self.loadgen.finish(0.0 if stop.is_set() else FINISH_GRACE_S))
                await asyncio.wait({finishing, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not finishing.done():
                    await self.loadgen.finish(0.0)
                    await finishing
                showing.cancel()
            stopped.cancel()
        return stop.is_set()

    @contextlib.asynccontextmanager
    async def _fronts(self, session: aiohttp.ClientSession) -> AsyncIterator[None]:
        """The router's HTTP port and the controller's /metrics, for curl and Prometheus."""
        assert self.control is not None
        registry = self.control.metrics.registry

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = router_app(self.loadgen.router, session)
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.metrics_port, shutdown_timeout=0.5).start()
        self.console.print(
            f"router: http://127.0.0.1:{self.metrics_port}/v1/completions   "
            f"controller metrics: http://127.0.0.1:{self.metrics_port}/metrics",
            highlight=False,
        )
        try:
            yield
        finally:
            await runner.cleanup()

    @contextlib.contextmanager
    def _view(self) -> Iterator[Any]:
        """A coroutine function that keeps the view current: redrawn in a terminal, a line every 10 s else."""
        terminal = self.console.is_terminal
        period = 0.25 if terminal else 10.0
        with contextlib.ExitStack() as stack:
            live = stack.enter_context(Live(console=self.console, auto_refresh=False)) if terminal else None

            async def show() -> None:
                while True:
                    status = self._status()
                    if live is not None:
                        live.update(view.render(status), refresh=True)
                    else:
                        self.console.print(view.line(status), highlight=False, soft_wrap=True)
                    self._update_prometheus()
                    await asyncio.sleep(period)

            yield show

    def _status(self) -> view.Status:
        now, spec = self.clock.now(), self.scenario.spec
        ttft, tpot = view.recent_latency(self.loadgen, now)
        last = self.control.last if self.control is not None else None
        obs = last.observation if last is not None else None
        return view.Status(
            title=outcome.title(self.scenario, self.options),
            now=now,
            span=self.options.span_s,
            wall=now / self.options.speedup,
            arrival_rate=view.arrival_rate(self.loadgen, now),
            p90_ttft=ttft,
            p90_tpot=tpot,
            ttft_target=spec.objectives.ttft.threshold,
            tpot_target=spec.objectives.tpot.threshold,
            sent=self.loadgen.sent,
            served=self.loadgen.served,
            rejected=self.loadgen.rejected,
            counts=self.fleet.counts(),
            batch_limit=self.control.limit if self.control else self.scenario.profile.max_num_seqs,
            in_flight=self.loadgen.in_flight,
            waiting=self.loadgen.router.waiting,
            observed_ttft=obs.ttft.p90 if obs else None,
            observed_tpot=obs.tpot.p90 if obs else None,
            decisions=list(self.control.decisions) if self.control else [],
            notes=list(self.notes.values()),
        )

    def _update_prometheus(self) -> None:
        if self.prometheus is not None:
            live = [
                (r.name, r.ports.engine, r.ports.sidecar)
                for r in list(self.fleet.replicas)
                if r.gone_at is None
            ]
            self.prometheus.update_targets(live)
            if time.monotonic() - self._prometheus_checked >= PROMETHEUS_CHECK_S:
                self._prometheus_checked = time.monotonic()
                self.notes["prometheus"] = f"Prometheus: {self.prometheus.targets_summary()}"


def _intro(scenario: Scenario, options: DemoOptions, warm: int) -> str:
    replicas = scenario.spec.replicas
    text = (
        f"fleetslo demo: {len(scenario.trace):,} requests ({scenario.trace_name}) replayed at "
        f"{options.speedup:g}× real time ({options.duration_s:g}s of wall time) against {warm} warm "
        f"replicas of {scenario.profile.name}, each a simulated vLLM with the fleetslo sidecar and gate; "
        f"the controller (fleetslo policy) may scale {replicas.min}-{replicas.max} replicas"
    )
    if options.spike > 1:
        start, end = options.span_s * SPIKE_AT / 60, options.span_s * (SPIKE_AT + SPIKE_LENGTH) / 60
        text += f"; spike ×{options.spike:g} from minute {start:.3g} to {end:.3g}"
    return text


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


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM while cleaning up: a second Ctrl-C must not leave processes behind."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
