"""The sidecar process: a scrape loop and an HTTP server on one asyncio event loop.

``Sidecar`` wires the parts together — scraper → tracker → collector on a private registry →
``/metrics`` (and, optionally, the OTLP bridge) — and runs until cancelled or signalled. It holds
no metric logic of its own. A vLLM that is down, slow or answering garbage never stops it: the
failure is recorded and the loop goes on at the next interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from fleetslo.core.config import parse_listen
from fleetslo.core.errors import EngineScrapeError
from fleetslo.sidecar.exporter.collector import EngineCollector
from fleetslo.sidecar.exporter.scraper import VllmScraper, sleep_until
from fleetslo.sidecar.exporter.signals import ExactLatency
from fleetslo.sidecar.exporter.tracker import EngineTracker
from fleetslo.sidecar.gpu.settings import GpuSettings
from fleetslo.sidecar.gpu.telemetry import build_gpu_telemetry, tokens_from_signals
from fleetslo.sidecar.lifecycle import run_until_signalled
from fleetslo.sidecar.settings import ExporterSettings, GateServerSettings
from fleetslo.sidecar.thresholds import SloThresholds

log = logging.getLogger("fleetslo.exporter")

#: On SIGTERM, how long the gate lets in-flight requests finish before the process exits; keep the
#: pod's terminationGracePeriodSeconds above it.
GATE_SHUTDOWN_GRACE = 25.0
#: Seconds a connection to ``/metrics`` may sit idle or half-sent before it is closed.
SERVER_IDLE_TIMEOUT = 30.0
#: At most one "scrape failed" warning per this many seconds (the rest at debug level): a vLLM
#: that takes minutes to start must not write a warning per scrape interval.
SCRAPE_WARNING_EVERY_S = 30.0


class Sidecar:
    """One sidecar: scrape vLLM every interval, serve what was derived."""

    def __init__(
        self,
        settings: ExporterSettings,
        wall_clock: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.wall_clock = wall_clock
        self.clock = clock
        self.tracker = EngineTracker(settings.ring_size, settings.interval)
        slo = SloThresholds(ttft=settings.slo_ttft, tpot=settings.slo_tpot)
        self.collector = EngineCollector(self.tracker, settings.windows, slo, settings.vllm_url)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self.scrapes_attempted = 0
        self._warned_at = -math.inf
        self._failures_unreported = 0
        #: Each returns why the sidecar is not ready (e.g. the gate is draining), or ``None``.
        self._readiness: list[Callable[[], str | None]] = []
        self._scraper: VllmScraper | None = None
        self._rejected_warned_at = -math.inf
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    def add_collector(self, collector: Collector) -> None:
        """Serve another collector's families on the same ``/metrics`` (GPU, gate)."""
        self.registry.register(collector)

    def prefer_latency_from(self, exact: ExactLatency) -> None:
        """Publish TTFT/TPOT from ``exact`` (the gate) where it has data; it is snapshotted per scrape."""
        self.collector.exact = exact

    def add_readiness_check(self, check: Callable[[], str | None]) -> None:
        """``/readyz`` answers 503 while ``check()`` returns a reason (a draining gate)."""
        self._readiness.append(check)

    async def scrape_once(self) -> None:
        """One scrape, recorded as a success or a classified failure."""
        assert self._scraper is not None, "start() first"
        started = time.perf_counter()
        try:
            page = await self._scraper.scrape()
        except EngineScrapeError as exc:
            self.tracker.record_failure(self.clock(), time.perf_counter() - started, exc)
            self._warn_throttled(exc)
        else:
            if self._warned_at > -math.inf:
                log.info("scraping %s again", self.settings.vllm_url)
                self._warned_at, self._failures_unreported = -math.inf, 0
            duration = time.perf_counter() - started
            self.tracker.record_success(
                self.clock(), duration, page.models, wall=self.wall_clock(),
                rejected=page.rejected, held=page.rejected_families,
            )  # fmt: skip
            if page.rejected_families:
                self._warn_rejected(page.rejected_families)
        if self.collector.exact is not None:
            # Same instants as the tracker's ring, so gate and vLLM windows cover the same span.
            self.collector.exact.snapshot(self.clock())
        self.scrapes_attempted += 1

    def _warn_throttled(self, exc: EngineScrapeError) -> None:
        now = self.clock()
        if now - self._warned_at < SCRAPE_WARNING_EVERY_S:
            self._failures_unreported += 1
            log.debug("scrape failed: %s", exc)
            return
        more = f" ({self._failures_unreported} more failures since the last warning)" * bool(
            self._failures_unreported
        )
        log.warning("scrape failed: %s%s", exc, more)
        self._warned_at, self._failures_unreported = now, 0

    def _warn_rejected(self, families: Mapping[str, frozenset[str]]) -> None:
        """One warning per minute at most: a page that stays bad must not flood the log."""
        now = self.clock()
        if now - self._rejected_warned_at >= 60.0:
            self._rejected_warned_at = now
            named = "; ".join(
                f"{model or '(no model)'}: {', '.join(sorted(f))}" for model, f in families.items()
            )
            log.warning("impossible values on the vLLM page, families left out: %s", named)

    async def scrape_forever(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            await self.scrape_once()
            next_at += self.settings.interval
            # After a long stall, skip the missed ticks rather than firing them in a burst.
            next_at = max(next_at, loop.time())
            await sleep_until(loop, next_at)

    async def start(self, session: aiohttp.ClientSession) -> None:
        """Bind the HTTP listener (port 0 picks a free port, see ``self.port``)."""
        self._scraper = VllmScraper(
            self.settings.vllm_url, self.settings.scrape_timeout, session, self.settings.max_page_bytes
        )
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/vllm/metrics", self._raw)
        # An idle or half-sent connection is closed after 30 s (aiohttp's default is an hour), so
        # slow clients cannot pile up on the port Prometheus scrapes.
        self._runner = web.AppRunner(app, access_log=None, keepalive_timeout=SERVER_IDLE_TIMEOUT)
        await self._runner.setup()
        host, port = parse_listen(self.settings.listen)
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else port
        log.info("serving on %s:%s, scraping %s every %gs", host, self.port, self.settings.vllm_url,
                 self.settings.interval)  # fmt: skip

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        # Ready once the first scrape was attempted: the sidecar's job is to report, and it
        # reports a down engine as faithfully as an up one.
        if self.scrapes_attempted == 0:
            return web.Response(status=503, text="starting\n")
        for check in self._readiness:
            reason = check()
            if reason is not None:
                return web.Response(status=503, text=f"not ready: {reason}\n")
        state = "up" if self.tracker.up else f"engine down ({self.tracker.last_error})"
        return web.Response(text=f"ready; {state}\n")

    async def _raw(self, _: web.Request) -> web.Response:
        page = self._scraper.last_page if self._scraper else None
        if not self.tracker.up or page is None:
            return web.Response(status=503, text=f"engine down: {self.tracker.last_error}\n")
        return web.Response(text=page, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def serve(
    settings: ExporterSettings,
    stop: asyncio.Event | None = None,
    gpu: GpuSettings | None = None,
    gate: GateServerSettings | None = None,
) -> None:
    """Run a sidecar until ``stop`` is set (or forever); with ``gpu``, GPU telemetry beside it;
    with ``gate``, the admission gate in front of vLLM on the same event loop."""
    stop = stop or asyncio.Event()
    sidecar = Sidecar(settings)
    async with contextlib.AsyncExitStack() as stack:
        if gate is not None:
            await stack.enter_async_context(_gate_for(sidecar, gate))
        await _serve_sidecar(sidecar, settings, stop, gpu)


@contextlib.asynccontextmanager
async def _gate_for(sidecar: Sidecar, settings: GateServerSettings) -> AsyncIterator[None]:
    from fleetslo.sidecar.gate.server import Gate

    s = sidecar.settings
    slo = SloThresholds(ttft=s.slo_ttft, tpot=s.slo_tpot)
    gate = Gate(settings, slo, s.ring_size, served=lambda: sidecar.tracker.known_models)
    sidecar.add_collector(gate.collector)
    sidecar.prefer_latency_from(gate.windows)
    sidecar.add_readiness_check(gate.not_ready)
    await gate.start()
    try:
        yield
    finally:
        await gate.stop(GATE_SHUTDOWN_GRACE)


async def _serve_sidecar(
    sidecar: Sidecar, settings: ExporterSettings, stop: asyncio.Event, gpu: GpuSettings | None
) -> None:
    telemetry = None
    if gpu is not None:
        tokens = tokens_from_signals(sidecar.collector.signals)
        telemetry = build_gpu_telemetry(gpu, settings.windows, tokens)
    if telemetry is not None:
        sidecar.add_collector(telemetry.collector)
    async with aiohttp.ClientSession() as session:
        await sidecar.start(session)
        bridge = None
        if settings.otlp_endpoint:
            from fleetslo.sidecar.exporter.otlp import OtlpBridge

            bridge = OtlpBridge(settings.otlp_endpoint, settings.otlp_interval, sidecar.collector)
            if telemetry is not None:
                from fleetslo.sidecar.gpu.collector import FAMILIES

                bridge.add_collector(telemetry.collector, FAMILIES)
            bridge.start()
        if telemetry is not None:
            telemetry.start()  # reads GPUs on its own thread: a hung GPU never stalls /metrics
        scraping = asyncio.create_task(sidecar.scrape_forever())
        try:
            await stop.wait()
        finally:
            scraping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await scraping
            if bridge is not None:
                bridge.shutdown()
            if telemetry is not None:
                telemetry.stop()
            await sidecar.stop()


def tune_gc_for_serving() -> None:
    """Keep the garbage collector's pauses off the gate's latency.

    Measured in the gate (benchmarks/bench_gate.py, 200 live streams): full collections paused its
    event loop for 20-35 ms and middle ones for 1-4 ms, so the TTFT the gate adds by itself had a
    p99 of 0.8-3.4 ms. Freezing what exists at startup (modules, settings) takes it out of every
    later collection, and collecting the youngest generation every 10,000 allocations instead of
    700 makes pauses rare: p99 0.65 ms. Process-wide, hence here and not in ``serve``.
    """
    gc.freeze()
    gc.set_threshold(10_000, 20, 100)


def run_exporter(
    settings: ExporterSettings, gpu: GpuSettings | None = None, gate: GateServerSettings | None = None
) -> int:
    """Entry point of ``fleetslo exporter``: serve until SIGTERM (exit 0) or SIGINT (exit 130)."""
    tune_gc_for_serving()
    return run_until_signalled(lambda stop: serve(settings, stop, gpu, gate))
