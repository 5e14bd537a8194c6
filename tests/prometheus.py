"""A real Prometheus server for integration tests: started on a free loopback port, stopped after.

Uses the Debian ``prometheus`` binary (installed by ``make tools``). Queries go through the HTTP
API exactly as the controller's Prometheus source and Grafana would send them.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import httpx
import yaml

from controller.actuators.local_replica import free_port
from tests.support import require_tool


class PrometheusServer:
    """``with PrometheusServer(tmp_path, scrape_targets) as prom: prom.query(...)``."""

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
        self.binary = require_tool("prometheus", "apt-get install prometheus")
        self.workdir = workdir
        self.port = free_port()
        config: dict[str, Any] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": scrape_configs
            or [{"job_name": "test", "static_configs": [{"targets": targets}]}],
        }
        if external_labels:
            config["global"]["external_labels"] = external_labels
        if rule_files:
            config["rule_files"] = rule_files
        self.config_path = workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log = workdir / "prometheus.log"
        self._log_file: BinaryIO | None = None

    def __enter__(self) -> PrometheusServer:
        self._log_file = self._log.open("wb")
        self._process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=self._log_file,
        )
        self._wait_ready()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._log_file is not None:
            self._log_file.close()

    def _wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self._log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("prometheus did not become ready")

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
