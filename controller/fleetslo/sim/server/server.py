"""The sim-server process: an aiohttp server in front of the real-time engine model.

Routes, as vLLM serves them: ``POST /v1/completions`` and ``/v1/chat/completions`` (streamed as
server-sent events, one per token, as the engine produces them; or one JSON answer at the end),
``GET /v1/models``, ``GET /health`` and ``GET /metrics`` (see ``exposition``); and, not vLLM's,
``GET /lag``: how late the engine's wake-ups ran over the last seconds (p90 and max, wall seconds),
which ``fleetslo demo`` reads to tell whether the host keeps up with the speed-up.

**Cold start.** The listener binds at once, but until the cold start has passed — the profile's
``cold_start_s`` (or ``--cold-start``) divided by the speedup, counted from ``started_at`` (the
moment a supervisor asked for the replica; the process start by default) — every route answers
503: ``/health`` is what readiness probes and the demo's fleet wait on. The engine's clock starts
at zero when the replica becomes ready, as a fresh vLLM's counters do.

Wiring and HTTP only: token counting and answers are ``openai``'s, the model is ``driver``'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client.registry import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fleetslo.core.config import Duration, PositiveDuration, parse_listen
from fleetslo.sidecar.lifecycle import run_until_signalled
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.server import openai
from fleetslo.sim.server.clock import SpeedClock
from fleetslo.sim.server.driver import STREAM_INTERVAL_S, EngineDriver, Generation
from fleetslo.sim.server.exposition import PageSource, render, vllm_registry
from fleetslo.sim.server.families import RequestStats
from fleetslo.sim.vllm_metrics import DEFAULT_BUCKETS, EngineMetrics

log = logging.getLogger("fleetslo.simserver")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class SimServerSettings(BaseModel):
    """``fleetslo sim-server``: one simulated replica of ``profile``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    listen: str = "127.0.0.1:8000"
    #: Simulated seconds per wall second (10: a 60 s cold start takes 6 s).
    speedup: float = Field(default=1.0, gt=0, le=1000)
    #: The name vLLM would report (``--served-model-name``); the profile's model by default.
    model_name: str | None = None
    #: Simulated cold start; the profile's ``cold_start_s`` by default (0: ready at once).
    cold_start: Duration | None = Field(default=None, ge=0)
    #: Epoch seconds the cold start counts from (when the replica was asked for); now by default.
    started_at: float | None = None
    stream_interval: PositiveDuration = STREAM_INTERVAL_S
    #: vLLM's ``--custom-histogram-buckets``: bucket family → bounds (replaces the default list).
    custom_histogram_buckets: dict[str, list[float]] | None = None
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> SimServerSettings:
        parse_listen(self.listen)
        for family, bounds in (self.custom_histogram_buckets or {}).items():
            if family not in DEFAULT_BUCKETS:
                raise ValueError(
                    f"custom_histogram_buckets: unknown family {family!r} "
                    f"(known: {', '.join(DEFAULT_BUCKETS)})"
                )
            if not bounds or any(b <= 0 for b in bounds) or list(bounds) != sorted(set(bounds)):
                raise ValueError(
                    f"custom_histogram_buckets.{family}: expected positive, strictly increasing bounds"
                )
        return self


class SimServer:
    """One simulated replica: ``start()``, serve, ``stop()``."""

    def __init__(self, settings: SimServerSettings, profile: EngineProfile) -> None:
        self.settings = settings
        self.profile = profile
        self.model = settings.model_name or profile.model
        self.driver: EngineDriver | None = None
        self.requests = RequestStats(profile.max_model_len)
        self.port: int | None = None
        self._registry: CollectorRegistry | None = None
        self._runner: web.AppRunner | None = None
        self._ready_timer: asyncio.TimerHandle | None = None

    @property
    def ready(self) -> bool:
        return self.driver is not None

    async def start(self) -> None:
        """Bind the listener (port 0: a free one, see ``port``) and schedule readiness."""
        app = web.Application(middlewares=[self._until_ready])
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics_page)
        app.router.add_get("/lag", self._lag)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", lambda r: self._generate(r, chat=False))
        app.router.add_post("/v1/chat/completions", lambda r: self._generate(r, chat=True))
        # A short shutdown timeout: on SIGTERM open streams are cut, as vLLM aborts them.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        host, port = parse_listen(self.settings.listen)
        await web.TCPSite(self._runner, host, port, shutdown_timeout=1.0).start()
        self.port = int(self._runner.addresses[0][1]) if self._runner.addresses else port
        delay = self._cold_start_left()
        log.info(
            "%s on port %s: ready in %.2fs (speedup %g)", self.model, self.port, delay, self.settings.speedup
        )
        self._ready_timer = asyncio.get_running_loop().call_later(delay, self._become_ready)

    async def stop(self) -> None:
        if self._ready_timer is not None:
            self._ready_timer.cancel()
        if self.driver is not None:
            self.driver.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def _cold_start_left(self) -> float:
        s = self.settings
        cold = self.profile.cold_start_s if s.cold_start is None else s.cold_start
        started = time.time() if s.started_at is None else s.started_at
        return max(0.0, started + cold / s.speedup - time.time())

    def _become_ready(self) -> None:
        s = self.settings
        metrics = EngineMetrics(self.model, s.custom_histogram_buckets)
        clock = SpeedClock(s.speedup, now=asyncio.get_running_loop().time)
        self._registry = vllm_registry(
            PageSource(self._metrics, self.requests, self.model, time.time(), self.profile.kv_capacity_tokens)
        )
        self.driver = EngineDriver(
            self.profile,
            metrics,
            clock,
            stream_interval=s.stream_interval,
            seed=s.seed,
            on_finish=self._finished,
        )
        log.info("%s ready", self.model)

    def _finished(self, generation: Generation) -> None:
        req = generation.req
        self.requests.record(req.input_tokens, req.output_tokens, generation.max_tokens, req.preemptions)

    def _metrics(self) -> EngineMetrics:
        assert self.driver is not None
        return self.driver.metrics()

    # --- routes ---------------------------------------------------------------------------------

    @web.middleware
    async def _until_ready(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.driver is None:
            return web.json_response(
                {
                    "error": {
                        "message": "the engine is starting",
                        "type": "ServiceUnavailable",
                        "param": None,
                        "code": 503,
                    }
                },
                status=503,
            )
        return await handler(request)

    async def _health(self, _: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _metrics_page(self, request: web.Request) -> web.Response:
        assert self._registry is not None
        body, content_type = render(self._registry, request.headers.get("Accept"))
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _lag(self, request: web.Request) -> web.Response:
        """p90 and max lateness of the engine's wake-ups over the last ``window`` wall seconds (5)."""
        assert self.driver is not None
        try:
            window = float(request.query.get("window", "5"))
        except ValueError:
            return web.json_response({"error": "window: expected seconds"}, status=400)
        since = asyncio.get_running_loop().time() - window
        late = sorted(lag for at, lag in self.driver.lag if at >= since)
        p90 = late[min(len(late) - 1, int(0.9 * len(late)))] if late else None
        return web.json_response({"wakes": len(late), "p90_s": p90, "max_s": late[-1] if late else None})

    async def _models(self, _: web.Request) -> web.Response:
        card = {
            "id": self.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": self.model,
            "parent": None,
            "max_model_len": self.profile.max_model_len,
        }
        return web.json_response({"object": "list", "data": [card]})

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        assert self.driver is not None
        max_len = min(self.profile.max_model_len, self.profile.kv_capacity_tokens)
        try:
            ask = openai.parse_request(await request.read(), chat=chat, model=self.model, max_len=max_len)
        except openai.BadRequest as exc:
            return web.json_response(exc.body(), status=exc.status)
        generation = self.driver.submit(ask.prompt_tokens, ask.max_tokens)
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        if ask.stream:
            return await self._stream(request, ask, generation, ident)
        while not generation.finished:
            await _next_change(generation)
        return web.json_response(openai.full_answer(ask, ident, int(time.time())))

    async def _stream(
        self, request: web.Request, ask: openai.Ask, generation: Generation, ident: str
    ) -> web.StreamResponse:
        assert self.driver is not None
        events = openai.EventStream(ask, ident, int(time.time()))
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        if ask.chat:
            await response.write(events.opening())
        while generation.sent < ask.max_tokens:
            await _next_change(generation)
            produced = self.driver.produced(generation)
            if produced > generation.sent:
                chunk = events.tokens(generation.sent, produced)
                generation.sent = produced
                await response.write(chunk)
        await response.write(events.closing())
        await response.write_eof()
        return response


async def _next_change(generation: Generation) -> None:
    await generation.changed.wait()
    generation.changed.clear()


async def serve(settings: SimServerSettings, profile: EngineProfile, stop: asyncio.Event) -> None:
    """Run one sim-server until ``stop`` is set."""
    server = SimServer(settings, profile)
    await server.start()
    try:
        await stop.wait()
    finally:
        await server.stop()


def run_sim_server(settings: SimServerSettings, profile: EngineProfile) -> int:
    """Entry point of ``fleetslo sim-server``: serve until SIGTERM (exit 0) or SIGINT (exit 130)."""
    return run_until_signalled(lambda stop: serve(settings, profile, stop))
