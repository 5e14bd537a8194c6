"""Observations straight from the target's sidecars, for clusters without Prometheus and the demo.

Each observe lists the target's pods (``PodDirectory``), scrapes every ready pod's sidecar
``/vllm/metrics`` (the last raw vLLM page; 503 while vLLM is down) concurrently, keeps a bounded
history per pod and builds the observation with ``controller.observation.build_observation`` — the
same code the simulator uses, so a policy sees the same kind of numbers in both. Optionally the
sidecar's ``/metrics`` gives GPU utilization, integrated over time into busy seconds.

A pod that does not answer, answers an error or lacks the model is **not reporting** this time:
it adds no sample, so it never looks idle; its earlier samples still count for the window it
served in. Only a failure to list the pods at all is an error (raised by the directory).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from controller import conventions as cv
from controller.actuators.base import PodDirectory, PodEndpoint
from controller.errors import ExpositionError
from controller.metrics.exposition import parse_vllm
from controller.metrics.window import SnapshotRing
from controller.model import EngineSnapshot, Observation, ReplicaCounts
from controller.observation import build_observation
from controller.settings import FleetSLO
from controller.sources.prometheus import observation_window

log = logging.getLogger("fleetslo.source.direct")


@dataclass(frozen=True, slots=True)
class PodScrape:
    """One pod's vLLM page for the target's model, and its cumulative GPU-busy seconds if known."""

    at: float
    snapshot: EngineSnapshot
    busy_seconds: float | None


@dataclass(frozen=True, slots=True)
class _Page:
    snapshot: EngineSnapshot
    utilization: float | None


class _PodHistory:
    """The scrapes of one pod, and the GPU-busy integral that goes with them."""

    def __init__(self, capacity: int) -> None:
        self.ring: SnapshotRing[PodScrape] = SnapshotRing(capacity)
        self.last_seen = 0.0

    def add(self, at: float, page: _Page) -> None:
        newest = self.ring.newest()
        self.ring.append(at, PodScrape(at, page.snapshot, self._busy(at, page.utilization, newest)))
        self.last_seen = at

    @staticmethod
    def _busy(at: float, utilization: float | None, newest: tuple[float, PodScrape] | None) -> float | None:
        if utilization is None:
            return None
        if newest is None or newest[1].busy_seconds is None:
            return 0.0  # the integral starts here; the first window with two points has a rate
        return newest[1].busy_seconds + utilization * (at - newest[0])


class DirectSource:
    """``Source`` that scrapes the sidecars of a target's pods itself."""

    def __init__(
        self,
        pods: PodDirectory,
        *,
        port: int = 9400,
        scheme: str = "http",
        timeout: float = 2.0,
        interval: float = 15.0,
        gpu_utilization: bool = True,
        url: Callable[[PodEndpoint], str] | None = None,
        transport: httpx.BaseTransport | None = None,
        workers: int = 16,
    ) -> None:
        self.pods = pods
        self.interval = interval
        self.gpu_utilization = gpu_utilization
        self._url = url or (lambda pod: f"{scheme}://{pod.ip}:{port}")
        self._http = httpx.Client(timeout=timeout, transport=transport)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fleetslo-direct")
        self._histories: dict[str, dict[str, _PodHistory]] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        spec = slo.spec
        window = observation_window(slo)
        ready = [p for p in self.pods.pods(spec.target) if p.ready and p.ip]
        pages = list(self._pool.map(lambda pod: self._scrape(pod, spec.target.model_name), ready))
        histories = self._histories.setdefault(slo.metadata.name, {})
        for pod, page in zip(ready, pages, strict=True):
            if page is not None:
                histories.setdefault(pod.name, _PodHistory(self._capacity(window))).add(now, page)
        self._forget(histories, now - window - self.interval)
        rings = [h.ring for h in histories.values()]
        return build_observation(
            slo.metadata.name,
            now,
            window,
            histories=rings,
            replicas=replicas,
            batch_limit=batch_limit,
            spec=spec,
            slack=_slack(rings, self.interval),
        )

    def _capacity(self, window: float) -> int:
        return int(window / self.interval) + 3

    @staticmethod
    def _forget(histories: dict[str, _PodHistory], before: float) -> None:
        """Drop pods not seen since before the window: they no longer contribute to it."""
        for name in [n for n, h in histories.items() if h.last_seen < before]:
            del histories[name]

    def _scrape(self, pod: PodEndpoint, model: str) -> _Page | None:
        base = self._url(pod)
        try:
            response = self._http.get(f"{base}/vllm/metrics")
            if response.status_code != 200:
                log.info("pod %s not reporting: HTTP %s", pod.name, response.status_code)
                return None
            snapshot = parse_vllm(response.text).get(model)
        except (httpx.HTTPError, ExpositionError) as exc:
            log.info("pod %s not reporting: %s: %s", pod.name, type(exc).__name__, exc)
            return None
        if snapshot is None:
            log.info("pod %s not reporting: no series for model %r", pod.name, model)
            return None
        return _Page(snapshot, self._utilization(base) if self.gpu_utilization else None)

    def _utilization(self, base: str) -> float | None:
        """Mean GPU utilization from the sidecar's own page; ``None`` if it has none."""
        try:
            response = self._http.get(f"{base}/metrics")
            if response.status_code != 200:
                return None
            return mean_gauge(response.text, cv.GPU_UTILIZATION)
        except (httpx.HTTPError, ValueError):
            return None


def _slack(rings: Sequence[SnapshotRing[PodScrape]], interval: float) -> float:
    """How far from the window's start a start sample may be: half the spacing of the scrapes.

    Observations come at the policy's interval, not the scheduler's, so the spacing is measured
    rather than assumed; a window start is then always found once the history is long enough.
    """
    spacings = [interval]
    for ring in rings:
        times = [at for at, _ in ring]
        if len(times) > 1:
            spacings.append((times[-1] - times[0]) / (len(times) - 1))
    return max(spacings) / 2


def mean_gauge(text: str, name: str) -> float | None:
    """The mean of every sample of gauge ``name`` on an exposition page; ``None`` if absent."""
    values: Sequence[float] = [
        s.value for f in text_string_to_metric_families(text) if f.name == name for s in f.samples
    ]
    return sum(values) / len(values) if values else None
