"""Public fakes for tests, demos and users' own tests (like ``kopf.testing``).

``FakeVllmServer`` is a real HTTP server on loopback that answers ``/metrics`` with whatever a test
sets — a real vLLM capture, garbage, an error status, a slow answer — so the sidecar is exercised
over a real socket. ``grow_capture`` turns one capture into a live-looking page whose counters
advance over time. ``FakeClock`` is a settable clock for code that takes time as a parameter.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from controller import conventions as cv
from controller.actuators.base import PodEndpoint
from controller.settings import Target

_SAMPLE = re.compile(r"^(?P<name>[^\s{]+)(?P<labels>\{.*\})?\s+(?P<value>\S+)(?P<rest>.*)$")


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeVllmServer:
    """A loopback HTTP server posing as vLLM's ``/metrics`` endpoint.

    Set ``page`` (text or a callable returning text), ``status``, ``delay`` (seconds before the
    answer) or ``content_type`` at any time; the next request sees the change. ``requests``
    counts the scrapes served. ``stop()`` closes the port, as a crashed vLLM would.
    """

    def __init__(self, page: str | Callable[[], str] = "", host: str = "127.0.0.1", port: int = 0) -> None:
        self.page = page
        self.status = 200
        self.delay = 0.0
        self.content_type = "text/plain; version=0.0.4; charset=utf-8"
        self.requests = 0
        self.accept_headers: list[str] = []
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeVllmServer:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeVllmServer:
        return self.start()

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()

    def body(self) -> bytes:
        page = self.page() if callable(self.page) else self.page
        return page.encode("utf-8")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.requests += 1
                fake.accept_headers.append(self.headers.get("Accept", ""))
                if fake.delay:
                    time.sleep(fake.delay)
                body = fake.body() if self.path.startswith("/metrics") else b"not found\n"
                status = fake.status if self.path.startswith("/metrics") else 404
                self.send_response(status)
                self.send_header("Content-Type", fake.content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        return Handler


def grow_capture(text: str, factor: float) -> str:
    """The capture with every vLLM counter and histogram series multiplied by ``factor``.

    Gauges and ``_created`` timestamps are kept. The result is what the same server would show
    after ``factor`` times as much traffic of the same shape: windowed quantiles over it equal the
    capture's own, and rates are proportional to how fast ``factor`` grows.
    """
    out = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or line.startswith("#") or not _is_cumulative(match.group("name")):
            out.append(line)
            continue
        value = float(match.group("value")) * factor
        out.append(f"{match.group('name')}{match.group('labels') or ''} {value!r}{match.group('rest')}")
    return "\n".join(out) + "\n"


def _is_cumulative(name: str) -> bool:
    bare = cv.strip_vllm_prefix(name)
    if bare is None or bare.endswith("_created"):
        return False
    return bare.endswith(("_total", "_bucket", "_sum", "_count"))


def replay_page(
    text: str, requests_per_second: float, clock: Callable[[], float] = time.monotonic
) -> Callable[[], str]:
    """A page source for ``FakeVllmServer`` that replays a capture as live, growing traffic.

    The capture's finished-request count is scaled so the page shows ``requests_per_second``.
    """
    started = clock()
    finished = _finished_requests(text)
    per_second = requests_per_second / finished if finished else 0.0

    def page() -> str:
        return grow_capture(text, 1.0 + per_second * (clock() - started))

    return page


def _finished_requests(text: str) -> float:
    from controller.metrics.exposition import parse_vllm

    total = 0.0
    for snapshot in parse_vllm(text).values():
        total += snapshot.counter(cv.Counter.REQUEST_SUCCESS) or 0.0
    return total


class FakePodDirectory:
    """A ``PodDirectory`` whose pods a test sets: ``directory.set(target, [PodEndpoint(...)])``.

    Pods are keyed by ``namespace/name``; ``lookups`` counts the calls, so a test can check that
    an actuator asked for fresh pods instead of caching them.
    """

    def __init__(self) -> None:
        self.by_target: dict[str, list[PodEndpoint]] = {}
        self.lookups = 0

    def set(self, target: Target, pods: list[PodEndpoint]) -> None:
        self.by_target[f"{target.namespace}/{target.name}"] = list(pods)

    def pods(self, target: Target) -> list[PodEndpoint]:
        self.lookups += 1
        return list(self.by_target.get(f"{target.namespace}/{target.name}", []))
