"""The fleetslo plugin inside the real engine: vLLM loads it from the entry point, and its
families on vLLM's own /metrics count exactly the steps and requests the engine ran."""

from __future__ import annotations

import asyncio

import httpx
from fleetslo.engine.bench import counter_deltas, read_counters
from fleetslo.engine.client import completion_body, shoot

from tests.realvllm.engine import MODEL_NAME

REQUESTS, OUTPUT = 6, 20


def test_the_plugin_publishes_per_step_and_per_request_data_from_inside_vllm(replica_url: str) -> None:
    before = read_counters(httpx.get(f"{replica_url}/metrics").text)
    assert "fleetslo_engine_steps_total" in before, "the plugin is not loaded in vLLM"

    async def load() -> None:
        async with httpx.AsyncClient(timeout=120) as http:
            shots = await asyncio.gather(
                *(
                    shoot(http, replica_url, completion_body(MODEL_NAME, 32, OUTPUT, 500 + i))
                    for i in range(REQUESTS)
                )
            )
            assert all(s.ok for s in shots)

    asyncio.run(load())
    after = read_counters(httpx.get(f"{replica_url}/metrics").text)
    deltas = counter_deltas(before, after)
    assert after["fleetslo_engine_requests_total"] - before["fleetslo_engine_requests_total"] == REQUESTS
    steps = deltas["fleetslo_engine_steps"]
    assert steps is not None and steps > 0
    # Every request decoded OUTPUT − 1 tokens after its first; each decode step timed carries them.
    decoded = deltas["fleetslo_engine_step_decode_seqs"]
    assert decoded is not None and decoded >= REQUESTS * (OUTPUT - 2)
    assert (deltas["fleetslo_engine_step_seconds"] or 0) > 0
    ttft_count = (
        after["fleetslo_engine_request_ttft_seconds_count"]
        - before["fleetslo_engine_request_ttft_seconds_count"]
    )
    assert ttft_count == REQUESTS
