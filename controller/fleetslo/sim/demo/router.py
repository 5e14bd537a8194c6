"""The demo's router: least outstanding requests over the replicas that take new requests.

``Router`` picks, for each request, the serving replica with the fewest requests it has sent there
and not yet seen finish (ties: the replica whose count changed longest ago) — the simulator's
router, over real gates. With no replica serving, requests wait at the router (as they do in the
simulator) and go out as soon as one is ready. The load generator calls it in process, which saves
a proxy hop of CPU; ``router_app`` puts the same router behind an HTTP port for anyone who wants to
``curl`` the fleet while the demo runs.

It routes; it must not measure latency (the load generator does) or know how replicas are run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection

import aiohttp
from aiohttp import web

#: (replica name, gate base URL) of every replica that takes new requests now.
Endpoints = Callable[[], list[tuple[str, str]]]

#: Wall seconds between two looks for a serving replica while none is.
WAIT_POLL_S = 0.01


class Router:
    """Least-outstanding routing over ``endpoints()`` (re-read on every pick)."""

    def __init__(self, endpoints: Endpoints, *, poll: float = WAIT_POLL_S) -> None:
        self.endpoints = endpoints
        self.poll = poll
        self.outstanding: dict[str, int] = {}
        self._changed: dict[str, int] = {}
        self._seq = 0
        #: Requests waiting for a serving replica right now.
        self.waiting = 0

    def pick(self, avoid: Collection[str] = ()) -> tuple[str, str] | None:
        """The least loaded serving replica, not one of ``avoid`` unless it is the only one."""
        serving = self.endpoints()
        candidates = [e for e in serving if e[0] not in avoid] or serving
        if not candidates:
            return None
        return min(candidates, key=lambda e: (self.outstanding.get(e[0], 0), self._changed.get(e[0], -1)))

    async def acquire(self, avoid: Collection[str] = ()) -> tuple[str, str]:
        """Wait for a serving replica and count one more request on it; ``release`` it after."""
        self.waiting += 1
        try:
            # Replicas turn ready on the fleet's own thread; polling is the simple bridge to it.
            while (choice := self.pick(avoid)) is None:  # noqa: ASYNC110
                await asyncio.sleep(self.poll)
        finally:
            self.waiting -= 1
        self._count(choice[0], +1)
        return choice

    def release(self, name: str) -> None:
        self._count(name, -1)

    def in_flight(self) -> int:
        return sum(self.outstanding.values())

    def _count(self, name: str, change: int) -> None:
        self._seq += 1
        self.outstanding[name] = self.outstanding.get(name, 0) + change
        self._changed[name] = self._seq


def router_app(router: Router, session: aiohttp.ClientSession) -> web.Application:
    """An HTTP front for ``router``: every ``/v1/...`` request is relayed, streamed, to a gate."""

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        name, base = await router.acquire()
        try:
            headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
            async with session.request(
                request.method, base + request.path_qs, data=body, headers=headers
            ) as up:
                response = web.StreamResponse(status=up.status)
                response.content_type = up.content_type
                await response.prepare(request)
                async for chunk in up.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except aiohttp.ClientError as exc:
            return web.json_response(
                {"error": {"message": f"replica {name}: {exc}", "code": 502}}, status=502
            )
        finally:
            router.release(name)

    app = web.Application()
    app.router.add_route("*", "/v1/{tail:.*}", relay)
    return app
