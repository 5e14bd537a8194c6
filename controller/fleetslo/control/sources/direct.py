"""Observations straight from the target's sidecars, for clusters without Prometheus and the demo.

Each observe lists the target's pods (``PodDirectory``), scrapes every ready pod's sidecar
``/vllm/metrics`` (the last raw vLLM page; 503 while vLLM is down) concurrently, keeps a bounded
history per pod and builds the observation with ``fleetslo.control.observation.build_observation`` — the
same code the simulator uses, so a policy sees the same kind of numbers in both.

The sidecar's own ``/metrics`` adds what vLLM cannot see. With a gate in front of vLLM, requests
held back by the batch limit wait in the gate's queue, and their TTFT starts at the gate:
``fleetslo.core.metrics.gate_families`` folds the gate's queue into the pod's waiting count and its
exact TTFT/TPOT histograms in place of vLLM's, so the policy sees the latency its own limit causes.
Optionally the same page gives GPU utilization, integrated over time into busy seconds.

A pod that does not answer, answers an error or lacks the model is **not reporting** this time:
it adds no sample, so it never looks idle; its earlier samples still count for the window it
served in. While the gate is read, that includes a ``/metrics`` that fails: without it a gated
pod's sample would lack its queue and switch its TTFT to vLLM's for one scrape. Only a failure to
list the pods at all is an error (raised by the directory).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from fleetslo.control.observation import build_observation
from fleetslo.control.ports import PodDirectory, PodEndpoint
from fleetslo.core import conventions as cv
from fleetslo.core.errors import ExpositionError
from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.core.metrics.gate_families import read_gate, with_gate
from fleetslo.core.metrics.window import SnapshotRing
from fleetslo.core.model import EngineSnapshot, Observation, ReplicaCounts
from fleetslo.core.spec import FleetSLO

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
        gate: bool = True,
        url: Callable[[PodEndpoint], str] | None = None,
        transport: httpx.BaseTransport | None = None,
        workers: int = 16,
    ) -> None:
        self.pods = pods
        self.interval = interval
        self.gpu_utilization = gpu_utilization
        self.gate = gate
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
        window = slo.spec.objectives.observation_window
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
        snapshot = self._vllm(pod.name, base, model)
        if snapshot is None:
            return None
        if not (self.gpu_utilization or self.gate):
            return _Page(snapshot, None)
        families = self._sidecar(pod.name, base)
        if families is None:
            # Whether a gate queues requests here is unknown: a sample without it would be wrong.
            return None if self.gate else _Page(snapshot, None)
        gate = read_gate(families, model) if self.gate else None
        utilization = mean_of(families, cv.GPU_UTILIZATION) if self.gpu_utilization else None
        return _Page(with_gate(snapshot, gate), utilization)

    def _vllm(self, pod: str, base: str, model: str) -> EngineSnapshot | None:
        """The pod's vLLM series for ``model``; ``None`` (logged) when it is not reporting."""
        try:
            response = self._http.get(f"{base}/vllm/metrics")
            if response.status_code != 200:
                log.info("pod %s not reporting: HTTP %s", pod, response.status_code)
                return None
            snapshot = parse_vllm(response.text).get(model)
        except (httpx.HTTPError, ExpositionError) as exc:
            log.info("pod %s not reporting: %s: %s", pod, type(exc).__name__, exc)
            return None
        if snapshot is None:
            log.info("pod %s not reporting: no series for model %r", pod, model)
        return snapshot

    def _sidecar(self, pod: str, base: str) -> list[Metric] | None:
        """The families on the sidecar's own page (gate, GPU); ``None`` (logged) if unreadable."""
        try:
            response = self._http.get(f"{base}/metrics")
            if response.status_code != 200:
                log.info("pod %s: sidecar /metrics answered HTTP %s", pod, response.status_code)
                return None
            return list(text_string_to_metric_families(response.text))
        except (httpx.HTTPError, ValueError) as exc:
            log.info("pod %s: sidecar /metrics unreadable: %s: %s", pod, type(exc).__name__, exc)
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
    return mean_of(text_string_to_metric_families(text), name)


def mean_of(families: Iterable[Metric], name: str) -> float | None:
    """The mean of every sample of gauge ``name`` among parsed families; ``None`` if absent."""
    values: Sequence[float] = [s.value for f in families if f.name == name for s in f.samples]
    return sum(values) / len(values) if values else None
