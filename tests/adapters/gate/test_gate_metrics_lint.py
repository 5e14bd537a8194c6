"""The gate's families as Prometheus sees them: promtool's metric lint passes."""

from __future__ import annotations

import subprocess

from fleetslo.sidecar.gate.admission import Admission
from fleetslo.sidecar.gate.collector import GateCollector
from fleetslo.sidecar.gate.stats import GateStats
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from tests.support import require_tool


def test_the_gate_families_pass_promtool_check_metrics() -> None:
    promtool = require_tool("promtool", "apt-get install prometheus")
    stats, admission = GateStats(slo_ttft=0.5, slo_tpot=0.05), Admission(limit=8, max_queue=4)
    stats.model("m").ttft.observe(0.2)
    stats.model("m").tpot.observe(0.03)
    stats.model("m").rejected["queue_full"] += 1
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GateCollector(admission, stats, lambda: ["m", "n"]))
    page = generate_latest(registry).decode()
    result = subprocess.run(
        [promtool, "check", "metrics"], input=page, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
