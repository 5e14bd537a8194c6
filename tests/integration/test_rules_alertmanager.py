"""The committed Alertmanager config in a real Alertmanager: the inhibitions silence exactly the
alerts they are meant to (a target none of whose engines is scraped silences that target's
latency alerts, one engine down silences nothing, a page silences the ticket of the same SLO of
the same target, a dead GPU collector its GPU alerts, no leader the per-target controller alerts)
and nothing else. amtool cannot test inhibitions; the API can.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleetslo.core import conventions as cv

from tests.prometheus import free_port
from tests.support import ROOT, require_tool

pytestmark = pytest.mark.integration
A = cv.AlertName
CONFIG = ROOT / "alerts" / "generated" / "alertmanager.yaml"
PAGE, TICKET = cv.SEVERITY_PAGE, cv.SEVERITY_TICKET


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = require_tool("prometheus-alertmanager", "apt-get install prometheus-alertmanager")
    workdir: Path = tmp_path_factory.mktemp("am")
    url = f"http://127.0.0.1:{free_port()}"
    log = (workdir / "am.log").open("wb")
    process = subprocess.Popen(
        [binary, f"--config.file={CONFIG}", f"--storage.path={workdir}", "--cluster.listen-address=",
         f"--web.listen-address={url.removeprefix('http://')}"],
        stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, (workdir / "am.log").read_text()[-2000:]
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "alertmanager did not become ready"
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def alert(name: A, severity: str, **labels: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "labels": {"alertname": name.value, cv.LABEL_SEVERITY: severity, "cluster": "c1", **labels},
        "annotations": {"summary": "test"},
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(hours=1)).isoformat(),
    }


A_DEPLOY = {"model_name": "a", "namespace": "llm", "workload": "a"}
A_CANARY = {"model_name": "a", "namespace": "llm", "workload": "a-canary"}
B_DEPLOY = {"model_name": "b", "namespace": "llm", "workload": "b"}
FIRING = [
    # One engine of sixteen down: a page of its own, but it must not mute the model's latency.
    alert(A.ENGINE_DOWN, PAGE, model_name="a", instance="a-7:9400"),
    alert(A.TTFT_BUDGET_BURN, PAGE, **A_DEPLOY, slo="ttft", long_window="1h"),
    # No engine of the canary is scraped: its latency page is the symptom; a's is not.
    alert(A.MODEL_NOT_SCRAPED, PAGE, **A_CANARY),
    alert(A.TTFT_BUDGET_BURN, PAGE, **A_CANARY, slo="ttft", long_window="1h"),
    alert(A.TTFT_BUDGET_BURN, PAGE, **B_DEPLOY, slo="ttft", long_window="1h"),
    alert(A.TTFT_BUDGET_BURN, TICKET, **B_DEPLOY, slo="ttft", long_window="1d"),
    # A ticket of the other objective (tpot) is not said by b's ttft page.
    alert(A.TPOT_BUDGET_BURN, TICKET, **B_DEPLOY, slo="tpot", long_window="1d"),
    alert(A.GPU_COLLECTOR_DOWN, TICKET, instance="x:9400", backend="amdsmi"),
    alert(A.GPU_TEMPERATURE_HIGH, TICKET, instance="x:9400", gpu="0", sensor="junction"),
    alert(A.GPU_TEMPERATURE_HIGH, TICKET, instance="y:9400", gpu="0", sensor="junction"),
    alert(A.CONTROLLER_NO_LEADER, PAGE),
    alert(A.CONTROLLER_ACTUATION_FAILING, PAGE, **B_DEPLOY, target="b", kind="scale"),
    alert(A.KV_CACHE_NEAR_FULL, TICKET, model_name="a", instance="a:8000"),
]


def states(url: str) -> dict[tuple[str, ...], str]:
    body = httpx.get(f"{url}/api/v2/alerts", timeout=5).json()
    keys = ("alertname", "severity", "workload", "instance")
    return {tuple(a["labels"].get(k, "") for k in keys): a["status"]["state"] for a in body}


def test_inhibitions_silence_exactly_the_symptoms(alertmanager: str) -> None:
    response = httpx.post(f"{alertmanager}/api/v2/alerts", json=FIRING, timeout=5)
    assert response.status_code == 200, response.text
    got = states(alertmanager)
    assert got == {
        (A.ENGINE_DOWN, PAGE, "", "a-7:9400"): "active",
        (A.TTFT_BUDGET_BURN, PAGE, "a", ""): "active",  # one engine down explains nothing
        (A.MODEL_NOT_SCRAPED, PAGE, "a-canary", ""): "active",
        (A.TTFT_BUDGET_BURN, PAGE, "a-canary", ""): "suppressed",  # the canary has no engine at all
        (A.TTFT_BUDGET_BURN, PAGE, "b", ""): "active",
        # the page of the same alert, target and SLO says it already
        (A.TTFT_BUDGET_BURN, TICKET, "b", ""): "suppressed",
        (A.TPOT_BUDGET_BURN, TICKET, "b", ""): "active",
        (A.GPU_COLLECTOR_DOWN, TICKET, "", "x:9400"): "active",
        (A.GPU_TEMPERATURE_HIGH, TICKET, "", "x:9400"): "suppressed",
        (A.GPU_TEMPERATURE_HIGH, TICKET, "", "y:9400"): "active",
        (A.CONTROLLER_NO_LEADER, PAGE, "", ""): "active",
        (A.CONTROLLER_ACTUATION_FAILING, PAGE, "b", ""): "suppressed",
        (A.KV_CACHE_NEAR_FULL, TICKET, "", "a:8000"): "active",
    }
