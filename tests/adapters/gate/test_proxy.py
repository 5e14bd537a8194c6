"""The gate's proxy over real loopback sockets against a fake streaming vLLM.

Byte-exact relaying (every stream through the gate equals the direct one), pass-through, the
limit and the queue, and the faults: vLLM down (502), oversized bodies (413), a vLLM that breaks
off mid-stream, and clients that hang up (the upstream request must be cancelled).
"""

from __future__ import annotations

import asyncio
import itertools
import json

import aiohttp
import pytest
from fleetslo.sidecar.gate.testing import FakeOpenAIUpstream
from yarl import URL

from tests.adapters.gate.harness import chat, completion, running

pytestmark = [pytest.mark.asyncio, pytest.mark.virtual_time]


async def test_every_stream_through_the_gate_is_byte_identical_to_the_direct_one() -> None:
    async with running(FakeOpenAIUpstream(token_delay=0.001)) as rig:
        cases = [
            (path, make(tokens, stream, usage))
            for (path, make), tokens, stream, usage in itertools.product(
                [("/v1/chat/completions", chat), ("/v1/completions", completion)], [0, 1, 2, 40],
                [True, False], [True, False],
            )
        ]  # fmt: skip
        direct = await asyncio.gather(*(rig.post(p, b, base=rig.upstream.url) for p, b in cases))
        gated = await asyncio.gather(*(rig.post(p, b) for p, b in cases))
        for (path, body), d, g in zip(cases, direct, gated, strict=True):
            assert g == d, (path, body)
            assert d[0] == 200
        streamed = [d for (_, b), d in zip(cases, direct, strict=True) if b["stream"]]
        assert all(body.endswith(b"data: [DONE]\n\n") for _, body in streamed)


async def test_the_request_reaches_vllm_unchanged_apart_from_hop_by_hop_headers() -> None:
    async with running() as rig:
        body = json.dumps(chat(2)).encode()
        headers = {"Authorization": "Bearer user-key", "X-Request-Id": "abc",
                   "Connection": "keep-alive, X-Hop", "X-Hop": "only for the gate"}  # fmt: skip
        async with rig.client.post(rig.url + "/v1/chat/completions", data=body, headers=headers) as resp:
            await resp.read()
        assert rig.upstream.bodies[-1] == body
        seen = rig.upstream.headers[-1]
        assert seen["authorization"] == "Bearer user-key"
        assert seen["x-request-id"] == "abc"
        assert seen["host"] == f"127.0.0.1:{rig.upstream.port}"
        assert "x-hop" not in seen  # named in Connection: hop-by-hop


async def test_other_paths_pass_through_with_method_query_and_body() -> None:
    async with running() as rig:
        async with rig.client.get(rig.url + "/v1/models") as resp:
            assert resp.status == 200
            assert (await resp.json())["data"][0]["id"] == "fake"
        url = URL(rig.url + "/some/p%41th?x=1&y=%2F", encoded=True)  # escapes must arrive as sent
        async with rig.client.put(url, data=b"payload") as resp:
            assert resp.status == 200
            assert await resp.read() == b"payload"
            assert resp.headers["X-Path"] == "/some/p%41th?x=1&y=%2F"
            assert resp.headers["X-Method"] == "PUT"


async def test_concurrency_upstream_never_exceeds_the_limit_and_every_request_is_served() -> None:
    async with running(FakeOpenAIUpstream(token_delay=0.002), max_inflight=3) as rig:
        results = await asyncio.gather(*(rig.post("/v1/chat/completions", chat(10)) for _ in range(15)))
        assert {status for status, _ in results} == {200}
        assert rig.upstream.max_inflight == 3
        assert rig.gate.admission.inflight == 0


async def test_a_full_queue_answers_503_with_retry_after_and_an_openai_error() -> None:
    async with running(FakeOpenAIUpstream(first_token_delay=0.3), max_inflight=1, max_queue=1) as rig:
        first = asyncio.create_task(rig.post("/v1/chat/completions", chat(1)))
        second = asyncio.create_task(rig.post("/v1/chat/completions", chat(1)))
        await asyncio.sleep(0.1)
        async with rig.client.post(rig.url + "/v1/chat/completions", data=json.dumps(chat(1))) as resp:
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "1"
            error = (await resp.json())["error"]
        assert error["code"] == "queue_full" and error["type"] == "server_overloaded" and error["message"]
        assert [s for s, _ in await asyncio.gather(first, second)] == [200, 200]
        assert rig.gate.stats.rejected["queue_full"] == 1


async def test_a_request_that_waits_longer_than_the_queue_timeout_gets_503() -> None:
    # Real-scale times (a 45 s answer, the default 30 s queue timeout) on the virtual clock.
    async with running(FakeOpenAIUpstream(first_token_delay=45.0), max_inflight=1) as rig:
        first = asyncio.create_task(rig.post("/v1/completions", completion(1)))
        await asyncio.sleep(1.0)
        loop = asyncio.get_running_loop()
        asked = loop.time()
        status, body = await rig.post("/v1/completions", completion(1))
        assert status == 503
        assert json.loads(body)["error"]["code"] == "queue_timeout"
        assert loop.time() - asked == pytest.approx(30.0, abs=0.1)
        assert (await first)[0] == 200
        assert rig.gate.admission.queued == 0


async def test_raising_the_limit_admits_queued_requests_at_once() -> None:
    async with running(FakeOpenAIUpstream(first_token_delay=0.4), max_inflight=1) as rig:
        tasks = [asyncio.create_task(rig.post("/v1/chat/completions", chat(1))) for _ in range(4)]
        await asyncio.sleep(0.1)
        assert (rig.gate.admission.inflight, rig.gate.admission.queued) == (1, 3)
        rig.gate.admission.set_limit(4)
        await asyncio.sleep(0.05)
        assert (rig.upstream.inflight, rig.gate.admission.queued) == (4, 0)
        await asyncio.gather(*tasks)


async def test_lowering_the_limit_lets_in_flight_requests_finish() -> None:
    async with running(FakeOpenAIUpstream(first_token_delay=0.2), max_inflight=4) as rig:
        tasks = [asyncio.create_task(rig.post("/v1/chat/completions", chat(1))) for _ in range(6)]
        await asyncio.sleep(0.1)
        rig.gate.admission.set_limit(1)
        results = await asyncio.gather(*tasks)
        assert {s for s, _ in results} == {200}
        assert rig.upstream.cancelled == 0
        assert rig.upstream.max_inflight == 4


async def test_vllm_down_is_a_502_with_a_json_error_and_a_counter() -> None:
    async with running() as rig:
        await rig.upstream.stop()
        status, body = await rig.post("/v1/chat/completions", chat())
        assert status == 502
        assert json.loads(body)["error"]["code"] == "upstream_unavailable"
        assert rig.gate.stats.rejected["upstream_unavailable"] == 1
        assert rig.gate.admission.inflight == 0


async def test_a_connection_vllm_drops_before_answering_is_retried_once_on_a_fresh_one() -> None:
    async with running() as rig:
        assert (await rig.post("/v1/chat/completions", chat(2)))[0] == 200  # a pooled connection now
        direct = await rig.post("/v1/chat/completions", chat(2), base=rig.upstream.url)
        rig.upstream.drop_next = 1
        assert await rig.post("/v1/chat/completions", chat(2)) == direct
        rig.upstream.drop_next = 2  # twice in a row is not a stale connection: 502
        assert (await rig.post("/v1/chat/completions", chat(2)))[0] == 502


async def test_an_oversized_body_is_413_before_it_takes_a_slot() -> None:
    async with running(max_body="2KiB") as rig:
        big = chat(prompt="x" * 4000)
        status, body = await rig.post("/v1/chat/completions", big)
        assert status == 413
        assert json.loads(body)["error"]["code"] == "body_too_large"

        async def chunked() -> object:
            for _ in range(5):
                yield b"y" * 1000

        async with rig.client.post(rig.url + "/v1/completions", data=chunked()) as resp:
            assert resp.status == 413
        assert rig.upstream.requests == 0
        assert rig.gate.stats.rejected["body_too_large"] == 2


async def test_a_client_that_hangs_up_mid_stream_cancels_the_upstream_request() -> None:
    async with running(FakeOpenAIUpstream(token_delay=0.02)) as rig:
        async with rig.client.post(rig.url + "/v1/chat/completions", data=json.dumps(chat(200))) as resp:
            await resp.content.readuntil(b"tok3")
            resp.close()
        await _until(lambda: rig.upstream.cancelled == 1)
        assert rig.upstream.completed == 0
        await _until(lambda: rig.gate.admission.inflight == 0)
        assert rig.gate.stats.outcomes["client_disconnected"] == 1


async def test_a_client_that_hangs_up_before_a_non_streamed_answer_cancels_the_upstream_request() -> None:
    async with running(FakeOpenAIUpstream(first_token_delay=2.0)) as rig:
        waiting = asyncio.create_task(rig.post("/v1/completions", completion(4, stream=False)))
        await _until(lambda: rig.upstream.inflight == 1)
        waiting.cancel()
        await _until(lambda: rig.upstream.cancelled == 1)
        await _until(lambda: rig.gate.admission.inflight == 0)


async def test_a_client_that_hangs_up_while_queued_leaves_the_queue() -> None:
    async with running(FakeOpenAIUpstream(first_token_delay=0.3), max_inflight=1) as rig:
        first = asyncio.create_task(rig.post("/v1/chat/completions", chat(1)))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(rig.post("/v1/chat/completions", chat(1)))
        await _until(lambda: rig.gate.admission.queued == 1)
        waiting.cancel()
        await _until(lambda: rig.gate.admission.queued == 0)
        assert (await first)[0] == 200
        assert rig.upstream.requests == 1


async def test_a_vllm_that_breaks_off_mid_stream_makes_the_client_see_an_error_not_an_end() -> None:
    fake = FakeOpenAIUpstream(token_delay=0.001)
    fake.break_after = 5
    async with running(fake) as rig:
        with pytest.raises(aiohttp.ClientPayloadError):
            await rig.post("/v1/chat/completions", chat(50))
        await _until(lambda: rig.gate.admission.inflight == 0)
        assert rig.gate.stats.outcomes["upstream_failed"] == 1
        assert rig.gate.stats.model("fake").tpot.count == 0


async def test_vllm_errors_are_relayed_as_they_are() -> None:
    fake = FakeOpenAIUpstream()
    fake.status = 400
    async with running(fake) as rig:
        direct = await rig.post("/v1/chat/completions", chat(), base=fake.url)
        assert await rig.post("/v1/chat/completions", chat()) == direct
        assert direct[0] == 400
        assert rig.gate.stats.model("fake").ttft.count == 0


async def _until(condition: object, within: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():  # type: ignore[operator]
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)
