"""One live run of the demo: processes, clock, controller, traffic, view, and a watch on the host.

``Demo.run`` starts the replicas (``LocalFleet``: a sim-server and a sidecar process each), then the
clock, the control loop and the load generator, and shows the live view until the trace has been
replayed, or it is stopped: by Ctrl-C / SIGTERM (requests in flight then get ``INTERRUPT_GRACE_S``
to finish; a second signal cuts that short), or because the host fell behind the speed-up (``lag``:
the run cannot be judged, the caller starts again slower). Whatever happens, every process it
started is stopped, with further signals ignored so the cleanup is never cut short. It returns a
``LiveRecord``; judging is ``outcome``'s, files are ``app``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
import time
from collections.abc import AsyncIterator, Iterator
from types import FrameType
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from rich.console import Console
from rich.live import Live

from fleetslo.control.local.fleet import LocalFleet, Phase
from fleetslo.control.local.replica import ReplicaRecipe, free_port
from fleetslo.sim.demo import lag, outcome, view, vllm
from fleetslo.sim.demo.control import ControlLoop
from fleetslo.sim.demo.files import DemoPaths, intro
from fleetslo.sim.demo.loadgen import LoadGenerator
from fleetslo.sim.demo.prometheus import LocalPrometheus, find_prometheus
from fleetslo.sim.demo.router import Router, router_app
from fleetslo.sim.demo.scenario import DemoOptions, fleet_slo
from fleetslo.sim.scenario import Scenario
from fleetslo.sim.server.clock import SpeedClock

#: Wall seconds requests still in flight after the last arrival get to finish.
FINISH_GRACE_S = 15.0
#: Wall seconds requests in flight at a Ctrl-C get to finish (they belong to the part judged).
INTERRUPT_GRACE_S = 3.0
#: Wall seconds between two looks at what Prometheus scrapes (its /api/v1/targets).
PROMETHEUS_CHECK_S = 5.0
#: Wall seconds between the ticks that measure the demo's own event-loop lag, and between two
#: reads of every engine's wake-up lag.
LOOP_TICK_S, ENGINE_POLL_S = 0.02, 1.0
#: Simulated seconds between two scrapes of an engine by its sidecar, and between two looks of the
#: fleet's monitor at a starting (ready) replica. In simulated time, so a slower run (after the host
#: fell behind) also polls less per wall second: the same freshness, a fraction of the CPU.
SIDECAR_INTERVAL_S, POLL_S, READY_POLL_S = 5.0, 0.5, 2.5


class Demo:
    """One live run at ``options.speedup``; ``run`` always cleans up."""

    def __init__(self, options: DemoOptions, scenario: Scenario, paths: DemoPaths, console: Console) -> None:
        self.options, self.scenario, self.paths, self.console = options, scenario, paths, console
        spec = scenario.spec
        self.clock = SpeedClock(options.speedup)
        self.token = (paths.files / "admin-token").read_text(encoding="utf-8")
        self.fleet = self._vllm_fleet() if options.engine == "vllm" else self._sim_fleet()
        self.start_timeout = vllm.START_TIMEOUT_S if options.engine == "vllm" else 60.0
        self.lag = lag.LagMeter()
        outputs = [r.output_tokens for r in scenario.trace.requests]
        self.host = lag.HostCheck(
            self.lag, options.speedup, spec.objectives.ttft.threshold,
            token_budget_s=lag.token_budget(spec.objectives.tpot.threshold, outputs),
        )  # fmt: skip
        self.prometheus: LocalPrometheus | None = None
        self._prometheus_checked = -math.inf
        #: Lines the live view shows under the numbers (what Prometheus scrapes, host lag).
        self.notes: dict[str, str] = {}
        self.control: ControlLoop | None = None
        self.loadgen = LoadGenerator(
            scenario.trace, Router(self.fleet.gates), self.clock, spec.target.model_name, self.lag
        )
        self.metrics_port = free_port()
        #: Why the replay ended early: "SIGINT", "SIGTERM" or ``outcome.HOST``; ``None`` if it did not.
        self.stopped_by: str | None = None

    def _sim_fleet(self) -> LocalFleet:
        options, scenario, spec = self.options, self.scenario, self.scenario.spec
        recipe = ReplicaRecipe(
            profile=options.profile,
            model_name=spec.target.model_name,
            speedup=options.speedup,
            cold_start_s=spec.replicas.cold_start,
            token_file=self.paths.files / "admin-token",
            log_dir=self.paths.logs,
            slo_ttft_s=spec.objectives.ttft.threshold,
            slo_tpot_s=spec.objectives.tpot.threshold,
            buckets=scenario.bucket_layout(),
            max_inflight=scenario.profile.max_num_seqs,
            log_level="debug" if options.log_level == "debug" else "warning",
            sidecar_interval_s=max(0.1, SIDECAR_INTERVAL_S / options.speedup),
        )
        return LocalFleet(
            spec.target,
            recipe,
            self.clock.now,
            poll_interval=max(0.01, POLL_S / options.speedup),
            ready_poll_interval=max(0.05, READY_POLL_S / options.speedup),
        )

    def _vllm_fleet(self) -> LocalFleet:
        """Real vLLM replicas, one per core this machine can hold (``demo.vllm``)."""
        spec = self.scenario.spec
        python = vllm.find_python(self.options.vllm_python)
        setup = vllm.VllmSetup(
            python, vllm.tiny_model(python, self.paths.files / "tiny-llama"), vllm.capacity()
        )
        objectives = (spec.objectives.ttft.threshold, spec.objectives.tpot.threshold)
        return vllm.make_fleet(
            setup, spec.target, logs=self.paths.logs, token_file=self.paths.files / "admin-token",
            slo=objectives, max_num_seqs=self.scenario.profile.max_num_seqs, clock=self.clock.now,
        )  # fmt: skip

    def run(self) -> outcome.LiveRecord:
        started = time.monotonic()
        end, replica_seconds, preemptions = 0.0, 0.0, 0
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            self._start()
            asyncio.run(self._live())
            signal.signal(signal.SIGTERM, _interrupt)  # asyncio left SIGTERM at its default
            end = self._end()
            replica_seconds, preemptions = self.fleet.replica_seconds(end), int(self.fleet.preemptions())
        except KeyboardInterrupt:
            self.stopped_by = self.stopped_by or "SIGINT"
        finally:
            with _shielded():
                self._stop()
            signal.signal(signal.SIGTERM, previous)
        sent = self.loadgen.sent
        records = self.loadgen.records
        return outcome.LiveRecord(
            records,
            self.control.samples if self.control else [],
            self.control.events if self.control else [],
            end,
            replica_seconds,
            preemptions,
            time.monotonic() - started,
            stopped_by=self.stopped_by,
            # The part that ran ends where the first request that was never sent would have arrived.
            cut=records[sent].arrival if self.stopped_by and sent < len(records) else None,
            host=self.host.summary(),
            behind=self.host.gave_up,
        )

    def _start(self) -> None:
        warm = self.scenario.initial_replicas
        self.console.print(intro(self.scenario, self.options, warm), highlight=False)
        self.fleet.start(warm, timeout=self.start_timeout)
        if self.options.prometheus:
            self.prometheus = self._start_prometheus()
        self.clock.origin = time.monotonic()  # simulated time 0: the trace starts now
        self.control = ControlLoop(
            fleet_slo(self.scenario.spec),
            outcome.fleetslo_policy(self.scenario),
            self.fleet,
            self.token,
            self.clock,
            router_waiting=lambda: self.loadgen.router.waiting,
            default_limit=self.scenario.profile.max_num_seqs,
            lag=self.lag,
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

    async def _live(self) -> None:
        """Replay the trace with the live view, until the end, a signal, or a host that fell behind."""
        stop, hurry = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()

        def stopping(name: str) -> None:
            if self.stopped_by is not None:
                hurry.set()  # a second Ctrl-C: do not wait for the requests in flight
            self.stopped_by = self.stopped_by or name
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping, sig.name)
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
            self._fronts(session),
        ):
            sending = asyncio.create_task(self.loadgen.run(session))
            stopped = asyncio.create_task(stop.wait())
            watching = [asyncio.create_task(c) for c in (self._loop_lag(), self._engine_lag(session))]
            checking = asyncio.create_task(self._check_host(lambda: stopping(outcome.HOST)))
            with self._view() as show:
                showing = asyncio.create_task(show())
                await asyncio.wait({sending, stopped}, return_when=asyncio.FIRST_COMPLETED)
                sending.cancel()
                checking.cancel()
                grace = {None: FINISH_GRACE_S, outcome.HOST: 0.0}.get(self.stopped_by, INTERRUPT_GRACE_S)
                finishing = asyncio.create_task(self.loadgen.finish(grace))
                hurried = asyncio.create_task(hurry.wait())
                await asyncio.wait({finishing, hurried}, return_when=asyncio.FIRST_COMPLETED)
                if not finishing.done():
                    await self.loadgen.finish(0.0)
                    await finishing
                for task in (showing, hurried, *watching):
                    task.cancel()
            stopped.cancel()

    async def _loop_lag(self) -> None:
        """How late this process's event loop (the clients, the router) wakes: a tick's overshoot."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + LOOP_TICK_S
            await asyncio.sleep(LOOP_TICK_S)
            now = loop.time()
            self.lag.record(lag.CLIENTS, now - due, now)

    async def _engine_lag(self, session: aiohttp.ClientSession) -> None:
        """Every ready engine's p90 wake-up lag over the last check window (its ``/lag``)."""
        timeout = aiohttp.ClientTimeout(total=ENGINE_POLL_S)

        async def read(port: int) -> float | None:
            url = f"http://127.0.0.1:{port}/lag?window={lag.WINDOW_S:g}"
            try:
                async with session.get(url, timeout=timeout) as response:
                    value = (await response.json()).get("p90_s") if response.status == 200 else None
            except (aiohttp.ClientError, TimeoutError, ValueError):
                return None
            return float(value) if isinstance(value, int | float) else None

        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(ENGINE_POLL_S)
            ports = [r.ports.engine for r in list(self.fleet.replicas) if r.phase is Phase.READY]
            for value in await asyncio.gather(*(read(p) for p in ports)):
                if value is not None:
                    self.lag.record(lag.ENGINES, value, loop.time())

    async def _check_host(self, give_up: Any) -> None:
        """Judge the host every check window; give up on the run once it stayed behind."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(lag.WINDOW_S)
            behind = self.host.check(loop.time())
            if behind is None:
                self.notes["host"] = f"host keeps up with {self.options.speedup:g}× real time"
            else:
                self.notes["host"] = f"HOST BEHIND {self.options.speedup:g}×: {behind.describe()}"
            if self.host.gave_up is not None:
                give_up()
                return

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
