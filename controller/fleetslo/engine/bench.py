"""The bounded benchmark behind ``fleetslo profile``: closed-loop phases against one real vLLM,
each measured by the client and, where the engine's page has them, by the engine itself.

A phase is ``concurrency`` clients, each sending the next request as soon as its last one finished,
until ``requests`` have been sent, all with the same prompt and output length. Before and after a
phase the engine's ``/metrics`` page is read: the differences of vLLM's own TTFT/TPOT sums and of the
fleetslo plugin's step totals (``fleetslo_engine_step_*``) say what the engine saw in that phase. A
counter that the page does not have is ``None`` in the result, never 0.

With the API server's pid (a vLLM on this machine), its CPU time and run-queue wait over the phase
are read from /proc as well (``procstat``): the front end's work, and how long the host made it take.

``run_open`` replays a fixed list of arrivals open-loop (the validation of a fitted profile).
This module sends and measures; ``fleetslo.sim.calibrate`` fits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from fleetslo.engine.book import STEP_BUCKETS
from fleetslo.engine.client import Shot, completion_body, shoot
from fleetslo.engine.procstat import ProcessTimes, process_times

#: Engine counters read around each phase: the plugin's step totals and vLLM's latency sums.
ENGINE_COUNTERS = (
    "fleetslo_engine_steps",
    "fleetslo_engine_step_seconds",
    "fleetslo_engine_step_prefill_seqs",
    "fleetslo_engine_step_prefill_tokens",
    "fleetslo_engine_step_decode_seqs",
    "fleetslo_engine_step_kv_tokens",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:time_to_first_token_seconds_count",
    "vllm:request_time_per_output_token_seconds_sum",
    "vllm:request_time_per_output_token_seconds_count",
)
#: The plugin's step-time histogram: cumulative bucket counts, read around each phase as well (the
#: step time's spread, not only its mean: what a busy host's stalls do to it).
STEP_HISTOGRAM = "fleetslo_engine_step_duration_seconds_bucket"
#: vLLM's own TTFT histogram, read around each phase at whatever bounds this vLLM has: the engine's
#: TTFT spread, which the host's delay must not be credited with (``fleetslo.sim.host_delay``).
TTFT_HISTOGRAM = "vllm:time_to_first_token_seconds_bucket"


def bucket_key(bound: float, histogram: str = STEP_HISTOGRAM) -> str:
    """The key of one cumulative bucket of ``histogram`` in ``read_counters``' totals."""
    return f"{histogram}{{le={bound!r}}}"


def buckets(counters: Mapping[str, float | None], histogram: str) -> list[tuple[float, float]]:
    """``(bound, cumulative count)`` of every bucket of ``histogram`` in ``read_counters``' totals
    (or their differences), by bound: whatever bounds the page had."""
    prefix = f"{histogram}{{le="  # bucket_key's form
    return sorted(
        (float(key[len(prefix) : -1]), value)
        for key, value in counters.items()
        if key.startswith(prefix) and value is not None
    )


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    requests: int
    #: Each request on a connection of its own. A client that sends its next request the moment
    #: its last stream ended, on the same keep-alive connection, now and then waits ~130 ms more
    #: for its first token (vLLM 0.32 here, idle host: p90 35-59 ms against 22-24 ms on fresh
    #: connections, vLLM's own mean 17 ms). Open-loop traffic rarely reuses a connection that soon,
    #: so the phases the host's delay is measured in must not either.
    fresh_connections: bool = False


@dataclass(frozen=True, slots=True)
class PhaseResult:
    phase: Phase
    shots: tuple[Shot, ...]
    wall_s: float
    #: Differences over the phase of ``ENGINE_COUNTERS`` (``None``: not on the page).
    engine: dict[str, float | None]
    #: The API server process's CPU seconds and run-queue wait over the phase (``None``: not read).
    server: ProcessTimes | None = None

    @property
    def ok(self) -> list[Shot]:
        return [s for s in self.shots if s.ok]


def read_counters(text: str) -> dict[str, float]:
    """Totals of every sample on a Prometheus text page, summed over labels, by sample name; a
    histogram bucket by name and bound (``bucket_key``)."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            le = sample.labels.get("le")
            name = sample.name if le is None else f"{sample.name}{{le={float(le)!r}}}"
            totals[name] = totals.get(name, 0.0) + float(sample.value)
    return totals


def counter_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in ENGINE_COUNTERS:
        total = name if name.endswith(("_sum", "_count")) else f"{name}_total"
        out[name] = after[total] - before[total] if total in after and total in before else None
    for bound in STEP_BUCKETS:
        key = bucket_key(bound)
        if key in after and key in before:
            out[key] = after[key] - before[key]
    for bound, value in buckets(after, TTFT_HISTOGRAM):
        key = bucket_key(bound, TTFT_HISTOGRAM)
        if key in before:
            out[key] = value - before[key]
    return out


class Bench:
    """Phases against one server: ``url`` for requests, ``metrics_url`` for the engine's page."""

    def __init__(
        self,
        url: str,
        model: str,
        metrics_url: str | None,
        timeout_s: float = 120.0,
        server_pid: int | None = None,
    ) -> None:
        self.url, self.model, self.metrics_url = url.rstrip("/"), model, metrics_url
        self.server_pid = server_pid
        self.timeout_s = timeout_s
        self._salt = 0

    async def _page(self, http: httpx.AsyncClient) -> dict[str, float]:
        if self.metrics_url is None:
            return {}
        try:
            response = await http.get(self.metrics_url)
            return read_counters(response.text) if response.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            return {}

    def _body(self, prompt_tokens: int, output_tokens: int) -> dict[str, object]:
        self._salt += 1
        return completion_body(self.model, prompt_tokens, output_tokens, self._salt)

    async def closed(self, phase: Phase, progress: Callable[[int], None] = lambda n: None) -> PhaseResult:
        limits = httpx.Limits(max_connections=phase.concurrency + 4)
        async with httpx.AsyncClient(timeout=self.timeout_s, limits=limits) as http:
            before = await self._page(http)
            server_before = self.server_times()
            remaining = phase.requests
            shots: list[Shot] = []

            async def worker() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    body = self._body(phase.prompt_tokens, phase.output_tokens)
                    if phase.fresh_connections:
                        async with httpx.AsyncClient(timeout=self.timeout_s) as fresh:
                            shots.append(await shoot(fresh, self.url, body))
                    else:
                        shots.append(await shoot(http, self.url, body))
                    progress(1)

            start = time.monotonic()
            await asyncio.gather(*(worker() for _ in range(phase.concurrency)))
            wall = time.monotonic() - start
            server = difference(server_before, self.server_times())
            after = await self._page(http)
        engine = counter_deltas(before, after) if after else {}
        return PhaseResult(phase, tuple(shots), wall, engine, server)

    async def idle_cpu(self, seconds: float = 2.0) -> float | None:
        """The API server's CPU seconds per second with no traffic (its own loops, health checks)."""
        before = self.server_times()
        await asyncio.sleep(seconds)
        spent = difference(before, self.server_times())
        return spent.cpu_s / seconds if spent is not None else None

    def server_times(self) -> ProcessTimes | None:
        return process_times(self.server_pid) if self.server_pid is not None else None

    async def run_open(
        self,
        arrivals: Sequence[tuple[float, int, int]],
        progress: Callable[[int], None] = lambda n: None,
    ) -> list[Shot]:
        """Send ``(offset_s, prompt_tokens, output_tokens)`` at their offsets from now, whatever is
        in flight (open loop), and return every shot in arrival order."""
        async with httpx.AsyncClient(
            timeout=self.timeout_s, limits=httpx.Limits(max_connections=None)
        ) as http:
            start = time.monotonic()

            async def one(offset: float, prompt: int, output: int) -> Shot:
                await asyncio.sleep(max(0.0, start + offset - time.monotonic()))
                shot = await shoot(http, self.url, self._body(prompt, output))
                progress(1)
                return shot

            return list(await asyncio.gather(*(one(*a) for a in arrivals)))


def difference(before: ProcessTimes | None, after: ProcessTimes | None) -> ProcessTimes | None:
    if before is None or after is None:
        return None
    cpu, wait = after.cpu_s - before.cpu_s, after.wait_s - before.wait_s
    return ProcessTimes(cpu, wait) if cpu >= 0 and wait >= 0 else None
