"""The gate's reverse proxy: admit, forward to vLLM through a connection pool, relay every byte.

Generation requests (``/v1/completions``, ``/v1/chat/completions``) go through admission and are
measured; every other path (``/v1/models``, ``/health``, ``/metrics``, …) is relayed as is. The
relay forwards each chunk as it arrives, unchanged and in order (``StreamTimer`` only looks at
it), with ``Content-Encoding`` preserved and no decompression. Faults:

- the body is read (at most ``max_body`` bytes, else 413) *before* admission, so a slow upload
  never holds a slot;
- vLLM unreachable → 502 with a JSON error, counted as ``upstream_unavailable``;
- vLLM breaks off mid-stream → the client's connection is closed without the final chunk, so the
  client sees an error rather than a stream that looks complete;
- the client disconnects → this handler is cancelled (``handler_cancellation``) and the upstream
  connection is closed, not pooled, so vLLM aborts the request and frees its batch slot.

It must not decide limits (``Admission`` does) or parse JSON bodies.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from fleetslo.sidecar.gate import responses
from fleetslo.sidecar.gate.admission import Admission, Rejected
from fleetslo.sidecar.gate.latency import StreamTimer
from fleetslo.sidecar.gate.stats import NOT_STREAMED, STREAMED, GateStats

log = logging.getLogger("fleetslo.gate")

#: Paths that take a batch slot in vLLM: admitted against the limit and measured.
ADMITTED_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})

#: Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus the ones aiohttp
#: recomputes for the next hop.
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
    "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length",
})  # fmt: skip

#: Outcomes of admitted requests (``fleetslo_gate_requests_total{outcome}``).
COMPLETED, CLIENT_DISCONNECTED, UPSTREAM_FAILED = "completed", "client_disconnected", "upstream_failed"


class UpstreamBroke(Exception):
    """vLLM closed or garbled the response after the status line was relayed."""


def _forwarded(headers: CIMultiDictProxy[str]) -> Iterable[tuple[str, str]]:
    """End-to-end headers only: hop-by-hop ones and those the ``Connection`` header names are dropped."""
    named = {t.strip().lower() for value in headers.getall("Connection", ()) for t in value.split(",")}
    drop = _HOP_BY_HOP | named if named else _HOP_BY_HOP
    return ((k, v) for k, v in headers.items() if k.lower() not in drop)


class Proxy:
    """One upstream, one connection pool; ``handle`` is the aiohttp handler for every path."""

    def __init__(
        self,
        *,
        upstream: str,
        admission: Admission,
        stats: GateStats,
        queue_timeout: float,
        max_body: int,
        session: aiohttp.ClientSession,
        time_scale: float = 1.0,
    ) -> None:
        self.upstream = upstream
        self.admission = admission
        self.stats = stats
        self.queue_timeout = queue_timeout
        self.max_body = max_body
        self.session = session
        self.time_scale = time_scale
        self._warned_at = -math.inf

    def _now(self) -> float:
        """The latency clock: the loop's, in the upstream's seconds (``time_scale``; 1 on a real fleet)."""
        return asyncio.get_running_loop().time() * self.time_scale

    async def handle(self, request: web.Request) -> web.StreamResponse:
        arrival = self._now()
        body = await self._read_body(request)
        if body is None:
            self.stats.rejected[responses.BODY_TOO_LARGE] += 1
            return responses.body_too_large(self.max_body)
        if request.path not in ADMITTED_PATHS:
            return await self._forward(request, body, None)
        try:
            await self.admission.acquire(self.queue_timeout)
        except Rejected as rejected:
            self.stats.rejected[rejected.reason] += 1
            return responses.overloaded(rejected.reason)
        try:
            return await self._forward(request, body, StreamTimer(arrival))
        finally:
            self.admission.release()

    async def _read_body(self, request: web.Request) -> bytes | None:
        """The whole body, or ``None`` as soon as it is known to exceed ``max_body``."""
        if request.content_length is not None and request.content_length > self.max_body:
            return None
        body = bytearray()
        async for chunk in request.content.iter_any():
            body += chunk
            if len(body) > self.max_body:
                return None
        return bytes(body)

    async def _forward(
        self, request: web.Request, body: bytes, timer: StreamTimer | None
    ) -> web.StreamResponse:
        try:
            upstream = await self._send(request, body)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self._warn_unreachable(exc)
            self.stats.rejected[responses.UPSTREAM_UNAVAILABLE] += 1
            if timer is not None:
                self.stats.outcomes[UPSTREAM_FAILED] += 1
            return responses.upstream_unavailable(type(exc).__name__)
        return await self._relay(request, upstream, timer)

    async def _send(self, request: web.Request, body: bytes) -> aiohttp.ClientResponse:
        """The upstream's answer (status and headers); the body is read by the relay."""
        url = URL(self.upstream + request.raw_path, encoded=True)
        headers, data = CIMultiDict(_forwarded(request.headers)), body if request.body_exists else None
        try:
            return await self.session.request(
                request.method, url, headers=headers, data=data, allow_redirects=False
            )
        except aiohttp.ClientConnectorError:
            raise  # nothing listens: vLLM is down, a retry would only wait longer
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            # A pooled connection that vLLM closed (its keep-alive expiring as we reused it): the
            # request never reached it, so one more try on a fresh connection is safe.
            return await self.session.request(
                request.method, url, headers=headers, data=data, allow_redirects=False
            )

    def _warn_unreachable(self, exc: BaseException) -> None:
        """One warning per 10 s at most: a down vLLM under traffic must not flood the log."""
        now = asyncio.get_running_loop().time()
        if now - self._warned_at >= 10.0:
            self._warned_at = now
            log.warning("upstream %s unreachable: %s", self.upstream, exc)

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, timer: StreamTimer | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        response.headers.extend(_forwarded(upstream.headers))
        if upstream.content_length is not None:
            response.content_length = upstream.content_length
        streamed = upstream.status == 200 and upstream.content_type == "text/event-stream"
        outcome = CLIENT_DISCONNECTED
        try:
            await response.prepare(request)
            if timer is not None and streamed:
                await self._copy_measured(upstream, response, timer)
            else:
                await self._copy(upstream, response)
            await response.write_eof()
            outcome = COMPLETED
        except UpstreamBroke as exc:
            outcome = UPSTREAM_FAILED
            log.warning("upstream broke off a response to %s: %s", request.path, exc)
            _hang_up(request)
        except ConnectionError:
            pass  # the client went away between two chunks
        finally:
            # Unless every byte was read, close (not pool) the upstream connection: vLLM sees the
            # disconnect and aborts the request. This also runs when the handler is cancelled.
            upstream.release() if outcome == COMPLETED else upstream.close()
            if timer is not None:
                self._record(timer, outcome, streamed, ok=200 <= upstream.status < 300)
        return response

    async def _copy(self, upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
        read = upstream.content.readany
        try:
            while chunk := await read():
                await response.write(chunk)
        except aiohttp.ClientPayloadError as exc:
            raise UpstreamBroke(str(exc)) from exc

    async def _copy_measured(
        self, upstream: aiohttp.ClientResponse, response: web.StreamResponse, timer: StreamTimer
    ) -> None:
        # The hot path of the gate: one read, one scan, one write per chunk, nothing else.
        read, write, now = upstream.content.readany, response.write, self._now
        try:
            while timer.first is None:
                chunk = await read()
                if not chunk:
                    return
                timer.feed(chunk, now())
                if timer.first is not None:
                    # Recorded at once: a long stream's TTFT shows up before the stream ends.
                    self.stats.ttft.observe(timer.first - timer.arrival)
                await write(chunk)
            while chunk := await read():
                timer.feed(chunk, now())
                await write(chunk)
        except aiohttp.ClientPayloadError as exc:
            raise UpstreamBroke(str(exc)) from exc

    def _record(self, timer: StreamTimer, outcome: str, streamed: bool, ok: bool) -> None:
        self.stats.outcomes[outcome] += 1
        if outcome != COMPLETED or not ok:
            return  # an error answer's latency says nothing about serving
        now = self._now()
        if streamed:
            had_ttft = timer.first is not None
            measured = timer.finish(now)
            if not had_ttft and measured.ttft is not None:
                self.stats.ttft.observe(measured.ttft)  # the first token was in the unterminated tail
            if measured.tpot is not None:
                self.stats.tpot.observe(measured.tpot)
        self.stats.e2e[STREAMED if streamed else NOT_STREAMED].observe(now - timer.arrival)


def _hang_up(request: web.Request) -> None:
    """Close the client connection after what was sent so far, without a final chunk."""
    if request.transport is not None:
        request.transport.close()
