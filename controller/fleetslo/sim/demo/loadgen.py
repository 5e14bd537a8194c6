"""The demo's clients: a trace replayed in real time through the router, every request measured.

Each request of the trace is sent at its arrival time (simulated seconds, mapped to the wall clock by
the demo's ``SpeedClock``) as a streamed ``/v1/completions`` call whose prompt is a list of
``input_tokens`` token ids and whose ``max_tokens`` is the trace's output length, so the replica
processes exactly the request the simulator would. Latency is measured where a user would see it,
on the client, with the gate's ``StreamTimer`` fed simulated timestamps: TTFT runs from the
*scheduled* arrival (a late send counts against it) to the first content event, the finish is the
last one. The results are the simulator's ``SimRequest`` records, judged by the same code.

A replica that turns a request away because it is draining, or that has just gone, does not fail
the request: it is routed again, avoiding that replica. Any other error answer counts as rejected.
It measures and sends; it must not decide anything about the fleet.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass

import aiohttp

from fleetslo.sidecar.gate.latency import StreamTimer
from fleetslo.sim.demo.lag import LOADGEN, LagMeter
from fleetslo.sim.demo.router import Router
from fleetslo.sim.records import SimRequest
from fleetslo.sim.server.clock import SpeedClock
from fleetslo.sim.workload import Trace

#: Attempts per request before it counts as rejected (each after a draining or vanished replica).
MAX_ATTEMPTS = 5
_JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True, slots=True)
class Served:
    """One finished request, for the live view: when it arrived and what it measured (simulated s)."""

    arrival: float
    ttft: float
    tpot: float | None


class _Retry(Exception):
    """This replica could not take the request; route it elsewhere."""


class LoadGenerator:
    """Replays ``trace`` through ``router``; ``records`` fill in as requests complete."""

    def __init__(
        self, trace: Trace, router: Router, clock: SpeedClock, model: str, lag: LagMeter | None = None
    ) -> None:
        self.records = [SimRequest.of(i, r) for i, r in enumerate(trace.requests)]
        self.router, self.clock, self.model = router, clock, model
        self.lag = lag or LagMeter()
        self.sent = 0
        self.served = 0
        self.rejected = 0
        #: The most recent finished requests, newest last (the live view's sliding window).
        self.recent: deque[Served] = deque(maxlen=20_000)
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def run(self, session: aiohttp.ClientSession) -> None:
        """Send every request at its time; returns when the last one was sent (not finished)."""
        self._session = session
        loop = asyncio.get_running_loop()
        for record in self.records:
            due = self.clock.wall_at(record.arrival)
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            now = loop.time()
            self.lag.record(LOADGEN, now - due, now)  # a late send is a late arrival
            task = asyncio.create_task(self._send(record))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            self.sent += 1

    async def finish(self, grace: float) -> None:
        """Give requests in flight up to ``grace`` wall seconds, then cancel the rest."""
        pending = set(self._tasks)
        if pending and grace > 0:
            await asyncio.wait(pending, timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    async def _send(self, record: SimRequest) -> None:
        avoid: set[str] = set()
        for _ in range(MAX_ATTEMPTS):
            name, base = await self.router.acquire(avoid)
            try:
                await self._stream(base, record)
                return
            except _Retry:
                avoid.add(name)
            finally:
                self.router.release(name)
        self._reject(record)

    async def _stream(self, base: str, record: SimRequest) -> None:
        assert self._session is not None
        timer = StreamTimer(record.arrival)
        body = request_body(self.model, record.input_tokens, record.output_tokens)
        try:
            async with self._session.post(base + "/v1/completions", data=body, headers=_JSON) as response:
                if response.status == 503:
                    raise _Retry  # the gate is draining: another replica will take it
                if response.status != 200:
                    self._reject(record)
                    return
                async for chunk in response.content.iter_any():
                    timer.feed(chunk, self.clock.now())
        except aiohttp.ClientConnectorError as exc:
            raise _Retry from exc  # the replica went away between the pick and the send
        except aiohttp.ClientError:
            self._reject(record)  # the stream broke off
            return
        self._finished(record, timer)

    def _finished(self, record: SimRequest, timer: StreamTimer) -> None:
        latency = timer.finish(self.clock.now())
        if timer.first is None or timer.last is None:
            self._reject(record)
            return
        record.first_token, record.finish = timer.first, timer.last
        self.served += 1
        self.recent.append(Served(record.arrival, timer.first - record.arrival, latency.tpot))

    def _reject(self, record: SimRequest) -> None:
        record.rejected = True
        self.rejected += 1


def request_body(model: str, input_tokens: int, output_tokens: int) -> bytes:
    """A streamed completion of exactly ``input_tokens`` prompt tokens (token ids) and ``output_tokens``."""
    prompt = b"0," * (input_tokens - 1) + b"0"
    head = b'{"model": ' + json.dumps(model).encode() + b', "prompt": ['
    # ignore_eos: a real model may stop early at its end-of-text token; the trace says how many.
    tail = b'], "max_tokens": ' + str(output_tokens).encode() + b', "ignore_eos": true, "stream": true}'
    return head + prompt + tail
