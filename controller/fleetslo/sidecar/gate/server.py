"""The gate as one object the sidecar starts and stops: proxy listener, admin listener, state.

``Gate`` owns the admission state, the stats, the upstream connection pool and the two aiohttp
listeners, and hands the sidecar what it needs: a collector for ``/metrics``, the windows of
exact latency, and a readiness check (not ready while draining). Wiring only; the rules live in
``admission``, ``proxy`` and ``admin``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection

import aiohttp
from aiohttp import web

from fleetslo.core.config import parse_listen
from fleetslo.sidecar.gate.admin import admin_app
from fleetslo.sidecar.gate.admission import Admission
from fleetslo.sidecar.gate.collector import GateCollector
from fleetslo.sidecar.gate.guard import BodyBudget, throttle_noisy_loggers
from fleetslo.sidecar.gate.paths import ModelNames
from fleetslo.sidecar.gate.proxy import Proxy
from fleetslo.sidecar.gate.stats import GateStats, GateWindows
from fleetslo.sidecar.gate.token import TokenSource
from fleetslo.sidecar.settings import GateServerSettings
from fleetslo.sidecar.thresholds import SloThresholds

log = logging.getLogger("fleetslo.gate")

#: How long a new upstream connection may take; a loopback vLLM that needs more is not there.
CONNECT_TIMEOUT = 10.0
#: Idle upstream connections are dropped after this long: under uvicorn's 5 s keep-alive (vLLM's
#: server), so the gate rarely reuses a connection that vLLM is closing.
UPSTREAM_KEEPALIVE = 4.0


def _token_source(s: GateServerSettings) -> TokenSource | None:
    """The admin token: from its file (re-read on change) when one is named, else as configured."""
    if s.admin_token_file is not None:
        return TokenSource(path=s.admin_token_file)
    if s.admin_token is not None and s.admin_token.get_secret_value():
        return TokenSource(static=s.admin_token.get_secret_value())
    return None


class Gate:
    """The admission gate of one sidecar."""

    def __init__(
        self,
        settings: GateServerSettings,
        slo: SloThresholds | None = None,
        ring_size: int = 64,
        served: Callable[[], Collection[str]] = tuple,
    ) -> None:
        """``served`` returns the engine's model names (the sidecar passes its last scrape's)."""
        self.settings = settings
        slo = slo or SloThresholds()
        self.admission = Admission(settings.max_inflight, settings.max_queue)
        self.stats = GateStats(slo.ttft, slo.tpot)
        self.windows = GateWindows(self.stats, ring_size)
        self.models = ModelNames(served, settings.served_model_name)
        self.budget = BodyBudget(settings.max_pending_bodies, settings.max_pending_bytes)
        self.collector = GateCollector(self.admission, self.stats, self.models.names)
        self.port: int | None = None
        self.admin_port: int | None = None
        self._runners: list[web.AppRunner] = []
        self._session: aiohttp.ClientSession | None = None

    def not_ready(self) -> str | None:
        """The sidecar's readiness check: Kubernetes stops routing here while draining."""
        return "gate draining" if self.admission.draining else None

    async def start(self) -> None:
        """Open the upstream pool and bind both listeners (port 0 picks a free one)."""
        s = self.settings
        throttle_noisy_loggers()
        # No pool limit: admission bounds generation requests; the pool must never add a second,
        # hidden queue. Bytes stay as vLLM sent them (no decompression, no added headers).
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=UPSTREAM_KEEPALIVE)
        self._session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        )  # fmt: skip
        proxy = Proxy(
            upstream=s.upstream, admission=self.admission, stats=self.stats,
            queue_timeout=s.queue_timeout, max_body=s.max_body, session=self._session,
            models=self.models, budget=self.budget, body_timeout=s.body_timeout, time_scale=s.time_scale,
        )  # fmt: skip
        app = web.Application(client_max_size=s.max_body)
        app.router.add_route("*", "/{tail:.*}", proxy.handle)
        self.port = await self._serve(app, s.listen)
        tokens = _token_source(s)
        if tokens is not None:
            self.admin_port = await self._serve(admin_app(self.admission, self.stats, tokens), s.admin_listen)
        log.info("gate on port %s → %s; admin API %s", self.port, s.upstream,
                 f"on port {self.admin_port}" if tokens else "off (no token)")  # fmt: skip

    async def _serve(self, app: web.Application, listen: str) -> int:
        # handler_cancellation: a client that hangs up cancels its handler, which closes the
        # upstream connection, which makes vLLM abort the request.
        # keepalive_timeout: aiohttp closes a connection that has not sent a whole request this
        # long after it opened or after its last answer, which bounds slow headers too.
        # lingering_time: after answering a body it stopped reading (408, 413, 503 busy), aiohttp
        # drains the rest for this long before closing; its default 10 s would hold the slow
        # client's connection, the very thing the timeouts are there to stop.
        runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True,
            keepalive_timeout=self.settings.header_timeout, lingering_time=1.0,
        )  # fmt: skip
        await runner.setup()
        self._runners.append(runner)
        host, port = parse_listen(listen)
        await web.TCPSite(runner, host, port).start()
        return int(runner.addresses[0][1]) if runner.addresses else port

    async def stop(self, grace: float = 0.0) -> None:
        """Stop admitting, give in-flight requests up to ``grace`` seconds, then close everything."""
        self.admission.drain()
        if grace > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.admission.wait_idle(), grace)
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None
