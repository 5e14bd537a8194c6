"""The chart's preStop hook (helm/fleetslo/files/hooks/drain.py) against a real gate on loopback:
the sidecar's ``drain`` returns only once the in-flight request finished, the vLLM container's
``wait`` only once the gate drains with nothing left, and neither hangs when the gate is gone.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web
from fleetslo.sidecar.gate.testing import FakeOpenAIUpstream
from prometheus_client import CollectorRegistry, generate_latest

from tests.adapters.gate.harness import TOKEN, Rig, chat, running
from tests.helm.chart import CHART

pytestmark = pytest.mark.asyncio
HOOK = CHART / "files" / "hooks" / "drain.py"
#: The request in flight when the pod is told to stop: 30 tokens, 40 ms apart.
TOKENS, TOKEN_DELAY = 30, 0.04


async def hook(*args: str) -> tuple[int, str, float]:
    started = time.monotonic()
    env = {**os.environ, "FLEETSLO_DRAIN_PERIOD": "0.1"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HOOK),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    return int(process.returncode or 0), out.decode(), time.monotonic() - started


async def serve_metrics(rig: Rig) -> web.AppRunner:
    """The sidecar's /metrics as far as the hook reads it: the gate's collector."""
    registry = CollectorRegistry()
    registry.register(rig.gate.collector)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


async def in_flight(rig: Rig) -> None:
    for _ in range(500):
        if rig.gate.admission.inflight:
            return
        await asyncio.sleep(0.01)
    pytest.fail("the request never reached the gate")


def _port(runner: web.AppRunner) -> int:
    return int(runner.addresses[0][1])


async def test_both_hooks_return_after_the_last_request_finished(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    upstream = FakeOpenAIUpstream(tokens=TOKENS, token_delay=TOKEN_DELAY)
    async with running(upstream) as rig:
        runner = await serve_metrics(rig)
        try:
            request = asyncio.create_task(rig.post("/v1/chat/completions", chat(TOKENS)))
            await in_flight(rig)
            metrics_url = f"http://127.0.0.1:{_port(runner)}/metrics"
            waiter = asyncio.create_task(hook("wait", metrics_url, "20"))
            await asyncio.sleep(0.3)  # vLLM's hook waits for the drain the sidecar's hook starts
            assert not waiter.done()
            drained = await hook("drain", f"{rig.admin_url}/admin/drain", "20", str(token_file))
            status, _ = await request
            waited = await waiter
        finally:
            await runner.cleanup()
    assert status == 200, "the in-flight request finished"
    assert drained[0] == 0 and "drained" in drained[1]
    assert waited[0] == 0 and "drained" in waited[1]
    assert upstream.completed == 1 and upstream.cancelled == 0
    assert drained[2] >= 0.3 * TOKENS * TOKEN_DELAY, "drain returned before the request could finish"


async def test_hooks_give_up_at_the_deadline_while_requests_remain(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    upstream = FakeOpenAIUpstream(tokens=200, token_delay=0.05)
    async with running(upstream) as rig:
        request = asyncio.create_task(rig.post("/v1/chat/completions", chat(200)))
        await in_flight(rig)
        code, out, took = await hook("drain", f"{rig.admin_url}/admin/drain", "1", str(token_file))
        request.cancel()
    assert code == 0 and "still busy after 1s" in out
    assert 1 <= took < 5


async def test_hooks_do_not_wait_for_a_gate_that_is_gone(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    code, out, took = await hook("drain", "http://127.0.0.1:9/admin/drain", "30", str(token_file))
    assert code == 0 and "gate unreachable" in out and took < 5
    code, out, took = await hook("wait", "http://127.0.0.1:9/metrics", "30")
    assert code == 0 and "gate unreachable" in out and took < 5
