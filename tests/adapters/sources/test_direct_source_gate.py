"""The direct source against a real sidecar whose real gate holds requests behind a binding limit.

The gate (limit 1) sits in front of a fake streaming vLLM whose first token takes 0.3 s; six
streamed requests arrive at once, so five wait in the gate's queue, where vLLM neither counts them
as waiting nor starts their TTFT. The controller must see that queue and that latency anyway.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
import pytest
from fleetslo.control.ports import PodEndpoint
from fleetslo.control.sources.direct import DirectSource
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.sidecar.app import Sidecar
from fleetslo.sidecar.gate.server import Gate
from fleetslo.sidecar.gate.testing import FakeOpenAIUpstream
from fleetslo.sidecar.settings import ExporterSettings, GateServerSettings
from fleetslo.sidecar.thresholds import SloThresholds
from fleetslo.testing import FakePodDirectory, FakeVllmServer

from tests.gate_support import vllm_page
from tests.loop_support import make_slo

pytestmark = pytest.mark.asyncio
SLO = make_slo("qwen", model="tiny-llama", window="5s", ttft="0.5s")
FIRST_TOKEN = 0.3
REQUESTS = 6


@dataclass
class Pod:
    sidecar: Sidecar
    gate: Gate
    client: aiohttp.ClientSession

    async def stream(self) -> None:
        body = {"model": "fake", "prompt": "hi", "max_tokens": 2, "stream": True}
        async with self.client.post(f"http://127.0.0.1:{self.gate.port}/v1/completions",
                                    data=json.dumps(body)) as resp:  # fmt: skip
            assert resp.status == 200
            await resp.read()

    async def observe(self, source: DirectSource) -> Observation:
        await self.sidecar.scrape_once()  # the sidecar's raw vLLM page is as of its last scrape
        return await asyncio.to_thread(source.observe, SLO, ReplicaCounts(1), 1, time.time())


@asynccontextmanager
async def gated_pod() -> AsyncIterator[Pod]:
    upstream = await FakeOpenAIUpstream(first_token_delay=FIRST_TOKEN).start()
    with FakeVllmServer(vllm_page(5, waiting=0)) as vllm:
        settings = ExporterSettings(vllm_url=vllm.url, listen="127.0.0.1:0", interval=0.25, windows=[5.0])
        sidecar = Sidecar(settings)
        gate = Gate(GateServerSettings(listen="127.0.0.1:0", upstream=upstream.url, max_inflight=1),
                    SloThresholds(ttft=0.5, tpot=0.05), settings.ring_size,
                    served=lambda: sidecar.tracker.known_models)  # fmt: skip
        sidecar.add_collector(gate.collector)
        await gate.start()
        async with aiohttp.ClientSession() as client:
            await sidecar.start(client)
            try:
                yield Pod(sidecar, gate, client)
            finally:
                await sidecar.stop()
                await gate.stop()
                await upstream.stop()


def source_for(pod: Pod, *, gate: bool) -> DirectSource:
    pods = FakePodDirectory()
    pods.set(SLO.spec.target, [PodEndpoint("qwen-a", "127.0.0.1", ready=True)])
    url = f"http://127.0.0.1:{pod.sidecar.port}"
    return DirectSource(pods, url=lambda _: url, interval=0.25, gpu_utilization=False, gate=gate)


async def test_the_gate_queue_and_the_latency_it_adds_reach_the_observation() -> None:
    async with gated_pod() as pod:
        source, blind = source_for(pod, gate=True), source_for(pod, gate=False)
        try:
            for s in (source, blind):
                await pod.observe(s)  # the first samples, before the burst
            burst = [asyncio.create_task(pod.stream()) for _ in range(REQUESTS)]
            await asyncio.sleep(FIRST_TOKEN * 1.5)  # the second request is in flight, four wait
            queued = pod.gate.admission.queued
            during, during_blind = await pod.observe(source), await pod.observe(blind)
            await asyncio.gather(*burst)
            after, after_blind = await pod.observe(source), await pod.observe(blind)
        finally:
            source.close()
            blind.close()
    assert queued >= 3
    assert during.waiting is not None and during.waiting >= 3  # vLLM itself has none waiting
    assert during_blind.waiting == 0.0  # what the controller saw before: no queue at all
    # Gate TTFTs run 0.3, 0.6, ... 1.8 s: the queue is in them. vLLM's page saw none of it.
    assert after.ttft.p90 is not None and after.ttft.p90 >= 1.2
    assert after.ttft_attainment is not None and after.ttft_attainment <= 1 / REQUESTS + 1e-9
    assert after.waiting == 0.0
    assert after_blind.ttft.p90 is None  # vLLM's TTFT histogram did not move
