"""The sidecar's fault suites as figures: parser fuzz, misbehaving vLLM, gate concurrency, slow clients.

- **parser**: mutations of the real captures against a PromQL reference (``benchmarks.parser_fuzz``):
  inputs tried, crashes, wrong results;
- **upstream**: the sidecar scraping a vLLM that answers garbage, NaN, 1e20, 500, nothing in time,
  a page over the bound; and the gate in front of one that breaks off streams, answers 500 or
  drops connections: crashes (an exception out of a scrape), NaN published, requests lost (a
  client that got no answer at all);
- **concurrency**: many streams through a gate with a small limit while some clients hang up in
  the queue (issue 15 defect 1's stall): requests lost, streams not byte-exact, upstream over the
  limit, slots left stuck afterwards;
- **slow clients**: connections that never finish their headers or bodies, with real requests
  beside them: real requests lost, the slow ones still open after their timeout, memory growth.

Real loopback sockets and the real sidecar, gate and parser; counts, not timings.
"""

from __future__ import annotations

import asyncio
import json
import resource
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from fleetslo.core.metrics.exposition import parse_page
from fleetslo.sidecar.app import Sidecar
from fleetslo.sidecar.gate.server import Gate
from fleetslo.sidecar.gate.testing import FakeOpenAIUpstream, sse_events
from fleetslo.sidecar.settings import ExporterSettings, GateServerSettings
from fleetslo.testing import FakeClock, FakeVllmServer, grow_capture

from benchmarks.faults import Figure
from benchmarks.parser_fuzz import CAPTURES, fuzz

SUITE = "sidecar"
MODEL = "fake"


def run(quick: bool) -> list[Figure]:
    figures = _parser(300 if quick else 10_000)
    figures += asyncio.run(_async_suites(quick))
    return figures


def _parser(n: int) -> list[Figure]:
    result = fuzz(n)
    return [
        Figure(SUITE, "parser: inputs tried (mutated real captures)", result.tried, ">= 10000 (benchmark)"),
        Figure(SUITE, "parser: crashes", result.crashes, "0"),
        Figure(SUITE, "parser: wrong results vs PromQL reference", result.wrong, "0"),
        Figure(SUITE, "parser: corrupted inputs refused cleanly", result.refused),
    ]


async def _async_suites(quick: bool) -> list[Figure]:
    figures = await _misbehaving_vllm()
    figures += await _misbehaving_upstream_of_the_gate(20 if quick else 100)
    figures += await _concurrency(100 if quick else 500)
    figures += await _slow_clients(50 if quick else 300)
    figures += _parser_memory(200 if quick else 2_000)
    return figures


# ---------------------------------------------------------------------------------------------


async def _misbehaving_vllm() -> list[Figure]:
    """The sidecar scraping a vLLM that goes wrong in every way we know, then comes back."""
    text = CAPTURES[0].read_text(encoding="utf-8")
    modes: list[tuple[str, Callable[[FakeVllmServer, int], None]]] = [
        ("garbage", lambda f, i: setattr(f, "page", "<html>502</html>\x00{{{")),
        ("nan counter", lambda f, i: setattr(f, "page", _poison(grow_capture(text, 1 + i), "NaN"))),
        ("1e20 bucket", lambda f, i: setattr(f, "page", _poison(grow_capture(text, 1 + i), "1e20"))),
        ("http 500", lambda f, i: setattr(f, "status", 500)),
        ("slow", lambda f, i: setattr(f, "delay", 1.5)),
        ("huge page", lambda f, i: setattr(f, "page", text + "# pad\n" * 40_000)),
        ("truncated", lambda f, i: setattr(f, "page", grow_capture(text, 1 + i)[: len(text) // 3])),
    ]
    crashes = nan_pages = scrapes = 0
    clock = FakeClock()
    settings = ExporterSettings(vllm_url="http://127.0.0.1:1", listen="127.0.0.1:0", interval=1.0,
                                timeout=1.0, windows=[5.0], max_page_bytes="128KiB")  # fmt: skip
    with FakeVllmServer(text) as fake:
        sidecar = Sidecar(settings.model_copy(update={"vllm_url": fake.url}), clock=clock)
        async with aiohttp.ClientSession() as session:
            await sidecar.start(session)
            try:
                step = 0
                for _, apply in modes:
                    for _ in range(3):
                        fake.page, fake.status, fake.delay = grow_capture(text, 1 + step), 200, 0.0
                        apply(fake, step)
                        step += 1
                        scrapes += 1
                        try:
                            await sidecar.scrape_once()
                        except Exception:  # counting crashes is the point
                            crashes += 1
                        clock.advance(1.0)
                        async with session.get(f"http://127.0.0.1:{sidecar.port}/metrics") as resp:
                            nan_pages += "NaN" in await resp.text()
            finally:
                await sidecar.stop()
    return [
        Figure(SUITE, f"upstream: sidecar scrapes of a misbehaving vLLM ({len(modes)} modes)", scrapes),
        Figure(SUITE, "upstream: sidecar crashes", crashes, "0"),
        Figure(SUITE, "upstream: sidecar pages with NaN", nan_pages, "0"),
    ]


def _poison(page: str, value: str) -> str:
    lines = page.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("vllm:request_success_total{", "vllm:time_to_first_token_seconds_bucket{")):
            lines[i] = line.rsplit(" ", 1)[0] + " " + value
            break
    return "\n".join(lines) + "\n"


async def _misbehaving_upstream_of_the_gate(n: int) -> list[Figure]:
    """Streams through the gate while vLLM breaks off, answers 500, or drops the connection."""
    lost = 0
    tried = 0
    for mode in ("break", "status", "drop"):
        upstream = FakeOpenAIUpstream(token_delay=0.001)
        if mode == "break":
            upstream.break_after = 3
        elif mode == "status":
            upstream.status = 500
        async with _gate(upstream, max_inflight=4) as (gate, client):
            if mode == "drop":
                upstream.drop_next = n

            async def one() -> bool:
                try:
                    async with client.post(f"http://127.0.0.1:{gate.port}/v1/chat/completions",
                                           data=json.dumps(_chat(20)), timeout=_TIMEOUT) as resp:  # fmt: skip
                        await resp.read()
                        return True
                except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
                    return True  # an error the client sees is an answer, not a loss
                except TimeoutError:
                    return False

            answered = await asyncio.gather(*(one() for _ in range(n)))
            tried += n
            lost += answered.count(False)
            lost += gate.admission.inflight + gate.admission.queued  # slots that never came back
    return [
        Figure(SUITE, "upstream: gate requests against a failing vLLM (3 modes)", tried),
        Figure(SUITE, "upstream: gate requests lost (no answer, or slot stuck)", lost, "0"),
    ]


async def _concurrency(n: int) -> list[Figure]:
    """``n`` streams through a gate with limit 8; one in ten clients hangs up while queued."""
    upstream = FakeOpenAIUpstream(first_token_delay=0.01, token_delay=0.001)
    tokens = 12
    async with _gate(upstream, max_inflight=8) as (gate, client):
        expected = b"".join(sse_events(json.dumps(_chat(tokens)).encode(), True, tokens, False))

        async def stream(i: int) -> str:
            if i % 10 == 9:
                task = asyncio.create_task(_post(client, gate, _chat(tokens)))
                await asyncio.sleep(0.005)
                task.cancel()
                return "hung up"
            try:
                status, body = await _answer(client, gate, _chat(tokens))
            except TimeoutError:
                return "lost"
            if status != 200:
                return "refused"
            return "exact" if body == expected else "differs"

        outcomes = await asyncio.gather(*(stream(i) for i in range(n)))
        await asyncio.sleep(0.2)
        stuck = gate.admission.inflight + gate.admission.queued
        # After the storm, a burst must still be served in full: no slot was handed to nobody.
        after = await asyncio.gather(*(stream(0) for _ in range(16)))
    every = [*outcomes, *after]
    return [
        Figure(SUITE, "concurrency: streams through a gate of limit 8", n),
        Figure(SUITE, "concurrency: requests lost", every.count("lost"), "0"),
        Figure(SUITE, "concurrency: streams not byte-exact", every.count("differs"), "0"),
        Figure(SUITE, "concurrency: requests refused (within the queue bound)", every.count("refused"), "0"),
        Figure(SUITE, "concurrency: upstream in flight at most (limit 8)", upstream.max_inflight, "<= 8"),
        Figure(SUITE, "concurrency: slots stuck after clients hung up", stuck, "0"),
    ]


async def _slow_clients(n: int) -> list[Figure]:
    """``n`` slow-header and ``n`` slow-body connections beside 20 real requests."""
    upstream = FakeOpenAIUpstream(token_delay=0.001)
    before = _rss_mib()
    async with _gate(upstream, header_timeout=1.0, body_timeout=1.0) as (gate, client):
        port = gate.port
        slow = []
        for i in range(2 * n):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
            writer.write(head if i % 2 == 0 else head + b"Content-Length: 100000\r\n\r\n{")
            slow.append((reader, writer))
        real = await asyncio.gather(
            *(_post(client, gate, _chat(4)) for _ in range(20)), return_exceptions=True
        )
        held = _rss_mib() - before
        still_open = 0
        for reader, writer in slow:
            try:
                await asyncio.wait_for(reader.read(), 10.0)
            except TimeoutError:
                still_open += 1
            writer.close()
    lost = sum(1 for r in real if isinstance(r, BaseException))
    return [
        Figure(SUITE, "slow clients: slow-header + slow-body connections", 2 * n),
        Figure(SUITE, "slow clients: real requests lost beside them", lost, "0"),
        Figure(SUITE, "slow clients: still open 10 s after their 1 s timeout", still_open, "0"),
        Figure(SUITE, "slow clients: memory while held (MiB, RSS growth)", round(held, 1)),
    ]


def _parser_memory(n: int) -> list[Figure]:
    """Peak RSS growth over ``n`` parses of distinct pages (unique label values each time)."""
    text = CAPTURES[0].read_text(encoding="utf-8")
    for i in range(20):
        parse_page(text.replace('model_name="', f'model_name="warm{i}-'))
    before = _rss_mib()
    for i in range(n):
        parse_page(text.replace('model_name="', f'model_name="m{i}-'))
    return [Figure(SUITE, f"memory: RSS growth over {n} distinct pages (MiB)", round(_rss_mib() - before, 1),
                   "bounded (caches capped at 5 MiB)")]  # fmt: skip


# ---------------------------------------------------------------------------------------------

_TIMEOUT = aiohttp.ClientTimeout(total=30)


def _chat(tokens: int) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": tokens,
            "stream": True}  # fmt: skip


async def _post(client: aiohttp.ClientSession, gate: Gate, body: dict[str, Any]) -> bytes:
    return (await _answer(client, gate, body))[1]


async def _answer(client: aiohttp.ClientSession, gate: Gate, body: dict[str, Any]) -> tuple[int, bytes]:
    async with client.post(f"http://127.0.0.1:{gate.port}/v1/chat/completions", data=json.dumps(body),
                           timeout=_TIMEOUT) as resp:  # fmt: skip
        return resp.status, await resp.read()


class _gate:  # used as ``async with _gate(...)``
    def __init__(self, upstream: FakeOpenAIUpstream, **options: Any) -> None:
        self.upstream, self.options = upstream, options
        self._close: list[Callable[[], Awaitable[None]]] = []

    async def __aenter__(self) -> tuple[Gate, aiohttp.ClientSession]:
        await self.upstream.start()
        settings = GateServerSettings(listen="127.0.0.1:0", upstream=self.upstream.url, **self.options)
        gate = Gate(settings, served=lambda: (MODEL,))
        await gate.start()
        client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        self._close = [client.close, gate.stop, self.upstream.stop]
        return gate, client

    async def __aexit__(self, *_: object) -> None:
        for close in self._close:
            await close()


def _rss_mib() -> float:
    """Resident memory of this process now, MiB (Linux ``/proc``; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
