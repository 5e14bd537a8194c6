"""A gate in front of a fake streaming upstream, on real loopback sockets, for the gate tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from fleetslo.sidecar.gate.server import Gate
from fleetslo.sidecar.gate.testing import FakeOpenAIUpstream
from fleetslo.sidecar.settings import GateServerSettings
from fleetslo.sidecar.thresholds import SloThresholds

TOKEN = "s3cret-token-of-24-chars"
#: The model the fake engine serves (the request bodies name it).
MODEL = "fake"
SLO = SloThresholds(ttft=0.5, tpot=0.05)


@dataclass
class Rig:
    gate: Gate
    upstream: FakeOpenAIUpstream
    client: aiohttp.ClientSession

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.gate.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.gate.admin_port}"

    async def post(self, path: str, body: dict[str, Any], base: str | None = None) -> tuple[int, bytes]:
        async with self.client.post((base or self.url) + path, data=json.dumps(body)) as resp:
            return resp.status, await resp.read()

    async def admin(
        self, method: str, path: str, body: Any = None, token: str | None = TOKEN
    ) -> tuple[int, dict[str, Any]]:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        data = None if body is None else json.dumps(body)
        async with self.client.request(method, self.admin_url + path, data=data, headers=headers) as resp:
            return resp.status, await resp.json()


@asynccontextmanager
async def running(
    upstream: FakeOpenAIUpstream | None = None, token: str | None = TOKEN, **options: Any
) -> AsyncIterator[Rig]:
    fake = upstream or FakeOpenAIUpstream()
    await fake.start()
    settings = GateServerSettings(
        listen="127.0.0.1:0", upstream=fake.url, admin_listen="127.0.0.1:0", admin_token=token, **options
    )
    gate = Gate(settings, SLO, served=lambda: (MODEL,))
    await gate.start()
    try:
        async with aiohttp.ClientSession() as client:
            yield Rig(gate, fake, client)
    finally:
        await gate.stop()
        await fake.stop()


def chat(tokens: int = 8, stream: bool = True, usage: bool = False, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "fake", "messages": [{"role": "user", "content": "hi"}],
                            "max_tokens": tokens, "stream": stream, **extra}  # fmt: skip
    if usage:
        body["stream_options"] = {"include_usage": True}
    return body


def completion(tokens: int = 8, stream: bool = True, usage: bool = False, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "fake", "prompt": "hi", "max_tokens": tokens, "stream": stream, **extra}
    if usage:
        body["stream_options"] = {"include_usage": True}
    return body
