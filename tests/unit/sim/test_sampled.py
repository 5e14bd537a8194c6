"""Representative replicas: systematic sampling of the stream and the spec's bounds divided by m."""

from __future__ import annotations

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.policy.baselines import StaticPolicy
from fleetslo.sim.longrun import simulate_stream
from fleetslo.sim.runner import SimConfig
from fleetslo.sim.sampled import every_mth, sampled_replicas, sampled_spec
from fleetslo.sim.traces import lognormal_tokens, poisson
from fleetslo.sim.workload import Request

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
