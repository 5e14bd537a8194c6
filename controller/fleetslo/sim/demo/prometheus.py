"""``fleetslo demo --prometheus``: a local Prometheus scraping the whole demo, with the generated rules.

Scrapes every replica's sim-server (job ``vllm``) and sidecar (job ``fleetslo-sidecar``), through file
service discovery that the demo rewrites as replicas come and go, plus the demo controller's own
metrics; loads the recording and alert rules ``fleetslo alerts build`` generates for the demo's
FleetSLO. Targets carry ``namespace`` and ``pod`` labels as a PodMonitor would give them.

Prometheus runs in wall time: its rates are per wall second and its windows cover ``speedup`` times
more simulated time, while latencies on the pages are simulated seconds (the gates' too: each is
told the speed-up, ``--gate-time-scale``). It starts nothing if ``prometheus`` is not installed
(the caller says so). Every process it starts is stopped by ``stop``.

Every path in its config is absolute: Prometheus resolves a relative one against the config file's
folder, so the default ``out/demo-report-files`` would otherwise load ``out/demo-report-files/out/...``
— no rules, no replica targets, and no error. What was loaded is therefore read back from its API
(``loaded_rule_groups``, ``targets_up``) rather than assumed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import httpx
import yaml

from fleetslo.control.local.replica import free_port
from fleetslo.core.spec import FleetSLO

SCRAPE_INTERVAL = "1s"


def find_prometheus() -> str | None:
    return shutil.which("prometheus")


class PrometheusProcess:
    """A ``prometheus`` binary serving ``config`` on a free loopback port; its config file, TSDB
    and log live under ``workdir``. Also the integration tests' Prometheus (``tests/prometheus.py``)."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary, self.workdir = binary, workdir.resolve()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "prometheus.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, config: dict[str, object], timeout: float = 20.0) -> None:
        """Write ``config``, start, and return once ``/-/ready`` answers (else raise with the log)."""
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        self._log = self.log_path.open("wb")
        self._process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={path}",
                f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._process.poll() is None:
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise RuntimeError(f"prometheus did not become ready ({self.log_path}):\n{tail}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


class LocalPrometheus:
    """The demo's Prometheus under ``workdir``: file service discovery, the generated rules."""

    def __init__(self, binary: str, workdir: Path, slo: FleetSLO, controller_port: int) -> None:
        self.workdir = workdir.resolve()
        self._server = PrometheusProcess(binary, self.workdir)
        self.port, self.url = self._server.port, self._server.url
        self._rule_files = _write_rules(self.workdir / "rules", slo)
        self.expected_groups = _group_names(self._rule_files)
        self._controller = f"127.0.0.1:{controller_port}"
        self._http = httpx.Client(timeout=2.0)

    def start(self, timeout: float = 20.0) -> None:
        self.update_targets([])
        self._server.start(self._config(), timeout)

    def loaded_rule_groups(self, timeout: float = 5.0) -> set[str]:
        """The rule groups Prometheus reports on ``/api/v1/rules`` (waits up to ``timeout`` for all
        the expected ones: rules load just after ``/-/ready``)."""
        deadline, loaded = time.monotonic() + timeout, set[str]()
        while True:
            loaded = {g["name"] for g in self._api("rules").get("groups", [])}
            if loaded >= self.expected_groups or time.monotonic() > deadline:
                return loaded
            time.sleep(0.1)

    def targets_up(self) -> dict[str, tuple[int, int]]:
        """Per scrape job, (targets up, targets known), from ``/api/v1/targets``."""
        jobs: dict[str, tuple[int, int]] = {}
        for target in self._api("targets").get("activeTargets", []):
            up, known = jobs.get(target["labels"]["job"], (0, 0))
            jobs[target["labels"]["job"]] = (up + (target["health"] == "up"), known + 1)
        return jobs

    def rules_summary(self) -> tuple[bool, str]:
        """Whether every generated rule group was loaded, and a line that says what was."""
        loaded = self.loaded_rule_groups()
        missing = sorted(self.expected_groups - loaded)
        if missing:
            return False, f"rule groups NOT loaded: {', '.join(missing)} (see {self._server.log_path})"
        return True, f"rule groups loaded: {', '.join(sorted(loaded))}"

    def targets_summary(self) -> str:
        """One line: each job's targets up out of known, as Prometheus reports them."""
        jobs = self.targets_up()
        if not jobs:
            return "no scrape targets yet"
        return ", ".join(f"{job} {up}/{known} up" for job, (up, known) in sorted(jobs.items()))

    def _api(self, what: str) -> dict[str, Any]:
        try:
            data = self._http.get(f"{self.url}/api/v1/{what}").json().get("data")
        except (httpx.HTTPError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def update_targets(self, replicas: Sequence[tuple[str, int, int]]) -> None:
        """(pod name, sim-server port, sidecar port) of every live replica."""
        for job, index in (("vllm", 1), ("sidecar", 2)):
            groups = [
                {"targets": [f"127.0.0.1:{r[index]}"], "labels": {"namespace": "default", "pod": r[0]}}
                for r in replicas
            ]
            path = self.workdir / f"targets-{job}.json"
            partial = path.with_suffix(".tmp")
            partial.write_text(json.dumps(groups), encoding="utf-8")
            partial.replace(path)  # atomic: Prometheus never reads half a file

    def stop(self) -> None:
        self._server.stop()
        self._http.close()

    def _config(self) -> dict[str, object]:
        def discovered(job: str, name: str) -> dict[str, object]:
            return {
                "job_name": name,
                "file_sd_configs": [
                    {"files": [str(self.workdir / f"targets-{job}.json")], "refresh_interval": "1s"}
                ],
            }

        return {
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
            "rule_files": [str(f) for f in self._rule_files],
            "scrape_configs": [
                discovered("vllm", "vllm"),
                discovered("sidecar", "fleetslo-sidecar"),
                {"job_name": "fleetslo-controller", "static_configs": [{"targets": [self._controller]}]},
            ],
        }


def _write_rules(folder: Path, slo: FleetSLO) -> list[Path]:
    from fleetslo.generate.alerts.build import RULES_SUFFIX, generate

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generate([("demo.yaml", [slo])]).files.items():
        if name.endswith(RULES_SUFFIX):
            path = folder / name
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def _group_names(files: Sequence[Path]) -> set[str]:
    return {g["name"] for f in files for g in yaml.safe_load(f.read_text(encoding="utf-8"))["groups"]}
