"""``records.quiet_gc``: replays without the cyclic collector, sound only because they make no cycles."""

from __future__ import annotations

import gc

import pytest
from fleetslo.policy.registry import make_policy
from fleetslo.sim.longrun import simulate_stream
from fleetslo.sim.records import quiet_gc
from fleetslo.sim.runner import SimConfig, simulate
from fleetslo.sim.traces import lognormal_tokens, poisson

from tests.unit.sim.sim_support import spec_for, tiny_profile


def test_the_collector_is_paused_inside_and_restored_after_even_on_error() -> None:
    assert gc.isenabled()
    with quiet_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), quiet_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with quiet_gc():
            pass
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


@pytest.mark.parametrize("runner", ["exact", "streamed"])
def test_a_replay_under_a_scaling_policy_leaves_no_cyclic_garbage(runner: str) -> None:
    profile = tiny_profile(kv_capacity_tokens=60_000)  # preemptions too
    spec = spec_for(profile, ttft_s=0.5, tpot_s=0.05, max_replicas=20)
    trace = poisson(80.0, 400.0, lognormal_tokens(400, 120, 0.8), seed=2)
    config = SimConfig(spec, profile, 2)
    gc.collect()
    with quiet_gc():
        policy = make_policy("fleetslo", spec)
        if runner == "exact":
            run = simulate(trace, policy, config)
            assert run.events, "the policy must scale for the check to cover the control path"
            del run
        else:
            result = simulate_stream(iter(trace.requests), policy, config)
            assert result.events
            del result
        del policy
        assert gc.collect() == 0  # nothing that only the cyclic collector could have freed
