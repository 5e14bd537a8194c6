"""End to end: ``serve()`` with GPU telemetry from a fake sysfs tree, beside a fake vLLM, over real
sockets; and a broken GPU backend never costs the vLLM metrics."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from fleetslo.control.local.replica import free_port
from fleetslo.core import conventions as cv
from fleetslo.sidecar.app import serve
from fleetslo.sidecar.gpu.settings import GpuSettings
from fleetslo.sidecar.settings import ExporterSettings
from fleetslo.testing import FakeVllmServer, replay_page
from prometheus_client.parser import text_string_to_metric_families

from tests.adapters.exporter.test_otlp import Receiver
from tests.support import AFTER_LOAD, capture, require_tool
from tests.unit.gpu.gpu_fakes import build_sysfs, mi300x


def values(page: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
        if s.name == name
    }


def serve_until(gpu: GpuSettings, done: Callable[[str], bool], timeout: float = 15.0, **settings: Any) -> str:
    """Run the real sidecar until ``done(page)`` holds for its /metrics page; return that page."""
    port = free_port()
    with FakeVllmServer(replay_page(capture(AFTER_LOAD), 20.0)) as fake:
        exporter = ExporterSettings(
            vllm_url=fake.url, listen=f"127.0.0.1:{port}", interval=0.2, windows=[1.0], **settings
        )

        async def main() -> str:
            stop = asyncio.Event()
            task = asyncio.create_task(serve(exporter, stop, gpu))
            deadline = time.monotonic() + timeout
            page = ""
            try:
                async with aiohttp.ClientSession() as session:
                    while not done(page):
                        assert time.monotonic() < deadline, f"never reached; last page:\n{page}"
                        await asyncio.sleep(0.2)
                        try:
                            async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
                                page = await resp.text()
                        except aiohttp.ClientConnectionError:
                            continue
                return page
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)

        return asyncio.run(main())


def test_the_exporter_serves_gpu_metrics_and_efficiency_from_a_sysfs_tree(tmp_path: Path) -> None:
    gpu = GpuSettings(backend="sysfs", sysfs_root=str(build_sysfs(tmp_path, {1: mi300x()})), interval=0.5)
    page = serve_until(gpu, lambda p: 'basis="busy"' in p)
    identity = (("gpu", "0"), ("model", "AMD Instinct MI300X OAM"), ("uuid", "8d1457e2c20f59d2"))
    assert values(page, cv.GPU_UTILIZATION) == {identity: 0.37}
    assert values(page, cv.GPU_POWER) == {identity: 133.0}
    assert values(page, cv.GPU_COLLECTOR_UP) == {(("backend", "sysfs"),): 1.0}
    assert values(page, cv.ENGINE_UP)  # the vLLM side is there too
    per_1k = values(page, cv.GPU_SECONDS_PER_1K_TOKENS)
    assert {dict(k)["basis"] for k in per_1k} == {"allocated", "busy"}
    assert all(v > 0 for v in per_1k.values())
    assert values(page, cv.TOKENS_PER_JOULE) == {}  # sysfs has no energy counter: absent, not 0
    promtool = require_tool("promtool", "apt-get install prometheus")
    gpu_section = "".join(
        line + "\n" for line in page.splitlines() if "fleetslo_gpu" in line or "per_joule" in line
    )
    result = subprocess.run([promtool, "check", "metrics"], input=gpu_section.encode(), capture_output=True,
                            timeout=30, check=False)  # fmt: skip
    assert result.returncode == 0 and not result.stdout + result.stderr, (
        result.stdout + result.stderr
    ).decode()


def test_a_broken_gpu_backend_is_collector_up_zero_and_vllm_metrics_keep_flowing(tmp_path: Path) -> None:
    gpu = GpuSettings(backend="sysfs", sysfs_root=str(tmp_path / "no-sysfs"), interval=0.5)
    page = serve_until(gpu, lambda p: cv.GPU_COLLECTOR_UP in p and cv.TTFT_SECONDS in p)
    assert values(page, cv.GPU_COLLECTOR_UP) == {(("backend", "sysfs"),): 0.0}
    errors = values(page, cv.GPU_COLLECTOR_ERRORS + "_total")
    assert errors[(("backend", "sysfs"), ("reason", "no_devices"))] >= 1
    assert values(page, cv.GPU_UTILIZATION) == {}
    assert set(values(page, cv.ENGINE_UP).values()) == {1.0}


def test_gpu_backend_none_exports_no_gpu_section(tmp_path: Path) -> None:
    page = serve_until(GpuSettings(backend="none"), lambda p: cv.TTFT_SECONDS in p)
    assert "fleetslo_gpu_" not in page


def test_with_an_otlp_endpoint_the_gpu_metrics_are_pushed_beside_the_vllm_signals(tmp_path: Path) -> None:
    receiver = Receiver()
    gpu = GpuSettings(backend="sysfs", sysfs_root=str(build_sysfs(tmp_path, {1: mi300x()})), interval=0.5)
    try:

        def pushed(_: str) -> bool:
            names = {m.name for r in receiver.requests for rm in r.resource_metrics
                     for sm in rm.scope_metrics for m in sm.metrics}  # fmt: skip
            return {cv.GPU_UTILIZATION, cv.GPU_POWER, cv.TTFT_SECONDS} <= names

        serve_until(gpu, pushed, otlp_endpoint=receiver.url, otlp_interval=0.5)
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    utilization = [
        (attrs, value) for r in receiver.requests for rm in r.resource_metrics for sm in rm.scope_metrics
        for m in sm.metrics if m.name == cv.GPU_UTILIZATION for p in m.gauge.data_points
        for attrs, value in [({a.key: a.value.string_value for a in p.attributes}, p.as_double)]
    ]  # fmt: skip
    assert ({"gpu": "0", "model": "AMD Instinct MI300X OAM", "uuid": "8d1457e2c20f59d2"}, 0.37) in utilization
