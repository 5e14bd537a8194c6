"""The admission gate's cost: direct to a fake vLLM versus through the gate, side by side, one run.

Three processes, so the gate's own core is measured: the fake streaming upstream, the gate, and
this process as the load generator (closed loop, staggered starts). With two or more CPUs the
gate is pinned to the last one and the other two processes to the rest.

- **Latency**: 200 streams direct and 200 through the gate *at the same time*, so machine noise
  hits both alike; paced like a busy vLLM (first token after 50 ms, then one per 40 ms). The
  figure is the added client-side TTFT at p50/p90/p99 (target: p99 <= 1 ms).
- **Per-event cost**: 200 streams through the gate, one event per chunk (10 ms per token, 20,000
  events/s offered): events relayed per second of the gate process's CPU time, i.e. on one core
  (target >= 20,000). Then flat out (the upstream writes as fast as it can, so chunks coalesce)
  for the upper bound, with the wall rates direct and through the gate.
- **The gate's own path**: in the gate process, on its own event loop, for every paced stream: from
  the handler's start to the request sent upstream, plus from the first upstream chunk read to it
  written to the client. This is the TTFT the gate adds by itself (aiohttp's parsing of the request
  head before the handler is not in it), free of the client's and the fake upstream's scheduling,
  which dominate the client-side p99 on a 2-core machine.
- **Integrity**: every stream's bytes equal the expected bytes (target: none lost).

Environment: BENCH_GATE_SECONDS (per phase, default 4), BENCH_GATE_STREAMS (default 200),
BENCH_GATE_UVLOOP=1 runs the gate on uvloop (if installed; the load tools use it when present),
BENCH_GATE_PROFILE=path writes a cProfile of the gate during the per-event phase,
BENCH_GATE_NICE=-10 raises the three processes' priority over other work on a shared machine.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import aiohttp
from fleetslo.sidecar.gate.latency import StreamTimer
from fleetslo.sidecar.gate.testing import FakeOpenAIUpstream, sse_events

STREAMS = int(os.environ.get("BENCH_GATE_STREAMS", "200"))
SECONDS = float(os.environ.get("BENCH_GATE_SECONDS", "4"))
PACED = {"tokens": 32, "first_token_delay": 0.05, "token_delay": 0.04}
FAST = {"tokens": 64, "first_token_delay": 0.01, "token_delay": 0.01}
FLAT_OUT = {"tokens": 256, "first_token_delay": 0.0, "token_delay": 0.0}
PATH = "/v1/chat/completions"


def _run(main: Callable[[], Coroutine[Any, Any, Any]], uv: bool = True) -> Any:
    """Run on uvloop when asked and installed (cheaper load tools leave more CPU to the gate)."""
    if uv:
        try:
            import uvloop

            return uvloop.run(main())
        except ImportError:
            pass
    return asyncio.run(main())


def _pin(cpus: set[int]) -> None:
    """Pin to ``cpus``; with BENCH_GATE_NICE (e.g. -10, as root) also outrank other work on a shared box."""
    if (os.cpu_count() or 1) >= 2 and not os.environ.get("BENCH_GATE_NO_PIN"):
        os.sched_setaffinity(0, cpus)
    if os.environ.get("BENCH_GATE_NICE"):
        os.nice(int(os.environ["BENCH_GATE_NICE"]))


def _cores() -> tuple[set[int], set[int]]:
    """(the gate's core, everybody else's cores)."""
    n = os.cpu_count() or 1
    return {n - 1}, set(range(n - 1)) or {0}


# --- the two server processes -----------------------------------------------------------------


def _upstream_process(conn: Connection) -> None:
    _pin(_cores()[1])

    async def main() -> None:
        fake = await FakeOpenAIUpstream().start()
        conn.send(fake.port)
        await _serve_commands(conn, fake=fake)
        await fake.stop()

    _run(main)


def _gate_process(conn: Connection, upstream: str, profile: str | None) -> None:
    from fleetslo.sidecar.app import tune_gc_for_serving
    from fleetslo.sidecar.gate.server import Gate
    from fleetslo.sidecar.settings import GateServerSettings

    _pin(_cores()[0])
    path_times, probing = _install_path_probes()
    tune_gc_for_serving()  # as ``fleetslo exporter`` runs it

    async def main() -> None:
        gate = Gate(GateServerSettings(listen="127.0.0.1:0", upstream=upstream, max_inflight=4 * STREAMS))
        await gate.start()
        conn.send(gate.port)
        await _serve_commands(conn, profile=profile, path_times=path_times, probing=probing)
        await gate.stop()

    _run(main, uv=bool(os.environ.get("BENCH_GATE_UVLOOP")))


def _install_path_probes() -> tuple[list[float], Callable[[bool], None]]:
    """Time each generation request's own path through the gate, on the gate's loop (see the module
    docstring). Probes wrap the proxy's handler, the upstream session's send events and the
    response's write, in this benchmark process only; one list of seconds per stream comes back."""
    import contextvars

    from aiohttp import web
    from fleetslo.sidecar.gate.latency import StreamTimer
    from fleetslo.sidecar.gate.proxy import Proxy

    times: list[float] = []
    marks: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("marks", default=None)
    clock = time.perf_counter

    handle, feed, write = Proxy.handle, StreamTimer.feed, web.StreamResponse.write

    active = [False]

    async def timed_handle(self: Proxy, request: web.Request) -> web.StreamResponse:
        if not active[0]:
            return await handle(self, request)
        mark = {"start": clock()}
        marks.set(mark)
        response = await handle(self, request)
        if {"sent", "read", "written"} <= mark.keys():
            times.append(mark["sent"] - mark["start"] + mark["written"] - mark["read"])
        return response

    def timed_feed(self: StreamTimer, chunk: bytes, now: float) -> None:
        mark = marks.get()
        if mark is not None and "read" not in mark:
            mark["read"] = clock()
        feed(self, chunk, now)

    async def timed_write(self: web.StreamResponse, data: Any) -> None:
        await write(self, data)
        mark = marks.get()
        if mark is not None and "read" in mark and "written" not in mark:
            mark["written"] = clock()

    async def sent(*_: Any) -> None:
        mark = marks.get()
        if mark is not None and "read" not in mark:
            mark["sent"] = clock()  # the last of headers and body chunks before the answer

    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(sent)
    trace.on_request_chunk_sent.append(sent)
    session_init = aiohttp.ClientSession.__init__

    def traced_init(self: aiohttp.ClientSession, *args: Any, **kw: Any) -> None:
        session_init(self, *args, **kw, trace_configs=[trace])

    def probing(on: bool) -> None:
        """Wrap (or unwrap) the per-chunk paths: off, the other phases' CPU figures carry no
        probe cost. (The handler is wrapped for good: the router holds it from the gate's start.)"""
        active[0] = on
        StreamTimer.feed = timed_feed if on else feed  # type: ignore[method-assign]
        web.StreamResponse.write = timed_write if on else write  # type: ignore[method-assign]

    Proxy.handle = timed_handle  # type: ignore[method-assign]
    aiohttp.ClientSession.__init__ = traced_init  # type: ignore[method-assign]
    return times, probing


async def _serve_commands(
    conn: Connection,
    fake: FakeOpenAIUpstream | None = None,
    profile: str | None = None,
    path_times: list[float] | None = None,
    probing: Callable[[bool], None] | None = None,
) -> None:
    """Answer the orchestrator: ``cpu``, ``loop``, ``pace`` (the fake's timing), ``profile``,
    ``path`` (probes on or off; the gate's own path times so far, then forgotten), ``stop``."""
    import cProfile

    profiler = cProfile.Profile() if profile else None
    loop = asyncio.get_running_loop()
    while True:
        command, arg = await loop.run_in_executor(None, conn.recv)
        if command == "stop":
            return
        answer: Any = None
        if command == "cpu":
            answer = time.process_time()
        elif command == "loop":
            answer = type(loop).__module__.split(".")[0]
        elif command == "pace" and fake is not None:
            fake.tokens, fake.first_token_delay, fake.token_delay = (
                arg["tokens"], arg["first_token_delay"], arg["token_delay"])  # fmt: skip
        elif command == "path" and path_times is not None and probing is not None:
            probing(bool(arg))  # on for the next phase, or off
            answer = list(path_times)
            path_times.clear()
        elif command == "profile" and profiler is not None:
            profiler.enable() if arg else (profiler.disable(), profiler.dump_stats(str(profile)))
        conn.send(answer)


@dataclass
class Server:
    process: mp.process.BaseProcess
    conn: Connection
    port: int

    def ask(self, command: str, arg: Any = None) -> Any:
        self.conn.send((command, arg))
        return self.conn.recv()

    def stop(self) -> None:
        self.conn.send(("stop", None))
        self.process.join(timeout=10)


def _start(target: Any, *args: Any) -> Server:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=target, args=(child, *args), daemon=True)
    process.start()
    return Server(process, parent, parent.recv())


# --- the load generator -----------------------------------------------------------------------


@dataclass
class Load:
    ttft: list[float] = field(default_factory=list)
    streams: int = 0
    events: int = 0
    bytes: int = 0
    mismatched: int = 0
    errors: int = 0
    seconds: float = 0.0


def _request(tokens: int) -> tuple[bytes, bytes, int]:
    """A streamed chat request, the exact bytes the fake answers it with, and their event count."""
    body = json.dumps({"model": "fake", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": tokens, "stream": True}).encode()  # fmt: skip
    expected = b"".join(sse_events(body, True, tokens, False))
    return body, expected, expected.count(b"\n\n")


def _closed_loop(targets: list[tuple[str, Load]], pace: dict[str, float], seconds: float) -> None:
    """``STREAMS`` closed-loop slots per target, all at once, for ``seconds``."""
    request = _request(int(pace["tokens"]))
    stagger = pace["first_token_delay"] + pace["token_delay"] * (pace["tokens"] - 1)

    async def main() -> None:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            started = time.perf_counter()
            end = started + seconds

            async def slot(i: int, url: str, load: Load) -> None:
                await asyncio.sleep(max(stagger, 0.2) * i / STREAMS)  # spread arrivals, as real traffic is
                while time.perf_counter() < end:
                    await _one(session, url, request, load)

            await asyncio.gather(
                *(slot(i, base + PATH, load) for base, load in targets for i in range(STREAMS))
            )
            for _, load in targets:
                load.seconds += time.perf_counter() - started

    _run(main)


async def _one(
    session: aiohttp.ClientSession, url: str, request: tuple[bytes, bytes, int], load: Load
) -> None:
    body, expected, events = request
    timer = StreamTimer(time.perf_counter())
    received = bytearray()
    try:
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
            async for chunk in resp.content.iter_any():
                if timer.first is None:
                    timer.feed(chunk, time.perf_counter())
                received += chunk
    except aiohttp.ClientError:
        load.errors += 1
        return
    load.streams += 1
    load.bytes += len(received)
    load.events += events
    load.mismatched += received != expected
    if timer.ttft is not None:
        load.ttft.append(timer.ttft)


def _p(values: list[float], q: float) -> float:
    if len(values) < 2:
        return float("nan")
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 1000) - 1]


# --- the phases -------------------------------------------------------------------------------


@dataclass
class Results:
    direct: Load = field(default_factory=Load)
    gated: Load = field(default_factory=Load)
    paced_cpu: float = 0.0
    fast: Load = field(default_factory=Load)
    fast_cpu: float = 0.0
    flat_direct: Load = field(default_factory=Load)
    flat_gated: Load = field(default_factory=Load)
    flat_cpu: float = 0.0
    gate_loop: str = ""
    gate_path: list[float] = field(default_factory=list)


def _measure(
    upstream: Server, gate: Server, pace: dict[str, float], targets: list[tuple[str, Load]]
) -> float:
    """Run one phase; the gate's CPU seconds during it."""
    upstream.ask("pace", pace)
    before = gate.ask("cpu")
    _closed_loop(targets, pace, SECONDS)
    return float(gate.ask("cpu") - before)


def main() -> None:
    _pin(_cores()[1])
    upstream = _start(_upstream_process)
    gate = _start(_gate_process, f"http://127.0.0.1:{upstream.port}", os.environ.get("BENCH_GATE_PROFILE"))
    direct_url, gate_url, r = f"http://127.0.0.1:{upstream.port}", f"http://127.0.0.1:{gate.port}", Results()
    try:
        r.gate_loop = gate.ask("loop")
        _closed_loop([(gate_url, Load())], {**FAST, "tokens": 4}, 0.5)  # warm-up: imports, pools
        gate.ask("path", True)
        r.paced_cpu = _measure(upstream, gate, PACED, [(direct_url, r.direct), (gate_url, r.gated)])
        r.gate_path = gate.ask("path", False)
        gate.ask("profile", True)
        r.fast_cpu = _measure(upstream, gate, FAST, [(gate_url, r.fast)])
        gate.ask("profile", False)
        _measure(upstream, gate, FLAT_OUT, [(direct_url, r.flat_direct)])
        r.flat_cpu = _measure(upstream, gate, FLAT_OUT, [(gate_url, r.flat_gated)])
    finally:
        gate.stop()
        upstream.stop()
    _report(r)


def _report(r: Results) -> None:
    print(f"{STREAMS} concurrent streams per side, loopback, {SECONDS:g} s per phase, gate on {r.gate_loop}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'client-side TTFT (ms), both at once':40}{'direct':>10}{'via gate':>10}{'added':>9}")
    for q in (0.5, 0.9, 0.99):
        d, g = _p(r.direct.ttft, q) * 1e3, _p(r.gated.ttft, q) * 1e3
        print(f"  p{q * 100:<37g}{d:10.2f}{g:10.2f}{g - d:9.2f}")
    print(f"  streams completed{r.direct.streams:>23}{r.gated.streams:>10}")
    own = [_p(r.gate_path, q) * 1e3 for q in (0.5, 0.9, 0.99)]
    print(f"  the gate's own path, on its loop ({len(r.gate_path)} streams): "
          f"p50 {own[0]:.3f}  p90 {own[1]:.3f}  p99 {own[2]:.3f} ms")  # fmt: skip
    _cpu_line("paced, 1 event per chunk", r.gated, r.paced_cpu)
    _cpu_line("fast, 1 event per chunk", r.fast, r.fast_cpu)
    _cpu_line("flat out, chunks coalesce", r.flat_gated, r.flat_cpu)
    rate_d, rate_g = r.flat_direct.events / r.flat_direct.seconds, r.flat_gated.events / r.flat_gated.seconds
    print(f"  flat-out wall rate: direct {rate_d:,.0f} events/s, via gate {rate_g:,.0f} events/s")
    loads = [r.direct, r.gated, r.fast, r.flat_direct, r.flat_gated]
    differ, errors = sum(x.mismatched for x in loads), sum(x.errors for x in loads)
    print(f"  integrity: {sum(x.bytes for x in loads):,} bytes in {sum(x.streams for x in loads):,} streams; "
          f"{differ} streams differ, {errors} errors")  # fmt: skip


def _cpu_line(name: str, load: Load, cpu: float) -> None:
    rate = load.events / load.seconds
    print(f"  {name:27} {rate:9,.0f} events/s through the gate at {cpu / load.seconds:4.0%} of its core "
          f"= {load.events / cpu:9,.0f} events per CPU-second")  # fmt: skip


if __name__ == "__main__":
    main()
