"""``sim.streamed``: the streamed replay's oracle, planned in one pass, is the whole-trace oracle's plan
before its repair rounds."""

from __future__ import annotations

import random

import pytest
from fleetslo.policy.oracle import OraclePolicy
from fleetslo.sim import oracle
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.scenario import Scenario, make_spec
from fleetslo.sim.streamed import ORACLE_LENGTH_SAMPLE, oracle_schedule
from fleetslo.sim.workload import Request, Trace

PROFILE = builtin_profile("mi300x-llama3.1-8b-fp8-tp1")


def trace(minutes: int, seed: int = 3) -> Trace:
    """A rate that doubles for ten minutes in the middle, lengths drawn per request."""
    rng, t, out = random.Random(seed), 0.0, []
    while t < minutes * 60:
        rate = 16.0 if minutes * 20 < t < minutes * 20 + 600 else 8.0
        t += rng.expovariate(rate)
        out.append(Request(t, rng.randint(50, 3000), rng.randint(5, 400)))
    return Trace(tuple(out), "doubling")


def scenario(t: Trace) -> Scenario:
    spec = make_spec(PROFILE, ttft_s=2.0, tpot_s=0.05, quantile=0.9, min_replicas=1, max_replicas=40)
    return Scenario(trace=t, trace_name="doubling", profile=PROFILE, spec=spec, initial_replicas=2)


@pytest.mark.parametrize("minutes", [30])
def test_the_streamed_oracle_is_the_whole_trace_oracles_first_plan(minutes: int) -> None:
    sc = scenario(trace(minutes))
    assert len(sc.trace) < ORACLE_LENGTH_SAMPLE  # every request's lengths: the same calibration
    whole = oracle.schedule_for(
        oracle.minute_need(sc, oracle.calibrate(sc)),
        sc.spec.replicas.cold_start + OraclePolicy.interval,
        sc.spec.replicas.min,
    )
    assert oracle_schedule(iter(sc.trace.requests), sc) == whole
    assert max(n for _, n in whole) > min(n for _, n in whole)  # the doubling is planned for


def test_a_trace_longer_than_the_length_sample_is_calibrated_on_a_uniform_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fleetslo.sim import streamed

    sc = scenario(trace(30))
    seen: list[Trace] = []
    real = oracle.calibrate

    def spy(s: Scenario, mean_rate: float | None = None) -> oracle.Capacity:
        seen.append(s.trace)
        assert mean_rate == pytest.approx(len(sc.trace) / sc.trace.requests[-1].arrival_s)
        return real(s, mean_rate)

    monkeypatch.setattr(streamed, "ORACLE_LENGTH_SAMPLE", 500)
    assert len(sc.trace) > 10_000
    monkeypatch.setattr(oracle, "calibrate", spy)
    schedule = oracle_schedule(iter(sc.trace.requests), sc)
    (sample,) = seen
    assert len(sample) == 500 and set(sample.requests) <= set(sc.trace.requests)
    # drawn from the whole trace, not its first 500 requests
    assert max(r.arrival_s for r in sample.requests) > sc.trace.requests[-1].arrival_s / 2
    assert len(schedule) > 1
