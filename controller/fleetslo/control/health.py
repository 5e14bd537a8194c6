"""The controller's health as its probes see it: ``/healthz`` is progress, ``/readyz`` is service.

* ``/healthz`` (liveness) stays 200 while the loop makes progress: every target's job finished
  recently, or is running and has not been for longer than a reconcile can honestly take. A
  hung API server makes ticks fail in bounded time (the API budget), which is progress: restarting
  the controller would not bring the API server back.
* ``/readyz`` (readiness) is 200 once every target ran, and only while the Kubernetes API server
  answers: a controller that cannot reach it is alive but not doing its job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.settings import ControllerSettings, SourceKind
from fleetslo.core.config import parse_listen


class Heartbeat:
    """When each target's job last started and finished, for ``/healthz`` and ``/readyz``.

    Liveness is *progress*: a target is healthy while its job either finished within
    ``max_silence`` or is running, and has been for less than ``max_running`` (a reconcile's
    longest honest run: its API budget, a full drain, an observation). A loop that is stuck — a
    job hung past that, or no job finishing at all — is not healthy, and the kubelet restarts it.
    """

    def __init__(self, names: Sequence[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.names, self.clock = list(names), clock
        self._finished: dict[str, float] = {}
        self._running_since: dict[str, float] = {}
        self._lock = threading.Lock()

    def start(self, name: str) -> None:
        with self._lock:
            self._running_since[name] = self.clock()

    def beat(self, name: str) -> None:
        """The target's job finished (any outcome)."""
        with self._lock:
            self._running_since.pop(name, None)
            self._finished[name] = self.clock()

    def ready(self) -> bool:
        with self._lock:
            return all(n in self._finished for n in self.names)

    def healthy(self, max_silence: float, max_running: float = float("inf")) -> bool:
        return not self.stalled(max_silence, max_running)

    def stalled(self, max_silence: float, max_running: float = float("inf")) -> list[str]:
        """The targets whose job is stuck or has not finished for too long."""
        now = self.clock()
        with self._lock:
            stuck = []
            for n in self.names:
                since = self._running_since.get(n)
                if since is not None:
                    if now - since > max_running:
                        stuck.append(n)
                elif now - self._finished.get(n, now) > max_silence:
                    stuck.append(n)
            return stuck


@dataclass(frozen=True)
class Health:
    """How long a reconcile may honestly take, from the settings (``/healthz``)."""

    max_silence: float
    max_running: float

    @classmethod
    def of(cls, settings: ControllerSettings) -> Health:
        # The longest honest reconcile: all its API time, a drain to its timeout, one observation.
        source = settings.source
        observe = source.prometheus.timeout if source.kind == SourceKind.PROMETHEUS else source.direct.timeout
        drain = settings.gate.drain_timeout if settings.drain.enabled else 0.0
        longest = settings.kubernetes.api_budget + drain + observe + settings.interval
        return cls(max_silence=max(60.0, 5 * settings.interval), max_running=longest)


def http_server(
    settings: ControllerSettings, metrics: ControllerMetrics, heartbeat: Heartbeat, health: Health,
    api_reachable: Callable[[], bool | None],
) -> ThreadingHTTPServer:  # fmt: skip
    """``/healthz`` (progress), ``/readyz`` (every target ran, the API answers) and ``/metrics``."""
    host, port = parse_listen(settings.listen)

    def live() -> tuple[int, bytes]:
        stuck = heartbeat.stalled(health.max_silence, health.max_running)
        return (503, f"reconciles stalled: {', '.join(stuck)}\n".encode()) if stuck else (200, b"ok\n")

    def ready() -> tuple[int, bytes]:
        if not heartbeat.ready():
            return 503, b"starting\n"
        if api_reachable() is False:  # ticks finish, but on an API server that does not answer
            return 503, b"the Kubernetes API server is unreachable\n"
        return 200, b"ready\n"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                self._answer(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif self.path.startswith("/healthz"):
                self._answer(*live())
            elif self.path.startswith("/readyz"):
                self._answer(*ready())
            else:
                self._answer(404, b"not found\n")

        def _answer(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
