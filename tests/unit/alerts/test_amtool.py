"""The committed Alertmanager config, checked by the real amtool: it loads, and the routing tree
sends every severity the rules use to the intended receiver, grouped by cluster and model."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from fleetslo.core import conventions as cv
from fleetslo.generate.alerts.build import ALERTMANAGER_FILE
from fleetslo.generate.alerts.routing import RECEIVER_DEFAULT, RECEIVER_PAGE, RECEIVER_TICKET

from tests.support import ROOT, require_tool

pytestmark = pytest.mark.integration
CONFIG = ROOT / "alerts" / "generated" / ALERTMANAGER_FILE


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = require_tool("amtool", "apt-get install prometheus-alertmanager")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=30, check=False)


def test_config_passes_amtool_check_config() -> None:
    result = amtool("check-config", str(CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 inhibit rules" in result.stdout and "3 receivers" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (
            {"severity": cv.SEVERITY_PAGE, "alertname": cv.AlertName.TTFT_BUDGET_BURN, "slo": "ttft"},
            RECEIVER_PAGE,
        ),
        ({"severity": cv.SEVERITY_PAGE, "alertname": cv.AlertName.ENGINE_DOWN}, RECEIVER_PAGE),
        ({"severity": cv.SEVERITY_TICKET, "alertname": cv.AlertName.KV_CACHE_NEAR_FULL}, RECEIVER_TICKET),
        ({"severity": "info", "alertname": "Watchdog"}, RECEIVER_DEFAULT),
        ({"alertname": "SomethingElse"}, RECEIVER_DEFAULT),
    ],
)
def test_routes_send_each_severity_to_its_receiver(labels: dict[str, str], receiver: str) -> None:
    pairs = [f"{k}={v}" for k, v in {**labels, "model_name": "Qwen/Qwen3", "cluster": "mi325x-a"}.items()]
    result = amtool(
        "config", "routes", "test", f"--config.file={CONFIG}", f"--verify.receivers={receiver}", *pairs
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def test_notifications_are_grouped_by_cluster_and_model() -> None:
    config = yaml.safe_load(CONFIG.read_text())
    assert {"cluster", cv.MODEL_LABEL} <= set(config["route"]["group_by"])
    tree = amtool("config", "routes", f"--config.file={CONFIG}")
    assert tree.returncode == 0 and RECEIVER_PAGE in tree.stdout and RECEIVER_TICKET in tree.stdout
