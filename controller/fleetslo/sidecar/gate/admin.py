"""The gate's admin API: read and set the limit, drain, status — behind a bearer token.

Served on its own listener (loopback by default) so it is never reachable through the public
port. Every request must carry ``Authorization: Bearer <token>``; the token is compared in
constant time (``hmac.compare_digest``), never logged or echoed, at least 16 characters long, and
re-read when its file changes (``token.TokenSource``). Without a token there is no
admin app at all (the caller does not start one).

- ``GET /admin/limit`` → ``{"limit": N}`` (``null``: no limit); ``PUT`` the same body to set it.
- ``POST /admin/drain`` → stop admitting; 200 once drained, 202 while requests remain.
  ``DELETE /admin/drain`` resumes admission (the replica was kept after all).
- ``GET /admin/status`` → limit, in flight, queued, draining, drained, rejections.

It must not touch requests or vLLM: it only reads and steers ``Admission``.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from fleetslo.sidecar.gate.admission import Admission, AdmissionState
from fleetslo.sidecar.gate.responses import json_error
from fleetslo.sidecar.gate.stats import GateStats
from fleetslo.sidecar.gate.token import TokenSource

log = logging.getLogger("fleetslo.gate.admin")

MAX_LIMIT = 65_536
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


class _AdminApi:
    def __init__(self, admission: Admission, stats: GateStats) -> None:
        self.admission = admission
        self.stats = stats

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

    async def drain(self, _: web.Request) -> web.Response:
        if not self.admission.draining:
            log.info("draining: %d in flight, %d queued", self.admission.inflight, self.admission.queued)
        self.admission.drain()
        state = self.admission.state()
        return web.json_response(_state_body(state), status=200 if state.drained else 202)

    async def resume(self, _: web.Request) -> web.Response:
        if self.admission.draining:
            log.info("drain cancelled: admitting again")
        self.admission.resume()
        return web.json_response(_state_body(self.admission.state()))

    async def status(self, _: web.Request) -> web.Response:
        body = _state_body(self.admission.state())
        body["rejected"] = dict(sorted(self.stats.rejected.items()))
        body["requests"] = dict(sorted(self.stats.outcomes.items()))
        return web.json_response(body)


def _bad_request(message: str) -> web.Response:
    return json_error(400, message, "invalid_request_error", "invalid_limit")
