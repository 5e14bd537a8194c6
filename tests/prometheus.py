"""A real Prometheus server for integration tests: started on a free loopback port, stopped after.

Uses the Debian ``prometheus`` binary (installed by ``make tools``). Queries go through the HTTP
API exactly as the controller's Prometheus source and Grafana would send them.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from fleetslo.control.local.replica import free_port
from fleetslo.sim.demo.prometheus import PrometheusProcess

from tests.support import require_tool

__all__ = ["PrometheusServer", "free_port"]


class PrometheusServer:
    """``with PrometheusServer(tmp_path, scrape_targets) as prom: prom.query(...)``, on the product's
    own launcher (``fleetslo.sim.demo.prometheus.PrometheusProcess``)."""

    def __init__(
        self,
        workdir: Path,
        targets: list[str],
        interval: str = "1s",
        rule_files: list[str] | None = None,
        *,
        scrape_configs: list[dict[str, Any]] | None = None,
        external_labels: dict[str, str] | None = None,
    ):
        """``scrape_configs`` (full jobs, e.g. with ``metric_relabel_configs``) replace the single
        ``test`` job that ``targets`` would make."""
        binary = require_tool("prometheus", "apt-get install prometheus")
        self.workdir = workdir
        self.config: dict[str, Any] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": scrape_configs
            or [{"job_name": "test", "static_configs": [{"targets": targets}]}],
        }
        if external_labels:
            self.config["global"]["external_labels"] = external_labels
        if rule_files:
            self.config["rule_files"] = rule_files
        self._server = PrometheusProcess(binary, workdir)
        self.port, self.url = self._server.port, self._server.url

    def __enter__(self) -> PrometheusServer:
        self._server.start(self.config)
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._server.stop()

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, str] = {"query": promql}
        if at is not None:
            params["time"] = repr(at)
        resp = httpx.get(f"{self.url}/api/v1/query", params=params, timeout=10)
        body = resp.json()
        if body.get("status") != "success":
            raise AssertionError(f"query failed: {promql}: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def api(self, path: str) -> Any:
        """``data`` of a GET on the HTTP API (``rules``, ``targets``, ``label/__name__/values``)."""
        body = httpx.get(f"{self.url}/api/v1/{path}", timeout=10).json()
        if body.get("status") != "success":
            raise AssertionError(f"GET /api/v1/{path} failed: {body}")
        return body["data"]

    def wait_for(self, promql: str, predicate: Any = bool, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll a query until ``predicate(result)`` holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(promql)
            if predicate(result):
                return result
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {promql}; last result {result}")
