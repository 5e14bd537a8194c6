"""Representative replicas: systematic sampling of the stream and the spec's bounds divided by m."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.policy.baselines import StaticPolicy
from fleetslo.policy.registry import make_policy
from fleetslo.sim.longrun import simulate_stream
from fleetslo.sim.runner import SimConfig
from fleetslo.sim.sampled import every_mth, sampled_replicas, sampled_scenario, sampled_spec, scaled_result
from fleetslo.sim.scenario import Scenario, run_policy
from fleetslo.sim.traces import lognormal_tokens, poisson
from fleetslo.sim.workload import Request, Trace

from tests.unit.sim.sim_support import spec_for, tiny_profile


def test_every_mth_keeps_one_in_m_in_order() -> None:
    reqs = [Request(float(i), 1, 1) for i in range(10)]
    assert [r.arrival_s for r in every_mth(reqs, 3)] == [0.0, 3.0, 6.0, 9.0]
    assert [r.arrival_s for r in every_mth(reqs, 3, offset=1)] == [1.0, 4.0, 7.0]
    assert list(every_mth(reqs, 1)) == reqs


def test_sampled_spec_divides_the_bounds() -> None:
    spec = spec_for(tiny_profile(), min_replicas=4, max_replicas=60)
    small = sampled_spec(spec, 4)
    assert (small.replicas.min, small.replicas.max) == (1, 15)
    assert small.objectives == spec.objectives and small.replicas.cold_start == spec.replicas.cold_start
    assert sampled_replicas(60, 8) == 8 and sampled_replicas(2, 8) == 1
    with pytest.raises(ConfigError, match="whole number"):
        sampled_spec(spec, 0)


def test_a_sampled_fleet_sees_the_per_replica_load_of_the_whole() -> None:
    profile = tiny_profile()
    spec = spec_for(profile, ttft_s=0.5, tpot_s=0.05)
    trace = poisson(120.0, 150.0, lognormal_tokens(200, 40, 0.5), seed=3)
    whole = simulate_stream(iter(trace.requests), StaticPolicy(8), SimConfig(spec, profile, 8))
    part = simulate_stream(
        every_mth(trace.requests, 4), StaticPolicy(2), SimConfig(sampled_spec(spec, 4), profile, 2)
    )
    assert part.requests == pytest.approx(whole.requests / 4, abs=1)
    assert part.replica_seconds * 4 == pytest.approx(whole.replica_seconds, rel=0.02)
    assert part.met_requests / part.requests == pytest.approx(whole.met_requests / whole.requests, abs=0.02)


def test_a_sampled_scenario_result_reads_as_the_whole_fleet() -> None:
    profile = tiny_profile()
    spec = spec_for(profile, ttft_s=0.5, tpot_s=0.05, min_replicas=2, max_replicas=40)
    trace = poisson(60.0, 600.0, lognormal_tokens(200, 40, 0.5), seed=4)
    scenario = Scenario(trace, "poisson", profile, spec, initial_replicas=6)
    small = sampled_scenario(scenario, 2)
    assert len(small.trace) == (len(trace) + 1) // 2 and small.initial_replicas == 3
    assert (small.spec.replicas.min, small.spec.replicas.max) == (1, 20)
    raw = run_policy(small, make_policy("hpa-util", small.spec))
    scaled = scaled_result(raw, 2)
    assert scaled.sample == 2 and scaled.to_dict()["sample"] == 2 and "sample" not in raw.to_dict()
    assert scaled.replica_hours == raw.replica_hours * 2 and scaled.cost_usd == raw.cost_usd * 2
    assert scaled.requests == raw.requests * 2 and scaled.tokens == raw.tokens * 2
    assert scaled.cost_per_million_tokens == raw.cost_per_million_tokens  # a ratio: as it is
    assert (scaled.window_attainment, scaled.p90_ttft_s) == (raw.window_attainment, raw.p90_ttft_s)
    assert raw.events, "the policy must have scaled for the events to be checked"
    assert [(e.replicas_from, e.replicas_to) for e in scaled.events] == [
        (e.replicas_from * 2, e.replicas_to * 2) for e in raw.events
    ]
    assert [w.ready_replicas for w in scaled.windows] == [
        None if w.ready_replicas is None else w.ready_replicas * 2 for w in raw.windows
    ]
    with pytest.raises(ConfigError, match="no request left"):
        sampled_scenario(replace(scenario, trace=Trace(())), 2)
