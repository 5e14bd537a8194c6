"""The gate inside the sidecar: its families on /metrics, exact latency preferred, readiness, the CLI.

Scrapes of the fake vLLM's /metrics are driven one at a time with a fake clock, so windows are
deterministic; requests go through the gate over real sockets between scrapes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from fleetslo.control.local.replica import free_port
from fleetslo.core import conventions as cv
from fleetslo.sidecar.app import Sidecar
from fleetslo.sidecar.gate.server import Gate
from fleetslo.sidecar.gate.testing import FakeOpenAIUpstream
from fleetslo.sidecar.settings import ExporterSettings, GateServerSettings
from fleetslo.testing import FakeClock, FakeVllmServer, grow_capture
from prometheus_client.parser import text_string_to_metric_families

from tests.adapters.gate.harness import SLO, chat
from tests.support import AFTER_LOAD, ROOT, capture

pytestmark = pytest.mark.asyncio
TEXT = capture(AFTER_LOAD)
MODEL = "tiny-llama"


def value(page: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


def labels_of(page: str, name: str) -> list[dict[str, str]]:
    return [dict(s.labels) for f in text_string_to_metric_families(page) for s in f.samples if s.name == name]


async def test_the_sidecar_publishes_gate_families_and_prefers_exact_latency() -> None:
    fake = await FakeOpenAIUpstream(first_token_delay=0.12, token_delay=0.01).start()
    clock = FakeClock()
    settings = ExporterSettings(vllm_url="http://127.0.0.1:1", listen="127.0.0.1:0", interval=1.0,
                                timeout=10.0, windows=[5.0], slo_ttft=SLO.ttft,
                                slo_tpot=SLO.tpot)  # fmt: skip
    with FakeVllmServer(TEXT) as vllm:
        settings = settings.model_copy(update={"vllm_url": vllm.url})
        sidecar = Sidecar(settings, clock=clock)
        gate_settings = GateServerSettings(listen="127.0.0.1:0", upstream=fake.url)
        # The requests name model "fake": vLLM serves one model, so they count under its name.
        gate = Gate(gate_settings, SLO, settings.ring_size, served=lambda: sidecar.tracker.known_models)
        sidecar.add_collector(gate.collector)
        sidecar.prefer_latency_from(gate.windows)
        sidecar.add_readiness_check(gate.not_ready)
        await gate.start()
        async with aiohttp.ClientSession() as client:
            await sidecar.start(client)

            async def get(path: str) -> tuple[int, str]:
                async with client.get(f"http://127.0.0.1:{sidecar.port}{path}") as resp:
                    return resp.status, await resp.text()

            async def scrape(i: int) -> None:
                vllm.page = grow_capture(TEXT, 1.0 + i)
                await sidecar.scrape_once()
                clock.advance(1.0)

            try:
                for i in range(7):
                    await scrape(i)
                _, page = await get("/metrics")
                p90 = {"quantile": "0.9", "window": "5s", "model_name": MODEL}
                assert labels_of(page, cv.TTFT_SECONDS), page
                assert labels_of(page, cv.TTFT_SECONDS)[0][cv.LABEL_SOURCE] == "vllm"
                assert value(page, cv.GATE_INFLIGHT, model_name=MODEL) == 0
                assert value(page, cv.GATE_LIMIT + "") is None  # no limit: absent, not 0
                assert value(page, cv.GATE_REJECTED + "_total", reason="queue_full", model_name=MODEL) == 0
                assert (
                    value(page, cv.GATE_TTFT + "_bucket", le="0.5", model_name=MODEL) == 0
                )  # the SLO is an edge
                assert value(page, cv.GATE_TPOT + "_bucket", le="0.05") == 0

                url = f"http://127.0.0.1:{gate.port}/v1/chat/completions"
                for _ in range(3):
                    async with client.post(url, data=json.dumps(chat(5))) as resp:
                        await resp.read()
                for i in range(7, 10):
                    await scrape(i)
                _, page = await get("/metrics")
                ttft = value(page, cv.TTFT_SECONDS, source="gate", **p90)
                assert ttft is not None and 0.12 <= ttft <= 0.4
                tpot = value(page, cv.TPOT_SECONDS, source="gate", **p90)
                assert tpot is not None and 0.009 <= tpot <= 0.05
                assert value(page, cv.TTFT_SECONDS, source="vllm", **p90) is None  # replaced, not doubled
                assert value(page, cv.ITL_SECONDS, source="vllm", **p90) is not None  # vLLM's still
                assert value(page, cv.SLO_ATTAINMENT, slo="ttft", window="5s") == 1.0
                assert value(page, cv.SLO_THRESHOLD_EXACT, slo="ttft") == 1.0
                assert value(page, cv.GATE_TTFT + "_count", model_name=MODEL) == 3
                assert value(page, cv.GATE_REQUESTS + "_total", outcome="completed", model_name=MODEL) == 3

                assert (await get("/readyz"))[0] == 200
                gate.admission.drain()
                status, text = await get("/readyz")
                assert status == 503 and "draining" in text
                assert value((await get("/metrics"))[1], cv.GATE_DRAINING) == 1
            finally:
                await sidecar.stop()
                await gate.stop()
                await fake.stop()


async def test_fleetslo_exporter_with_gate_flags_serves_through_the_gate_and_the_admin_api(
    tmp_path: Path,
) -> None:
    fake = await FakeOpenAIUpstream().start()
    token_file = tmp_path / "token"
    token_file.write_text("tok-123-456-789-abc\n")
    token_file.chmod(0o600)
    listen, gate_port, admin_port = free_port(), free_port(), free_port()
    args = [
        sys.executable, "-m", "fleetslo.cli", "exporter", "--vllm-url", fake.url,
        "--listen", f"127.0.0.1:{listen}", "--gate-listen", f"127.0.0.1:{gate_port}",
        "--gate-admin-listen", f"127.0.0.1:{admin_port}", "--admin-token-file", str(token_file),
        "--gate-max-inflight", "4",
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *args, cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{ROOT / 'controller'}:{ROOT}"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        async with aiohttp.ClientSession() as client:
            await _wait_listening(client, f"http://127.0.0.1:{gate_port}/v1/models", proc)
            async with client.post(f"http://127.0.0.1:{gate_port}/v1/completions",
                                   data=json.dumps(chat(3))) as resp:  # fmt: skip
                assert resp.status == 200
            headers = {"Authorization": "Bearer tok-123-456-789-abc"}
            async with client.get(f"http://127.0.0.1:{admin_port}/admin/limit", headers=headers) as resp:
                assert await resp.json() == {"limit": 4}
            async with client.get(f"http://127.0.0.1:{listen}/metrics") as resp:
                assert cv.GATE_TTFT in await resp.text()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
        await fake.stop()
    assert proc.returncode == 0, err.decode()
    assert b"tok-123" not in err


async def _wait_listening(client: aiohttp.ClientSession, url: str, proc: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.returncode is None, "the exporter exited early"
        try:
            async with client.get(url) as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("the exporter did not start listening")
