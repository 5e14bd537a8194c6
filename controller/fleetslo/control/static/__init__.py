"""Replicas at fixed addresses (a ``Static`` target): a pod directory, a replica actuator that
reports them and never changes them, and the sidecar and admin URLs the direct source and the gate
actuator use. For VMs, bare metal or Slurm, where something else starts the replicas.

Readiness is each sidecar's ``/readyz`` (a draining gate answers 503), asked at most every
``ready_ttl`` seconds; an unreachable one is not ready, never an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import httpx

from fleetslo.control.ports import ActuationResult, PodEndpoint, ScaleState
from fleetslo.core.model import ReplicaCounts
from fleetslo.core.spec import StaticEndpoint, Target


class StaticFleet:
    """``PodDirectory``, ``ReplicaActuator`` and ``PodMarker`` over a fixed list of replicas."""

    def __init__(
        self,
        endpoints: Sequence[StaticEndpoint],
        *,
        timeout: float = 2.0,
        ready_ttl: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoints = {e.name: e for e in endpoints}
        self.ready_ttl, self.clock = ready_ttl, clock
        self._http = httpx.Client(timeout=timeout, transport=transport)
        self._ready: dict[str, tuple[float, bool]] = {}

    def close(self) -> None:
        self._http.close()

    def pods(self, target: Target) -> list[PodEndpoint]:
        return [
            PodEndpoint(name, _host(e.sidecar_url), self._is_ready(e)) for name, e in self.endpoints.items()
        ]

    def read(self, target: Target) -> ScaleState:
        ready = sum(1 for pod in self.pods(target) if pod.ready)
        return ScaleState(len(self.endpoints), ReplicaCounts(ready))

    def scale(self, target: Target, replicas: int, *, expected: int | None = None) -> ActuationResult:
        # Something else owns these replicas: report what was asked, change nothing (so there is
        # no concurrent change to guard against either: ``expected`` is not needed).
        return ActuationResult(False, f"{target.name}: static target keeps {len(self.endpoints)} replicas "
                                      f"(asked for {replicas})")  # fmt: skip

    def mark(self, target: Target, names: Sequence[str]) -> None:
        """Nothing removes a static replica, so there is no removal order to mark."""

    def unmark(self, target: Target, names: Sequence[str]) -> None:
        """See ``mark``."""

    def sidecar_url(self, pod: PodEndpoint) -> str:
        return self.endpoints[pod.name].sidecar_url.rstrip("/")

    def admin_url(self, pod: PodEndpoint) -> str:
        url = self.endpoints[pod.name].admin_url
        if url is None:
            raise LookupError(f"{pod.name}: no admin_url in the spec (the gate actuator needs one)")
        return url.rstrip("/")

    def _is_ready(self, endpoint: StaticEndpoint) -> bool:
        asked = self._ready.get(endpoint.name)
        now = self.clock()
        if asked is not None and now - asked[0] < self.ready_ttl:
            return asked[1]
        try:
            ready = self._http.get(f"{endpoint.sidecar_url.rstrip('/')}/readyz").status_code == 200
        except httpx.HTTPError:
            ready = False
        self._ready[endpoint.name] = (now, ready)
        return ready


def _host(url: str) -> str:
    return httpx.URL(url).host
