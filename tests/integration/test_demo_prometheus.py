"""The demo's Prometheus loads the generated rules and scrapes what the demo says, whatever the path.

The report's folder is relative by default (``out/demo-report-files``) and Prometheus resolves
relative paths in its config against the config file's folder: the rules then went unloaded and
the replicas unscraped while the demo printed "(recording and alert rules loaded)". What was loaded
is checked through Prometheus's own API (``/api/v1/rules``, ``/api/v1/targets``), as the demo does.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from fleetslo.sim.demo.prometheus import LocalPrometheus
from fleetslo.sim.demo.scenario import fleet_slo
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.scenario import make_spec
from prometheus_client import CollectorRegistry, start_http_server

from tests.prometheus import free_port
from tests.support import require_tool

pytestmark = pytest.mark.integration


def test_a_relative_report_folder_still_loads_every_rule_and_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = require_tool("prometheus", "apt-get install prometheus")
    monkeypatch.chdir(tmp_path)
    folder = Path("out/demo-report-files")  # the default report's folder, relative as the CLI gives it
    folder.mkdir(parents=True)
    spec = make_spec(builtin_profile("mi300x-llama3.1-8b-fp8-tp1"), name="demo")
    port = free_port()
    server, _ = start_http_server(port, "127.0.0.1", registry=CollectorRegistry())  # any /metrics page
    prometheus = LocalPrometheus(binary, folder, fleet_slo(spec), controller_port=port)
    try:
        prometheus.start()
        prometheus.update_targets([("demo-0", port, port)])
        loaded, line = prometheus.rules_summary()
        assert loaded, line
        assert prometheus.expected_groups == {"fleetslo-slo-demo", "fleetslo-health"}
        groups = httpx.get(f"{prometheus.url}/api/v1/rules").json()["data"]["groups"]
        assert {g["name"] for g in groups} == prometheus.expected_groups
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            jobs = prometheus.targets_up()
            if len(jobs) == 3 and all(up == known for up, known in jobs.values()):
                break
            time.sleep(0.2)
        assert prometheus.targets_up() == {
            "vllm": (1, 1), "fleetslo-sidecar": (1, 1), "fleetslo-controller": (1, 1)
        }  # fmt: skip
        assert "vllm 1/1 up" in prometheus.targets_summary()
        assert not (folder / "out").exists(), "nothing may be written under a doubled path"
    finally:
        prometheus.stop()
        server.shutdown()
        server.server_close()
