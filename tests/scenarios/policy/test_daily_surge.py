"""Issue 19's promise end to end: a controller that watched yesterday knows what 09:00 brings.

From 06:00 on one day to 13:00 on the next, the Azure conversation trace's lengths, Poisson
arrivals at 10 requests/s with a x3 surge from 09:00 to 12:00 each day (reached within two
minutes), replayed through the production loop (``longrun.simulate_stream``, one replica in two
simulated) under ``fleetslo`` with a 5-minute cold start. On the first day the surge comes
unannounced: its first minutes are lost to the cold start. On the second the seasonal forecast,
learned online from the first, has the fleet ready: every window of the surge's first quarter hour
is met, at fewer replica-hours over the second morning than a fleet that is told nothing (the
seasonal forecast off), which loses the surge's first minutes again and pays for those misses with
more headroom afterwards. Asserted: behaviour, never wall-clock time.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from functools import cache
from typing import Any

import pytest
from fleetslo.policy.registry import make_policy
from fleetslo.sim.compare import step_cost
from fleetslo.sim.longrun import DAY_S, StreamResult, simulate_stream
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.sampled import every_mth, sampled_spec
from fleetslo.sim.scenario import Scenario, make_spec
from fleetslo.sim.traces import load_trace
from fleetslo.sim.workload import Request, Trace

from benchmarks.workloads import CONV, TRACES

pytestmark = pytest.mark.slow

PROFILE = builtin_profile("mi325x-qwen3-235b-fp8-tp4")
M = 2  # one replica in two simulated


def rate(t: float) -> float:
    hour = t % DAY_S / 3600
    up, down = min(1.0, max(0.0, (hour - 9) * 30)), min(1.0, max(0.0, (hour - 12) * 30))
    return 10.0 * (1 + 2 * (up - down))


def arrivals(end_s: float = DAY_S + 13 * 3600, seed: int = 11) -> Iterator[Request]:
    """From 06:00 on the first day (a day of history by 06:00 on the second) to 13:00 on the second
    (past its surge's start): all the comparison needs."""
    lengths = [(r.input_tokens, r.output_tokens) for r in load_trace(TRACES / CONV).requests]
    rng, t, peak = random.Random(seed), 6 * 3600.0, 30.0
    while True:
        t += rng.expovariate(peak)  # thinned to rate(t)
        if t >= end_s:
            return
        if rng.random() < rate(t) / peak:
            prompt, output = lengths[rng.randrange(len(lengths))]
            yield Request(t, prompt, output)


@cache
def replayed(seasonal: bool) -> StreamResult:
    spec = sampled_spec(make_spec(PROFILE, ttft_s=2.0, tpot_s=0.05, max_replicas=60, cold_start_s=300.0), M)
    sc = Scenario(Trace(()), "daily surge", PROFILE, spec, initial_replicas=2)
    policy: Any = make_policy(
        "fleetslo", spec, step_cost=step_cost(PROFILE), max_num_seqs=PROFILE.max_num_seqs
    )
    return simulate_stream(every_mth(arrivals(), M), policy if seasonal else Blind(policy), sc.config())


class Blind:
    """The policy with its seasonal forecast off: the reactive trend alone."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.interval = inner, inner.name, inner.interval

    def initial_state(self, spec: Any) -> Any:
        state = self.inner.initial_state(spec)
        return replace(state, forecast=replace(state.forecast, seasonal=None))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def surge_windows(result: StreamResult, day: int) -> list[bool | None]:
    start = day * DAY_S + 9 * 3600
    return [w.met for w in result.windows if start <= w.start_s < start + 900]


def test_the_second_days_surge_is_met_from_its_first_minute() -> None:
    learned = replayed(seasonal=True)
    assert False in surge_windows(learned, 0)  # unannounced: the cold start after the rise
    assert all(surge_windows(learned, 1)), surge_windows(learned, 1)  # foreseen


def test_foresight_costs_less_than_being_told_nothing() -> None:
    learned, blind = replayed(seasonal=True), replayed(seasonal=False)
    assert False in surge_windows(blind, 1)  # without the forecast the second day is the first again
    assert learned.day(1)["replica_hours"] < blind.day(1)["replica_hours"]
    assert learned.day(1)["window_attainment"] > blind.day(1)["window_attainment"]
