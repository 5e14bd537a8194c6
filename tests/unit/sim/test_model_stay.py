"""The performance model's stay (arrival to last token) against the simulator's engine.

The policy reads a backlog as the requests held beyond ``arrival rate × stay`` (Little's law,
``policy.fleetslo.backlog``); the stay comes from the model at the window's mix, so a mix of longer
answers is held longer without being a queue. This checks the model's mean stay against the mean
the engine shows for the same Poisson load, on a chat mix, a reasoning mix (answers of 300-6,000
tokens) and long prompts, from light load to where TPOT nears a 50 ms target.
"""

from __future__ import annotations

import pytest
from fleetslo.policy.fleetslo.perf_model import predict
from fleetslo.sim.compare import step_cost
from fleetslo.sim.harness import make_engine, replay_open
from fleetslo.sim.profile import builtin_profile

from tests.unit.sim.sim_support import CHAT, LONG, Lengths, mix_of, poisson_requests

PROFILE = builtin_profile("mi325x-qwen3-235b-fp8-tp4")
COST = step_cost(PROFILE)
REASONING = ((100, 200, 300, 500, 800, 1200, 2000, 3000, 200, 400),
             (300, 600, 900, 1200, 1600, 2000, 3000, 4000, 6000, 800))  # fmt: skip


def engine_stay(lengths: Lengths, rate: float, n: int = 4000) -> float:
    """Mean seconds from arrival to last token on one engine offered Poisson ``rate``."""
    requests = poisson_requests(lengths, rate, n)
    done = replay_open(make_engine(PROFILE, limit=None), requests)[n // 10 :]  # warm-up left out
    stays = [r.finish - r.arrival for r in done if r.finish is not None]
    return sum(stays) / len(stays)


@pytest.mark.parametrize(
    ("lengths", "rate", "tolerance"),
    [
        # Measured: model / engine 0.988 and 1.004 (chat), 0.990 and 1.007 (reasoning), 0.906
        # (long prompts: the step chain's wait treats a prompt of several chunks as one step).
        # With stop 46's M/G/1 queue of one prompt per step: 0.983, 0.970, 0.986, 0.991, 0.871.
        (CHAT, 1.0, 0.05),
        (CHAT, 6.0, 0.05),
        (REASONING, 0.3, 0.05),
        (REASONING, 2.0, 0.05),
        (LONG, 0.3, 0.15),
    ],
    ids=["chat-light", "chat-near-target", "reasoning-light", "reasoning-busy", "long-prompts"],
)
def test_the_model_knows_how_long_a_request_stays(lengths: Lengths, rate: float, tolerance: float) -> None:
    model = predict(COST, rate, mix_of(lengths), None)
    assert model.stay_s == pytest.approx(engine_stay(lengths, rate), rel=tolerance)


def test_a_longer_answer_mix_stays_longer_at_the_same_rate() -> None:
    """The reason a stay learned once and kept misreads a longer mix: at 1 request/s the engine
    holds a reasoning request about eight times as long as a chat one, and so does the model."""
    chat = predict(COST, 1.0, mix_of(CHAT), None).stay_s
    reasoning = predict(COST, 1.0, mix_of(REASONING), None).stay_s
    assert reasoning / chat == pytest.approx(engine_stay(REASONING, 1.0) / engine_stay(CHAT, 1.0), rel=0.05)
    assert reasoning > 5 * chat


def test_a_saturated_replica_has_no_steady_stay() -> None:
    assert predict(COST, 5.0, mix_of(LONG), None).stay_s == float("inf")
