"""What a local replica answers over HTTP: is it healthy, is its sidecar ready and reporting, how
many preemptions its engine counted. Loopback only, one-second timeouts; a failed probe is "no"
(or ``None`` for a number), never an exception: the monitor asks again on its next poll.
"""

from __future__ import annotations

import httpx

from fleetslo.control.local.replica import LOOPBACK, Ports
from fleetslo.core.errors import FleetSLOError
from fleetslo.core.metrics.exposition import parse_vllm


class ReplicaProbe:
    """HTTP questions to one local fleet's replicas (``close`` when the fleet closes)."""

    def __init__(self, model_name: str, timeout: float = 1.0) -> None:
        self.model_name = model_name
        self._http = httpx.Client(timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def healthy(self, ports: Ports) -> bool:
        """The engine's ``/health`` and the sidecar's ``/readyz`` both answer 200."""
        return self._ok(f"http://{LOOPBACK}:{ports.engine}/health") and self.sidecar_ready(ports)

    def sidecar_ready(self, ports: Ports) -> bool:
        """The sidecar's ``/readyz`` (a draining gate makes it 503, as a pod turns unready)."""
        return self._ok(f"http://{LOOPBACK}:{ports.sidecar}/readyz")

    def reporting(self, ports: Ports) -> bool:
        """The sidecar has scraped the engine at least once (its raw page is there)."""
        return self._ok(f"http://{LOOPBACK}:{ports.sidecar}/vllm/metrics")

    def preemptions(self, ports: Ports) -> float | None:
        """The engine's preemption counter, or ``None`` when it cannot be read now."""
        try:
            text = self._http.get(f"http://{LOOPBACK}:{ports.engine}/metrics").text
            snapshot = parse_vllm(text).get(self.model_name)
        except (httpx.HTTPError, FleetSLOError):
            return None
        return snapshot.counter("num_preemptions") if snapshot is not None else None

    def _ok(self, url: str) -> bool:
        try:
            return self._http.get(url).status_code == 200
        except httpx.HTTPError:
            return False
