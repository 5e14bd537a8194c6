"""The policy's performance model for one replica of a fleet behind the simulator's
least-outstanding router, against that fleet of engines.

The model counts the prompts that land during a request's decode as Poisson arrivals at the
replica's share of the rate, which is exact for a replica alone. Behind a router that sends each
request to the emptiest replica they come more regularly (a replica takes a second request only
once no replica is emptier), so on Poisson arrivals of long prompts the fleet's p90 TPOT is
lower than the model says: 25.2 ms against 33.8 at 0.1 requests/s per replica of 8, 22.7 against
42.3 with short answers at 0.2/s per replica of 64. The error is on the safe side, and the
learned speed absorbs it where the fleet runs. A router-aware form (an Erlang-4 arrival count
and the chance that no replica is emptier) predicted these fleets within 10 %, but on the real,
burstier traces it cost windows (bursty code 0.978 -> 0.891, 28 -> 25 workloads at >= 0.99 of 79):
their arrivals are not that regular (``docs/policy-log.md``, stop 37). These tests hold the
model to the safe side of the fleet and say by how much it errs. Every engine here is the same
MI325X TP4 profile the model is given, and each prompt is drawn from the continuous distribution
whose mid-quantiles the points are (``poisson_requests(continuous=True)``), as real prompts are.
"""

from __future__ import annotations

import pytest
from fleetslo.policy.fleetslo.perf_model import predict
from fleetslo.sim.compare import step_cost
from fleetslo.sim.profile import builtin_profile

from benchmarks.bench_routed import fleet_p90s as routed_fleet_p90s
from tests.unit.sim.sim_support import CHAT, LONG, SHORT_ANSWERS, Lengths, mix_of

PROFILE = builtin_profile("mi325x-qwen3-235b-fp8-tp4")
COST = step_cost(PROFILE)
MIXES = {"long": LONG, "short answers": SHORT_ANSWERS, "chat": CHAT}


def fleet_p90s(lengths: Lengths, replicas: int, rate: float) -> tuple[float, float]:
    """The median over one-minute windows of the fleet's p90 TTFT and TPOT: ``replicas`` engines
    behind the simulator's least-outstanding router, Poisson arrivals at ``rate`` per replica
    for 25 minutes (the first five left out)."""
    return routed_fleet_p90s(lengths, replicas, rate, 1500.0, warmup_s=300.0, seed=3)


@pytest.mark.parametrize(
    ("mix", "replicas", "rate", "at_most"),
    [
        ("long", 1, 0.2, 1.1),  # a replica alone: engine 40.8 ms, the model 42.9
        ("long", 8, 0.1, 1.6),  # 25.2 (near the bare decode step), 33.8
        ("long", 8, 0.2, 1.35),  # 34.3, 42.9
        ("long", 32, 0.3, 1.4),  # 43.5, 56.7
        ("short answers", 64, 0.2, 2.0),  # 22.7, 42.3
        ("chat", 8, 4.0, 1.1),  # 39.0, 39.8: many decoding at once, the router changes little
    ],
)
def test_for_a_routed_fleet_the_model_errs_on_the_safe_side(
    mix: str, replicas: int, rate: float, at_most: float
) -> None:
    engine_ttft, engine_tpot = fleet_p90s(MIXES[mix], replicas, rate)
    model = predict(COST, rate, mix_of(MIXES[mix]), None)
    assert engine_tpot * 0.97 <= model.tpot_p90 <= engine_tpot * at_most
    # p90 TTFT is mostly the p90 prompt's prefill here. The model's prefill queue is a replica's
    # own (M/G/1); behind the router a prompt rarely waits for another's prefill, so at 0.3/s per
    # replica the model says 3.63 s where the fleet shows 2.59, 1.40x (with short answers 3.63
    # against 2.49 on 32 replicas: smaller decode batches leave the prefill chunks more of each
    # step). Read off the prompt points it said 3.57 s: the top point flattened its wait.
    assert engine_ttft * 0.95 <= model.ttft_p90 <= engine_ttft * 1.45
