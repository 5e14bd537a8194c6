"""The gate's admin API: read and set the limit, drain, status — behind a bearer token.

Served on its own listener (loopback by default) so it is never reachable through the public
port. Every request must carry ``Authorization: Bearer <token>``; the token is compared in
constant time (``hmac.compare_digest``), never logged or echoed, at least 16 characters long, and
re-read when its file changes (``token.TokenSource``). Without a token there is no
admin app at all (the caller does not start one).

- ``GET /admin/limit`` → ``{"limit": N}`` (``null``: no limit); ``PUT`` the same body to set it.
- ``POST /admin/drain`` → stop admitting; 200 once drained, 202 while requests remain. An optional
  body ``{"owner": "<who>", "ttl": <seconds>}`` makes it a *lease*: unless POSTed again (renewed)
  within ``ttl`` seconds, the gate resumes by itself, so a controller killed mid-drain cannot leave
  a replica refusing requests for ever. Without ``ttl`` the drain lasts (the pod's own preStop
  hook drains that way: the pod is going). ``DELETE /admin/drain`` resumes admission (the replica
  was kept after all).
- ``GET /admin/status`` → limit, in flight, queued, draining, drained, rejections.

It must not touch requests or vLLM: it only reads and steers ``Admission``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from fleetslo.sidecar.gate.admission import Admission, AdmissionState
from fleetslo.sidecar.gate.responses import json_error
from fleetslo.sidecar.gate.stats import GateStats
from fleetslo.sidecar.gate.token import TokenSource

log = logging.getLogger("fleetslo.gate.admin")

MAX_LIMIT = 65_536
#: The longest drain lease a caller may ask for (an hour: longer is a forgotten drain).
MAX_DRAIN_TTL = 3600.0
MAX_OWNER_LENGTH = 253
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def admin_app(admission: Admission, stats: GateStats, token: str | TokenSource) -> web.Application:
    """The admin application; a ``str`` token must be usable (``token.token_problem``)."""
    tokens = token if isinstance(token, TokenSource) else TokenSource(static=token)
    api = _AdminApi(admission, stats)
    app = web.Application(middlewares=[_bearer_auth(tokens)], client_max_size=4096)
    app.router.add_get("/admin/limit", api.get_limit)
    app.router.add_put("/admin/limit", api.put_limit)
    app.router.add_post("/admin/drain", api.drain)
    app.router.add_delete("/admin/drain", api.resume)
    app.router.add_get("/admin/status", api.status)
    return app


def _bearer_auth(tokens: TokenSource) -> Middleware:
    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        expected = tokens.current()  # re-read when the file changed: a rotated token works at once
        # compare_digest on bytes of any length: the time taken does not depend on the token.
        if (
            expected is None
            or scheme.lower() != "bearer"
            or not hmac.compare_digest(given.strip().encode(), expected)
        ):
            log.warning("admin API: refused %s %s from %s", request.method, request.path, request.remote)
            return json_error(
                401, "A valid bearer token is required.", "authentication_error", "invalid_token",
                headers={"WWW-Authenticate": 'Bearer realm="fleetslo-gate"'},
            )  # fmt: skip
        return await handler(request)

    return auth


def _state_body(state: AdmissionState) -> dict[str, Any]:
    return {
        "limit": state.limit, "inflight": state.inflight, "queued": state.queued,
        "max_queue": state.max_queue, "draining": state.draining, "drained": state.drained,
    }  # fmt: skip


@dataclass
class _DrainLease:
    """Who drains this gate and until when (``timer`` resumes it; renewing replaces the lease)."""

    owner: str | None
    expires_at: float | None
    timer: asyncio.TimerHandle | None = None


class _AdminApi:
    def __init__(self, admission: Admission, stats: GateStats) -> None:
        self.admission = admission
        self.stats = stats
        self.lease: _DrainLease | None = None

    async def get_limit(self, _: web.Request) -> web.Response:
        return web.json_response({"limit": self.admission.limit})

    async def put_limit(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError, RecursionError):
            # RecursionError: a body nested thousands deep ("[[[[...") is bad JSON here, not a crash.
            return _bad_request('expected a JSON body such as {"limit": 64}')
        if not isinstance(body, dict) or "limit" not in body:
            return _bad_request('limit: required, e.g. {"limit": 64}')
        limit = body["limit"]
        if limit is not None and (type(limit) is not int or not 1 <= limit <= MAX_LIMIT):
            return _bad_request(f"limit: expected an integer 1-{MAX_LIMIT} or null (got {limit!r})")
        previous = self.admission.set_limit(limit)
        if previous != limit:
            log.info("limit changed from %s to %s", previous, limit)
        return web.json_response({"limit": limit, "previous": previous})

    async def drain(self, request: web.Request) -> web.Response:
        parsed = _drain_request(await request.read())
        if isinstance(parsed, str):
            return json_error(400, parsed, "invalid_request_error", "invalid_drain")
        owner, ttl = parsed
        if not self.admission.draining:
            log.info("draining for %s (ttl %s): %d in flight, %d queued", owner or "unnamed caller",
                     ttl, self.admission.inflight, self.admission.queued)  # fmt: skip
        self._lease_drain(owner, ttl)
        self.admission.drain()
        state = self.admission.state()
        return web.json_response(self._drain_body(state), status=200 if state.drained else 202)

    def _lease_drain(self, owner: str | None, ttl: float | None) -> None:
        """Replace the drain's lease: a ``ttl`` arms the timer that resumes, none disarms it."""
        self._end_lease()
        loop = asyncio.get_running_loop()
        lease = _DrainLease(owner, None if ttl is None else loop.time() + ttl)
        if ttl is not None:
            lease.timer = loop.call_later(ttl, self._expire, lease)
        self.lease = lease

    def _expire(self, lease: _DrainLease) -> None:
        if self.lease is not lease:
            return  # renewed or resumed meanwhile
        log.warning("drain by %s expired without renewal: admitting again", lease.owner or "unnamed caller")
        self.lease = None
        self.admission.resume()

    def _end_lease(self) -> None:
        if self.lease is not None and self.lease.timer is not None:
            self.lease.timer.cancel()
        self.lease = None

    def _drain_body(self, state: AdmissionState) -> dict[str, Any]:
        """The state, and while draining who drains and for how long yet (``null``: no expiry)."""
        body = _state_body(state)
        if not state.draining:
            return body
        lease = self.lease or _DrainLease(None, None)
        body["drain_owner"] = lease.owner
        now = asyncio.get_running_loop().time()
        body["drain_expires_in"] = (
            None if lease.expires_at is None else round(max(0.0, lease.expires_at - now), 3)
        )
        return body

    async def resume(self, _: web.Request) -> web.Response:
        if self.admission.draining:
            log.info("drain cancelled: admitting again")
        self._end_lease()
        self.admission.resume()
        return web.json_response(self._drain_body(self.admission.state()))

    async def status(self, _: web.Request) -> web.Response:
        body = self._drain_body(self.admission.state())
        body["rejected"] = dict(sorted(self.stats.rejected.items()))
        body["requests"] = dict(sorted(self.stats.outcomes.items()))
        return web.json_response(body)


def _drain_request(raw: bytes) -> tuple[str | None, float | None] | str:
    """``(owner, ttl)`` from a drain body (empty: an unnamed drain without expiry), or the error."""
    if not raw.strip():
        return None, None
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return 'expected a JSON body such as {"owner": "fleetslo-controller", "ttl": 30}'
    if not isinstance(body, dict):
        return 'expected a JSON object such as {"owner": "fleetslo-controller", "ttl": 30}'
    owner, ttl = body.get("owner"), body.get("ttl")
    if owner is not None and (not isinstance(owner, str) or not 0 < len(owner) <= MAX_OWNER_LENGTH):
        return f"owner: expected a name of 1-{MAX_OWNER_LENGTH} characters"
    if ttl is not None and (
        type(ttl) not in (int, float) or not 0 < ttl <= MAX_DRAIN_TTL  # bool is no number here
    ):
        return f"ttl: expected seconds, more than 0 and at most {MAX_DRAIN_TTL:g} (got {ttl!r})"
    return owner, None if ttl is None else float(ttl)


def _bad_request(message: str) -> web.Response:
    return json_error(400, message, "invalid_request_error", "invalid_limit")
