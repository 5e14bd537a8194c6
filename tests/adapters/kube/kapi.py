"""kmock's in-process Kubernetes API, run on its own thread for the (synchronous) official client.

``kmock.KubernetesEmulator`` serves stored objects over real HTTP, but does not emulate two things
the controller relies on. This module adds them, as little as possible, and says so:

* **optimistic concurrency**: the emulator keeps no ``resourceVersion``. ``ConcurrencyEmulator``
  stamps a new one on every create and update and answers 409 Conflict to a patch whose
  ``metadata.resourceVersion`` is not the stored one — what kube-apiserver does, and what makes
  Lease-based election safe;
* **label selectors**: the emulator ignores ``labelSelector`` on lists; equality selectors
  (``a=b,c=d``, all the controller sends) are applied here.

Everything else — routing, JSON merge and JSON patch, subresource paths, 404/409 Status bodies —
is kmock's own. What the emulator still does not do: no controllers run (status is whatever a test
writes), a ``/scale`` patch lands on the object itself, and a failed JSON-patch ``test`` gives 500
rather than 422.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import kmock
from fleetslo.control.kube.client import client_for
from kmock._internal import enums, rendering
from kubernetes import client

# One access-log line per API call would drown the controller's own log in test output.
logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


@attrs.define(kw_only=True)
class ConcurrencyEmulator(kmock.KubernetesEmulator):
    """kmock's emulator plus resourceVersion preconditions and equality label selectors."""

    _versions: Any = attrs.field(factory=lambda: itertools.count(1), init=False)
    _cas: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)

    async def _handle(self, request: rendering.Request) -> Any:
        if request.resource is None or request.action not in (enums.action.CREATE, enums.action.UPDATE):
            return await super()._handle(request)
        async with self._cas:  # check, apply and stamp as one step, as etcd's compare-and-swap does
            key = self._key(request)
            if request.action == enums.action.UPDATE and isinstance(request.data, dict):
                wanted = (request.data.get("metadata") or {}).get("resourceVersion")
                stored = self._stored_version(key)
                if wanted is not None and wanted != stored:
                    raise kmock.KubernetesError(409, "Conflict", f"resourceVersion {wanted} is not {stored}")
            response = await super()._handle(request)
            if key in self.objects and not self.objects[key].deleted:
                self.objects[key].patch({"metadata": {"resourceVersion": str(next(self._versions))}})
            return response

    @staticmethod
    def _key(request: rendering.Request) -> Any:
        if request.action == enums.action.CREATE:
            meta = (request.data or {}).get("metadata", {})
            return (request.resource, request.namespace or meta.get("namespace"), meta.get("name"))
        return (request.resource, request.namespace, request.name)

    def _stored_version(self, key: Any) -> str | None:
        if key not in self.objects or self.objects[key].deleted:
            return None
        version: str | None = (self.objects[key].get("metadata") or {}).get("resourceVersion")
        return version

    async def _serve_list(self, request: rendering.Request) -> Any:
        listed = await super()._serve_list(request)
        selector = dict(request.params).get("labelSelector")
        if selector and isinstance(listed, dict):
            wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
            listed["items"] = [i for i in listed["items"] if _matches(i, wanted)]
        return listed


def _matches(obj: dict[str, Any], wanted: dict[str, str]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


class KubeApi:
    """A running emulator: ``objects`` to arrange and inspect state, ``client()`` for the real client."""

    def __init__(self, emulator: ConcurrencyEmulator, url: str, loop: asyncio.AbstractEventLoop) -> None:
        self.emulator, self.url, self.loop = emulator, url, loop

    @property
    def objects(self) -> Any:
        return self.emulator.objects

    def client(self) -> client.ApiClient:
        return client_for(self.url)

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[resource, meta.get("namespace"), meta["name"]] = obj

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        return dict(self.objects[resource, namespace, name])

    def react(self, criteria: Any, payload: Any) -> None:
        """Add a reaction (e.g. an error status) on the emulator's loop."""
        done = threading.Event()

        def add() -> None:
            self.emulator[criteria] << payload
            done.set()

        self.loop.call_soon_threadsafe(add)
        done.wait(5)

    def requests(self, method: str) -> list[Any]:
        return list(self.emulator[method])


@contextmanager
def running_api() -> Iterator[KubeApi]:
    ready, box = threading.Event(), {}

    async def main() -> None:
        stop = asyncio.Event()
        async with ConcurrencyEmulator() as emulator, kmock.Server(emulator) as server:
            url = str(server.url).rstrip("/")
            box.update(api=KubeApi(emulator, url, asyncio.get_running_loop()), stop=stop)
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="kmock", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("kmock did not start")
    api: KubeApi = box["api"]  # type: ignore[assignment]
    try:
        yield api
    finally:
        api.loop.call_soon_threadsafe(box["stop"].set)  # type: ignore[attr-defined]
        thread.join(10)


class HungServer:
    """Accepts TCP connections and reads requests, but never writes a byte back."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self.held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        self.sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            self.held.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self.held:
            conn.close()
        self.sock.close()
