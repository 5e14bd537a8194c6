"""GateActuator (sync httpx) against three real gates on loopback, run on an event loop in a thread."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import aiohttp
from fleetslo.control.actuators.gate import GateActuator
from fleetslo.control.ports import PodEndpoint
from fleetslo.core.spec import Target
from fleetslo.sidecar.gate.server import Gate
from fleetslo.sidecar.gate.testing import FakeOpenAIUpstream
from fleetslo.sidecar.settings import GateServerSettings
from fleetslo.testing import FakePodDirectory

from tests.adapters.gate.harness import TOKEN, chat

T = TypeVar("T")
TARGET = Target(name="llm", model_name="fake")


class Fleet:
    """Three gates in front of one slow fake vLLM, on a loop in a background thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.gates: list[Gate] = []
        self.upstream = FakeOpenAIUpstream(tokens=20, token_delay=0.02)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    async def start(self) -> None:
        await self.upstream.start()
        for _ in range(3):
            settings = GateServerSettings(listen="127.0.0.1:0", upstream=self.upstream.url, max_inflight=8,
                                    admin_listen="127.0.0.1:0", admin_token=TOKEN)  # fmt: skip
            gate = Gate(settings)
            await gate.start()
            self.gates.append(gate)

    async def stop(self) -> None:
        for gate in self.gates:
            await gate.stop()
        await self.upstream.stop()

    def pods(self) -> list[PodEndpoint]:
        return [
            PodEndpoint(f"llm-{i}", "127.0.0.1", ready=g.not_ready() is None)
            for i, g in enumerate(self.gates)
        ]

    def admin_url(self, pod: PodEndpoint) -> str:
        return f"http://127.0.0.1:{self.gates[int(pod.name.split('-')[1])].admin_port}"

    async def stream(self, gate: Gate) -> int:
        async with aiohttp.ClientSession() as client:
            url = f"http://127.0.0.1:{gate.port}/v1/chat/completions"
            async with client.post(url, data=json.dumps(chat(20))) as resp:
                await resp.read()
                return resp.status


@contextmanager
def fleet() -> Iterator[tuple[Fleet, GateActuator, FakePodDirectory]]:
    f = Fleet()
    f.thread.start()
    f.run(f.start())
    directory = FakePodDirectory()
    directory.set(TARGET, f.pods())
    actuator = GateActuator(directory, TOKEN, admin_url=f.admin_url, drain_timeout=10, poll_interval=0.05)
    try:
        yield f, actuator, directory
    finally:
        actuator.close()
        f.run(f.stop())
        f.loop.call_soon_threadsafe(f.loop.stop)
        f.thread.join(timeout=5)
        f.loop.close()


def test_the_limit_is_set_and_read_on_every_gate() -> None:
    with fleet() as (f, actuator, _):
        assert actuator.read_limit(TARGET) == 8
        result = actuator.set_limit(TARGET, 3)
        assert result.changed and "3/3 pods (3 changed)" in result.message
        assert [g.admission.limit for g in f.gates] == [3, 3, 3]
        assert actuator.read_limit(TARGET) == 3


def test_drain_waits_for_the_in_flight_stream_and_leaves_the_other_gates_serving() -> None:
    with fleet() as (f, actuator, directory):
        # Gate 0 is busy with a stream; gates 1 and 2 are idle, so the least busy one is drained
        # at once. Then drain the busy one too: it must wait until its stream has finished.
        busy = asyncio.run_coroutine_threadsafe(f.stream(f.gates[0]), f.loop)
        while f.gates[0].admission.inflight == 0:
            threading.Event().wait(0.005)
        assert actuator.drain(TARGET, 1) == ["llm-1"]
        assert f.gates[1].not_ready() == "gate draining"
        assert f.gates[0].admission.inflight == 1
        directory.set(TARGET, f.pods())
        assert actuator.drain(TARGET, 2) == ["llm-2", "llm-0"]
        assert busy.result(timeout=5) == 200  # finished, not cut off
        assert f.upstream.cancelled == 0
        actuator.resume(TARGET, ["llm-0", "llm-1", "llm-2"])
        assert all(g.not_ready() is None for g in f.gates)
        assert f.run(f.stream(f.gates[1])) == 200
