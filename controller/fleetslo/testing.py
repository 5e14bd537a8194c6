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
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from fleetslo.control.ports import ActuationResult, PodEndpoint, ScaleState
from fleetslo.core import conventions as cv
from fleetslo.core.errors import Conflict
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.core.spec import FleetSLO, Target

_SAMPLE = re.compile(r"^(?P<name>[^\s{]+)(?P<labels>\{.*\})?\s+(?P<value>\S+)(?P<rest>.*)$")


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (a scrape timing out) is normal here, not a traceback."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


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
        self._server = _QuietServer((host, port), self._handler())
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
    from fleetslo.core.metrics.exposition import parse_vllm

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


# --------------------------------------------------------------------------------------------
# The controller's parts: source, actuators, events (the loop's scenario tests and the demo)
# --------------------------------------------------------------------------------------------


def _key(target: Target) -> str:
    return f"{target.namespace}/{target.name}"


class FakeSource:
    """A ``Source`` a test steers: ``fn(slo, replicas, batch_limit, now)`` builds the observation
    (default: one with no signals), ``error`` is raised instead; ``calls`` records (name, now)."""

    def __init__(
        self, fn: Callable[[FleetSLO, ReplicaCounts, int | None, float], Observation] | None = None
    ) -> None:
        self.fn = fn
        self.error: Exception | None = None
        self.calls: list[tuple[str, float]] = []

    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        self.calls.append((slo.metadata.name, now))
        if self.error is not None:
            raise self.error
        if self.fn is not None:
            return self.fn(slo, replicas, batch_limit, now)
        return Observation(slo.metadata.name, now, 60.0, replicas, batch_limit=batch_limit)

    @classmethod
    def whole(cls) -> FakeSource:
        """A source whose every ready replica reported fresh data (no signals in it): enough for the
        loop's scale-down guard, so a scripted policy's scale-down goes through."""
        return cls(
            lambda slo, replicas, batch_limit, now: Observation(
                slo.metadata.name,
                now,
                60.0,
                replicas,
                batch_limit=batch_limit,
                replicas_reporting=replicas.ready,
                data_age=5.0,
            )
        )


class FakeReplicaActuator:
    """Replicas in memory: ``scale`` sets the desired count, ``settle()`` makes it all ready.

    ``errors[(op, "ns/name")]`` (op ``read`` or ``scale``) is raised on that call; ``writes``
    records every scale that changed something, as ``("ns/name", replicas)``. A scale planned
    against a count that is no longer there (``expected``) raises ``Conflict``, as the real one.
    """

    def __init__(self, initial: int = 1) -> None:
        self.initial = initial
        self.desired: dict[str, int] = {}
        self.ready: dict[str, int] = {}
        self.writes: list[tuple[str, int]] = []
        self.errors: dict[tuple[str, str], Exception] = {}
        self.calls: list[tuple[str, str]] = []

    def set(self, target: Target, desired: int, ready: int | None = None) -> None:
        self.desired[_key(target)] = desired
        self.ready[_key(target)] = desired if ready is None else ready

    def settle(self) -> None:
        self.ready.update(self.desired)

    def _enter(self, op: str, target: Target) -> str:
        key = _key(target)
        self.calls.append((op, key))
        if (op, key) in self.errors:
            raise self.errors[(op, key)]
        self.desired.setdefault(key, self.initial)
        self.ready.setdefault(key, self.desired[key])
        return key

    def read(self, target: Target) -> ScaleState:
        key = self._enter("read", target)
        desired, ready = self.desired[key], self.ready[key]
        counts = ReplicaCounts(min(ready, desired), max(0, desired - ready), max(0, ready - desired))
        return ScaleState(desired, counts)

    def scale(self, target: Target, replicas: int, *, expected: int | None = None) -> ActuationResult:
        key = self._enter("scale", target)
        if expected is not None and self.desired[key] != expected:
            raise Conflict(f"{key} has {self.desired[key]} replicas, the write was planned for {expected}")
        if self.desired[key] == replicas:
            return ActuationResult(False, f"{key} already has {replicas}")
        before, self.desired[key] = self.desired[key], replicas
        self.ready[key] = min(self.ready[key], replicas)
        self.writes.append((key, replicas))
        return ActuationResult(True, f"scaled {key} from {before} to {replicas}")


class FakeBatchLimitActuator:
    """Batch limits in memory; ``error`` is raised by ``set_limit``; ``writes`` records changes."""

    def __init__(self, initial: int | None = None) -> None:
        self.limits: dict[str, int | None] = {}
        self.initial = initial
        self.writes: list[tuple[str, int]] = []
        self.error: Exception | None = None

    def read_limit(self, target: Target) -> int | None:
        return self.limits.get(_key(target), self.initial)

    def set_limit(self, target: Target, limit: int) -> ActuationResult:
        if self.error is not None:
            raise self.error
        if self.read_limit(target) == limit:
            return ActuationResult(False, f"{_key(target)} already at limit {limit}")
        self.limits[_key(target)] = limit
        self.writes.append((_key(target), limit))
        return ActuationResult(True, f"set limit of {_key(target)} to {limit}")


class FakeDrainer:
    """Drains pods named ``<target>-drained-<n>``; ``short_by`` drains that many fewer than asked."""

    def __init__(self) -> None:
        self.short_by = 0
        self.drained: list[tuple[str, list[str]]] = []
        self.resumed: list[tuple[str, list[str]]] = []
        self.orphans: dict[str, list[str]] = {}
        self._serial = 0

    def drain(self, target: Target, count: int) -> list[str]:
        names = []
        for _ in range(max(0, count - self.short_by)):
            self._serial += 1
            names.append(f"{target.name}-drained-{self._serial}")
        self.drained.append((_key(target), names))
        return names

    def resume(self, target: Target, names: Sequence[str]) -> None:
        self.resumed.append((_key(target), list(names)))

    def resume_orphans(self, target: Target) -> list[str]:
        """Resumes what ``orphans`` lists for the target (drains a gone controller left)."""
        names = self.orphans.pop(_key(target), [])
        if names:
            self.resumed.append((_key(target), list(names)))
        return names


class FakePodMarker:
    """Records which pods were marked for removal and unmarked."""

    def __init__(self) -> None:
        self.marked: list[tuple[str, list[str]]] = []
        self.unmarked: list[tuple[str, list[str]]] = []

    def mark(self, target: Target, names: Sequence[str]) -> None:
        self.marked.append((_key(target), list(names)))

    def unmark(self, target: Target, names: Sequence[str]) -> None:
        self.unmarked.append((_key(target), list(names)))


class FakeEventSink:
    """Records Kubernetes Events as ``(target name, reason, message, warning)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, bool]] = []

    def event(self, target: Target, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.append((target.name, reason, message, warning))
