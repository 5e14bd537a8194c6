"""``records.quiet_gc``: replays without the cyclic collector, sound only because they make no cycles."""

from __future__ import annotations

import gc

import pytest
from fleetslo.policy.registry import make_policy
from fleetslo.sim.longrun import simulate_stream
from fleetslo.sim.records import quiet_gc
from fleetslo.sim.runner import SimConfig
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


def _garbage_after_a_replay(duration_s: float) -> tuple[int, int]:
    """(objects only the cyclic collector frees after a streamed replay, scale events)."""
    profile = tiny_profile(kv_capacity_tokens=60_000)  # preemptions too
    spec = spec_for(profile, ttft_s=0.5, tpot_s=0.05, max_replicas=20)
    trace = poisson(80.0, duration_s, lognormal_tokens(400, 120, 0.8), seed=2)
    gc.collect()
    with quiet_gc():
        result = simulate_stream(
            iter(trace.requests), make_policy("fleetslo", spec), SimConfig(spec, profile, 2)
        )
        events = len(result.events)
        del result
        return gc.collect(), events


def test_what_a_streamed_replay_leaves_to_the_collector_does_not_grow_with_its_length() -> None:
    # The replay's own state at its end is cyclic (the control plane's objects refer to each other),
    # so the collector frees it after the run; what must not happen is garbage per request or per
    # decision, which a paused collector would let pile up over a week.
    short, short_events = _garbage_after_a_replay(400.0)
    long, long_events = _garbage_after_a_replay(1600.0)
    assert short_events and long_events, "the policy must scale for the check to cover the control path"
    assert long < 2 * short, (short, long)  # four times the requests and decisions
