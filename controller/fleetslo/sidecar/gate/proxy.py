"""The gate's reverse proxy: admit, forward to vLLM through a connection pool, relay every byte.

Requests that may run the model (``paths.is_admitted``: every write except tokenizer, health and
operator endpoints) go through admission; streamed answers of the OpenAI generation paths are
measured. Every other request (``/v1/models``, ``/health``, ``/metrics``, …) is relayed at once.
The relay forwards each chunk as it arrives, unchanged and in order (``StreamTimer`` only looks
at it), with ``Content-Encoding`` preserved and no decompression. Every series is labelled with
the request's model (``paths.ModelNames``). Faults:

- the body is read (at most ``max_body`` bytes, else 413; within ``body_timeout``, else 408;
  inside the ``BodyBudget`` of bodies held at once, else 503 ``busy``) *before* admission, so a
  slow upload never holds a slot;
- a request line in absolute form (``GET http://x/ HTTP/1.1``) → 400: the gate is not a forward
  proxy;
- vLLM unreachable → 502 with a JSON error, counted as ``upstream_unavailable``;
- vLLM breaks off mid-stream → the client's connection is closed without the final chunk, so the
  client sees an error rather than a stream that looks complete;
- the client disconnects → this handler is cancelled (``handler_cancellation``) and the upstream
  connection is closed, not pooled, so vLLM aborts the request and frees its batch slot.

Outcomes (``fleetslo_gate_requests_total{model_name,outcome}``, admitted paths only): a user saw a
good answer (``completed``), a bad one (``rejected`` by the gate, ``upstream_error`` 5xx from
vLLM, ``upstream_failed`` unreachable or broken off), or none that counts either way
(``client_disconnected``, ``invalid``: too large, too slow to upload).

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
from fleetslo.sidecar.gate.guard import BodyBudget
from fleetslo.sidecar.gate.latency import StreamTimer
from fleetslo.sidecar.gate.paths import ModelNames, is_admitted
from fleetslo.sidecar.gate.stats import NOT_STREAMED, STREAMED, GateStats, ModelStats

log = logging.getLogger("fleetslo.gate")

#: Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus the ones aiohttp
#: recomputes for the next hop.
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
    "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length",
})  # fmt: skip

#: Outcomes of admitted requests (``fleetslo_gate_requests_total{outcome}``).
COMPLETED, CLIENT_DISCONNECTED, UPSTREAM_FAILED = "completed", "client_disconnected", "upstream_failed"
REJECTED, UPSTREAM_ERROR, INVALID = "rejected", "upstream_error", "invalid"
OUTCOMES = (COMPLETED, REJECTED, UPSTREAM_ERROR, UPSTREAM_FAILED, CLIENT_DISCONNECTED, INVALID)


class UpstreamBroke(Exception):
    """vLLM closed or garbled the response after the status line was relayed."""


def _forwarded(headers: CIMultiDictProxy[str]) -> Iterable[tuple[str, str]]:
    """End-to-end headers only: hop-by-hop ones and those the ``Connection`` header names are dropped."""
    named = {t.strip().lower() for value in headers.getall("Connection", ()) for t in value.split(",")}
    drop = _HOP_BY_HOP | named if named else _HOP_BY_HOP
    return ((k, v) for k, v in headers.items() if k.lower() not in drop)


class _Body:
    """A request body on its way upstream; emptied once sent, so its memory goes at once."""

    __slots__ = ("counted", "data", "opened")

    def __init__(self) -> None:
        self.data = b""
        self.opened = False
        #: Bytes charged to the budget for this body.
        self.counted = 0


class _Refused(Exception):
    """The body cannot be taken: ``response`` says why."""

    def __init__(self, reason: str, response: web.StreamResponse) -> None:
        super().__init__(reason)
        self.reason = reason
        self.response = response


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
        models: ModelNames | None = None,
        budget: BodyBudget | None = None,
        body_timeout: float = 30.0,
        time_scale: float = 1.0,
    ) -> None:
        self.upstream = upstream
        self.admission = admission
        self.stats = stats
        self.queue_timeout = queue_timeout
        self.max_body = max_body
        self.session = session
        self.models = models or ModelNames()
        self.budget = budget or BodyBudget(max_bodies=1024, max_bytes=1 << 30)
        self.body_timeout = body_timeout
        self.time_scale = time_scale
        self._warned_at = -math.inf

    def _now(self) -> float:
        """The latency clock: the loop's, in the upstream's seconds (``time_scale``; 1 on a real fleet)."""
        return asyncio.get_running_loop().time() * self.time_scale

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not request.raw_path.startswith("/"):
            log.info("refused a request line in absolute form from %s", request.remote)
            self.stats.model(self.models.of(b"")).rejected[responses.BAD_REQUEST] += 1
            return responses.absolute_form()
        admitted = is_admitted(request.method, request.path)
        body = _Body()
        try:
            try:
                await self._take_body(request, body)
            except _Refused as refused:
                stats = self.stats.model(self.models.of(body.data))
                stats.rejected[refused.reason] += 1
                if admitted:
                    stats.outcomes[REJECTED if refused.reason == responses.BUSY else INVALID] += 1
                return refused.response
            if not admitted:
                return await self._forward(request, body, None, None)
            return await self._admit_and_forward(request, body, self.stats.model(self.models.of(body.data)))
        finally:
            self._drop(body)  # also when the client hangs up mid-upload (the handler is cancelled)

    async def _admit_and_forward(
        self, request: web.Request, body: _Body, stats: ModelStats
    ) -> web.StreamResponse:
        # TTFT starts when the request is whole: its wait in the queue counts, a slow upload
        # (the client's own time) does not.
        arrival = self._now()
        stats.queued += 1
        try:
            await self.admission.acquire(self.queue_timeout)
        except Rejected as rejected:
            stats.rejected[rejected.reason] += 1
            stats.outcomes[REJECTED] += 1
            return responses.overloaded(rejected.reason)
        finally:
            stats.queued -= 1
        stats.inflight += 1
        try:
            return await self._forward(request, body, StreamTimer(arrival), stats)
        finally:
            stats.inflight -= 1
            self.admission.release()

    async def _take_body(self, request: web.Request, body: _Body) -> None:
        """Read the whole body into ``body`` within the budget and the time allowed."""
        if request.content_length is not None and request.content_length > self.max_body:
            raise _Refused(responses.BODY_TOO_LARGE, responses.body_too_large(self.max_body))
        if not self.budget.open():
            raise _Refused(responses.BUSY, responses.overloaded(responses.BUSY))
        body.opened = True
        try:
            async with asyncio.timeout(self.body_timeout):
                body.data = await self._read_body(request, body)
        except TimeoutError:
            _close_after_answer(request)
            raise _Refused(responses.BODY_TIMEOUT, responses.body_timeout(self.body_timeout)) from None

    async def _read_body(self, request: web.Request, body: _Body) -> bytes:
        data = bytearray()
        async for chunk in request.content.iter_any():
            if len(data) + len(chunk) > self.max_body:
                _close_after_answer(request)  # the rest of the upload is not worth reading
                raise _Refused(responses.BODY_TOO_LARGE, responses.body_too_large(self.max_body))
            if not self.budget.grow(len(chunk)):
                _close_after_answer(request)
                raise _Refused(responses.BUSY, responses.overloaded(responses.BUSY))
            body.counted += len(chunk)
            data += chunk
        return bytes(data)

    def _drop(self, body: _Body) -> None:
        """Give the body's place and bytes back to the budget (once)."""
        if body.opened:
            self.budget.close(body.counted)
            body.opened, body.counted = False, 0
        body.data = b""

    async def _forward(
        self, request: web.Request, body: _Body, timer: StreamTimer | None, stats: ModelStats | None
    ) -> web.StreamResponse:
        """Send upstream and relay the answer; ``timer`` and ``stats`` only for admitted requests."""
        try:
            upstream = await self._send(request, body)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self._warn_unreachable(exc)
            (stats or self.stats.model(self.models.of(b""))).rejected[responses.UPSTREAM_UNAVAILABLE] += 1
            if stats is not None:
                stats.outcomes[UPSTREAM_FAILED] += 1
            return responses.upstream_unavailable(type(exc).__name__)
        return await self._relay(request, upstream, timer, stats)

    async def _send(self, request: web.Request, body: _Body) -> aiohttp.ClientResponse:
        """The upstream's answer (status and headers); the body is read by the relay."""
        try:
            return await self._request(request, body.data if request.body_exists else None)
        finally:
            self._drop(body)  # sent (or failed): its memory is not needed while the answer streams

    async def _request(self, request: web.Request, data: bytes | None) -> aiohttp.ClientResponse:
        url = URL(self.upstream + request.raw_path, encoded=True)
        headers = CIMultiDict(_forwarded(request.headers))
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
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        timer: StreamTimer | None,
        stats: ModelStats | None,
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        response.headers.extend(_forwarded(upstream.headers))
        if upstream.content_length is not None:
            response.content_length = upstream.content_length
        streamed = upstream.status == 200 and upstream.content_type == "text/event-stream"
        outcome = CLIENT_DISCONNECTED
        try:
            await response.prepare(request)
            if timer is not None and stats is not None and streamed:
                await self._copy_measured(upstream, response, timer, stats)
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
            if timer is not None and stats is not None:
                self._record(timer, stats, outcome, streamed, upstream.status)
        return response

    async def _copy(self, upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
        read = upstream.content.readany
        try:
            while chunk := await read():
                await response.write(chunk)
        except aiohttp.ClientPayloadError as exc:
            raise UpstreamBroke(str(exc)) from exc

    async def _copy_measured(
        self,
        upstream: aiohttp.ClientResponse,
        response: web.StreamResponse,
        timer: StreamTimer,
        stats: ModelStats,
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
                    stats.ttft.observe(timer.first - timer.arrival)
                await write(chunk)
            while chunk := await read():
                timer.feed(chunk, now())
                await write(chunk)
        except aiohttp.ClientPayloadError as exc:
            raise UpstreamBroke(str(exc)) from exc

    def _record(
        self, timer: StreamTimer, stats: ModelStats, outcome: str, streamed: bool, status: int
    ) -> None:
        if outcome == COMPLETED and status >= 500:
            outcome = UPSTREAM_ERROR
        stats.outcomes[outcome] += 1
        if outcome != COMPLETED or not 200 <= status < 300:
            return  # an error answer's latency says nothing about serving
        now = self._now()
        if streamed:
            had_ttft = timer.first is not None
            measured = timer.finish(now)
            if not had_ttft and measured.ttft is not None:
                stats.ttft.observe(measured.ttft)  # the first token was in the unterminated tail
            if measured.tpot is not None:
                stats.tpot.observe(measured.tpot)
        stats.e2e[STREAMED if streamed else NOT_STREAMED].observe(now - timer.arrival)


def _close_after_answer(request: web.Request) -> None:
    """Do not keep this connection alive: the client sent something we stopped reading."""
    request.protocol.keep_alive(False)


def _hang_up(request: web.Request) -> None:
    """Close the client connection after what was sent so far, without a final chunk."""
    if request.transport is not None:
        request.transport.close()
