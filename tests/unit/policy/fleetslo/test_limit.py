"""The batch limit while replicas start: the queue a limit builds lasts until they serve."""

from __future__ import annotations

import pytest
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.policy.fleetslo.learning import PerformanceModel
from fleetslo.policy.fleetslo.limit import batch_limit, until_ready
from fleetslo.policy.fleetslo.state import FleetSLOState
from fleetslo.policy.stages import ChainState
from fleetslo.sim.compare import step_cost
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.scenario import make_spec

from tests.unit.sim.sim_support import CHAT, mix_of

PROFILE = builtin_profile("mi325x-qwen3-235b-fp8-tp4")
#: A chat fleet whose 10 ready replicas carry 6 requests/s each: p90 TPOT 57 ms by the engine
#: profile's model, over the 50 ms target, while TTFT (10 s) has room; 2 more are starting.
SPEC = make_spec(PROFILE, ttft_s=10.0, tpot_s=0.05, cold_start_s=300.0)
NOW = 1000.0


def state_with(events: tuple[tuple[float, int], ...]) -> FleetSLOState:
    return FleetSLOState(
        PerformanceModel(step_cost(PROFILE)), mix=mix_of(CHAT), chain=ChainState(events=events)
    )


def overloaded() -> Observation:
    return Observation(
        target="chat", at=NOW, window=60.0, replicas=ReplicaCounts(10, starting=2),
        batch_limit=SPEC.batch_limit.max, replicas_reporting=10, data_age=1.0, request_rate=60.0,
    )  # fmt: skip


def test_a_limit_protects_tpot_when_the_starting_replicas_serve_within_a_minute() -> None:
    state = state_with(((NOW - 240.0, 2),))  # asked for 4 minutes ago: serving in one
    limit = batch_limit(overloaded(), state, SPEC)
    assert limit is not None and limit < SPEC.batch_limit.max
    assert state.model.predict(6.0, mix_of(CHAT), limit).tpot_p90 <= 0.05
    assert state.model.predict(6.0, mix_of(CHAT), SPEC.batch_limit.max).tpot_p90 > 0.05


@pytest.mark.parametrize("events", [((NOW, 2),), ()])
def test_a_queue_that_would_build_for_a_whole_cold_start_is_not_worth_the_limit(
    events: tuple[tuple[float, int], ...],
) -> None:
    """Asked for just now, or starting for a reason the chain does not remember (replacing
    replicas lost): five minutes of the limited fleet's shortfall queue past the TTFT target."""
    assert batch_limit(overloaded(), state_with(events), SPEC) == SPEC.batch_limit.max


def test_until_ready_counts_from_the_oldest_scale_up_still_starting() -> None:
    events = ((NOW - 400.0, 3), (NOW - 200.0, 2), (NOW - 100.0, -1), (NOW - 50.0, 1))
    assert until_ready(state_with(events), SPEC, NOW) == pytest.approx(100.0)  # 300 s after NOW - 200
    assert until_ready(state_with(()), SPEC, NOW) == 300.0
