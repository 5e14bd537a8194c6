"""``fleetslo simulate --stream``: each policy over a trace read as a stream, in bounded memory.

``compare.run_all`` holds the trace and every request's record until the end: about 550 bytes a
request (5.4 GB for three days at 40 requests/s). Here each policy replays a fresh stream of the
trace (``traces.stream``) through ``longrun.simulate_stream``, the same control loop and fleet, which
judges each minute as soon as its requests are done: memory holds the requests in flight, the reorder
buffer and one result row per minute. What it reports: window and request attainment, replica-hours
and cost, scale events, the worst minute's p90s, and every day's figures; not the p90s over the whole
run (every value would have to be kept). The oracle is planned in one pass over the stream
(``oracle_schedule``: per-minute need at a calibrated capacity, a cold start ahead) without the whole-trace
oracle's repair rounds, which replay the trace again and again.

The warm starting fleet is sized as ``compare.build_scenario`` sizes it, on the stream's first five
minutes. With ``sample`` the stream is every m-th request (``sampled.every_mth``) and sizes, costs and
counts are scaled back by m, as ``sampled.scaled_result`` does.

Takes values and an arrivals factory; opening files is the CLI's job.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import takewhile
from typing import Any

from rich.table import Table

from fleetslo.core.errors import ConfigError
from fleetslo.policy.oracle import OraclePolicy
from fleetslo.policy.registry import make_policy
from fleetslo.sim import compare, oracle, sampled
from fleetslo.sim.longrun import DAY_S, StreamResult, simulate_stream
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.result import JUDGE_WINDOW_S
from fleetslo.sim.result_types import replica_changes
from fleetslo.sim.scenario import SIZING_HORIZON_S, Scenario
from fleetslo.sim.workload import Request, Trace

#: Requests whose lengths the streamed oracle's capacity is calibrated on (a uniform sample).
ORACLE_LENGTH_SAMPLE = 20_000

#: A fresh stream of the shaped (cut, stretched, rate-scaled) trace, not sampled, each call.
Arrivals = Callable[[], Iterator[Request]]


@dataclass(frozen=True, slots=True)
class DayFigures:
    day: int
    window_attainment: float | None
    request_attainment: float | None
    requests: int
    replica_hours: float
    worst_window_p90_ttft_s: float | None


@dataclass(frozen=True, slots=True)
class StreamSummary:
    """One policy's streamed replay, scaled to the whole fleet where sampled."""

    policy: str
    trace: str
    profile: str
    requests: int
    completed: int
    rejected: int
    in_flight_at_end: int
    window_attainment: float | None
    request_attainment: float | None
    worst_window_p90_ttft_s: float | None
    worst_window_p90_tpot_s: float | None
    replica_hours: float
    gpu_hours: float
    cost_usd: float
    #: Tokens offered (prompt + output); cost per million only when every request completed.
    tokens: int
    cost_per_million_tokens: float | None
    scale_events: int
    initial_replicas: int
    wall_seconds: float
    days: tuple[DayFigures, ...]
    sample: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["stream"] = True
        return out


def run_streamed(
    arrivals: Arrivals,
    trace_name: str,
    profile: EngineProfile,
    options: compare.SimulateOptions,
    announce: Callable[[str], None] | None = None,
) -> tuple[Scenario, list[StreamSummary]]:
    """Every policy of ``options`` over its own stream of ``arrivals``; the scenario they shared."""
    m = options.sample

    def stream() -> Iterator[Request]:
        return arrivals() if m is None else sampled.every_mth(arrivals(), m)

    scenario = _sizing_scenario(arrivals, trace_name, profile, options)
    out = []
    for name in options.policies:
        if name == "oracle":
            policy = make_policy("oracle", scenario.spec, schedule=oracle_schedule(stream(), scenario))
        else:
            policy = compare.make_named_policy(name, scenario, options)
        tokens = [0]
        progress = None if announce is None else _day_reporter(name, announce, m or 1)
        result = simulate_stream(_counted(stream(), tokens, progress), policy, scenario.config())
        out.append(_summary(name, scenario, result, tokens[0], m))
        if announce is not None:
            announce(f"{name}: {result.requests:,} requests simulated in {result.wall_seconds:.0f} s")
    return scenario, out


def oracle_schedule(requests: Iterator[Request], scenario: Scenario) -> tuple[tuple[float, int], ...]:
    """The oracle's schedule from one pass over the stream: each minute's need (``oracle.minute_counts``,
    ``oracle.need_from_counts``) at the capacity calibrated on a uniform sample of the trace's lengths,
    held from a cold start and a decision interval before the minute (``oracle.schedule_for``). No
    repair rounds: those replay the whole trace again and again (``oracle.plan``); the days
    benchmark's oracle is this one."""
    sample = _Reservoir(ORACLE_LENGTH_SAMPLE, random.Random(scenario.seed))
    counts = oracle.minute_counts(sample.passing(requests))
    if not sample.kept:
        raise ConfigError(f"oracle: no requests in the trace ({scenario.trace_name})")
    lengths = Trace(tuple(sample.kept), f"{scenario.trace_name}, {len(sample.kept):,} requests' lengths")
    mean_rate = sample.seen / max(sample.last, JUDGE_WINDOW_S)
    capacity = oracle.calibrate(replace(scenario, trace=lengths), mean_rate=mean_rate)
    bounds = scenario.spec.replicas
    need = oracle.need_from_counts(counts, capacity, bounds, sample.last)
    return oracle.schedule_for(need, bounds.cold_start + OraclePolicy.interval, bounds.min)


class _Reservoir:
    """A uniform sample of ``size`` requests of a stream it passes through (reservoir sampling), how
    many went by and the last arrival."""

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size, self.rng = size, rng
        self.kept: list[Request] = []
        self.seen, self.last = 0, 0.0

    def passing(self, requests: Iterable[Request]) -> Iterator[Request]:
        for r in requests:
            self.seen += 1
            if len(self.kept) < self.size:
                self.kept.append(r)
            elif (j := self.rng.randrange(self.seen)) < self.size:
                self.kept[j] = r
            self.last = r.arrival_s
            yield r


def _sizing_scenario(
    arrivals: Arrivals, trace_name: str, profile: EngineProfile, options: compare.SimulateOptions
) -> Scenario:
    """``compare.build_scenario`` on the stream's first minutes: the spec, and the warm fleet sized there."""
    stream = arrivals()
    first = next(stream, None)
    if first is None:
        raise ConfigError(f"trace: no requests left after --start/--duration ({trace_name})")
    later = takewhile(lambda r: r.arrival_s < SIZING_HORIZON_S, stream)
    head = Trace((first, *later), f"{trace_name}, its first {SIZING_HORIZON_S:g} s")
    return compare.build_scenario(head, trace_name, profile, options)


def _counted(
    requests: Iterator[Request], tokens: list[int], new_day: Callable[[int, int], None] | None = None
) -> Iterator[Request]:
    """The stream, counting its tokens; ``new_day(day, requests so far)`` as each day's first request
    is taken (the replay pulls arrivals as it reaches them: the day has begun in simulated time)."""
    day = 0
    for n, r in enumerate(requests):
        tokens[0] += r.input_tokens + r.output_tokens
        if new_day is not None and r.arrival_s >= (day + 1) * DAY_S:
            day = int(r.arrival_s // DAY_S)
            new_day(day, n)
        yield r


def _day_reporter(name: str, announce: Callable[[str], None], m: int) -> Callable[[int, int], None]:
    started = time.perf_counter()

    def report(day: int, requests: int) -> None:
        elapsed = time.perf_counter() - started
        announce(f"{name}: day {day} begins ({requests * m:,} requests so far, {elapsed:.0f} s)")

    return report


def _summary(name: str, scenario: Scenario, r: StreamResult, tokens: int, m: int | None) -> StreamSummary:
    k = m or 1
    spec = scenario.spec
    replica_hours = r.replica_seconds / 3600 * k
    cost = replica_hours * spec.cost.per_replica_hour
    complete = r.completed == r.requests and r.requests > 0
    ttfts = [w.p90_ttft_s for w in r.windows if w.p90_ttft_s is not None]
    tpots = [w.p90_tpot_s for w in r.windows if w.p90_tpot_s is not None]
    # days requests arrived on (the drain past the last one is paid in the totals, not listed)
    days = sorted(r.requests_by_day)
    return StreamSummary(
        policy=name,
        trace=scenario.trace_name,
        profile=scenario.profile.name,
        requests=r.requests * k,
        completed=r.completed * k,
        rejected=r.rejected * k,
        in_flight_at_end=r.in_flight_at_end * k,
        window_attainment=r.window_attainment(),
        request_attainment=r.met_requests / r.requests if r.requests else None,
        worst_window_p90_ttft_s=max(ttfts, default=None),
        worst_window_p90_tpot_s=max(tpots, default=None),
        replica_hours=replica_hours,
        gpu_hours=replica_hours * spec.cost.gpus_per_replica,
        cost_usd=cost,
        tokens=tokens * k,
        cost_per_million_tokens=cost / (tokens * k) * 1e6 if complete and tokens else None,
        scale_events=replica_changes(r.events),
        initial_replicas=scenario.initial_replicas * k,
        wall_seconds=r.wall_seconds,
        days=tuple(_day(r, d, k) for d in days),
        sample=m,
    )


def _day(r: StreamResult, day: int, k: int) -> DayFigures:
    figures = r.day(day)
    return DayFigures(
        day=day,
        window_attainment=figures["window_attainment"],
        request_attainment=figures["request_attainment"],
        requests=figures["requests"] * k,
        replica_hours=figures["replica_hours"] * k,
        worst_window_p90_ttft_s=figures["worst_window_p90_ttft_s"],
    )


#: ``compare.summary_table``'s columns for a streamed run: no p90 over the whole run, the worst minute's.
_WORST = {
    "p90_ttft_s": ("worst minute p90 TTFT s", "worst_window_p90_ttft_s", "{:.3f}"),
    "p90_tpot_s": ("worst minute p90 TPOT ms", "worst_window_p90_tpot_s", "ms"),
}
COLUMNS: tuple[tuple[str, str, str], ...] = tuple(_WORST.get(c[1], c) for c in compare.COLUMNS)


def days_table(results: Sequence[StreamSummary]) -> Table:
    """Per day: each policy's window attainment / replica-hours."""
    table = Table(title="per day: windows met / replica-h")
    table.add_column("day", justify="right")
    for result in results:
        table.add_column(result.policy, justify="right")
    by_day = [{d.day: d for d in result.days} for result in results]
    for day in sorted({day for figures in by_day for day in figures}):
        cells = [_day_cell(figures[day]) if day in figures else "—" for figures in by_day]
        table.add_row(str(day), *cells)
    return table


def _day_cell(day: DayFigures) -> str:
    return f"{compare.cell(day.window_attainment, '{:.1%}')} / {day.replica_hours:.1f}"
