"""The request mix is read off whole windows only: a fleet filling from empty completes a few
short answers while its token counters already count every request it admitted, and a window that
began before the first data divides the one by the other (drawn 65: 72,253 tokens per request
read where about 1,900 arrive, the maximum bought for a 10-minute cold start)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fleetslo.core.model import Observation
from fleetslo.policy.fleetslo import FleetSLOPolicy

from tests.unit.policy.fleetslo.test_decide import SPEC, obs


def filling(t: float, completions: float) -> Observation:
    """A fleet that admits 10 requests/s of 800 prompt + 200 generated tokens and has completed
    ``completions`` per second of them so far: the counters count what was admitted."""
    return replace(
        obs(t, 10, completions), prompt_tokens_rate=800.0 * 10.0, generation_tokens_rate=200.0 * 10.0,
        running=10.0 * t,
    )  # fmt: skip


def test_no_mix_is_learned_until_a_whole_window_has_passed_since_the_first_data() -> None:
    policy = FleetSLOPolicy()
    state = policy.initial_state(SPEC)
    for t, done in ((0.0, 0.05), (15.0, 0.4), (30.0, 1.5), (45.0, 4.0)):
        _, state = policy.decide(filling(t, done), state, SPEC, t)
        assert state.mix is None, f"a mix learned at {t:.0f}s from a window older than the data"
    _, state = policy.decide(obs(60.0, 10, 10.0), state, SPEC, 60.0)
    assert state.mix is not None
    assert state.mix.tokens_per_request == pytest.approx(1000.0, rel=1e-6)


def test_a_restored_mix_is_kept_through_the_first_window() -> None:
    """After a restart the persisted mix stands until a whole window is read: the first partial
    one would replace it with a reading of a few completions."""
    policy = FleetSLOPolicy()
    learned = policy.initial_state(SPEC)
    _, learned = policy.decide(obs(0.0, 10, 10.0), learned, SPEC, 0.0)
    _, learned = policy.decide(obs(60.0, 10, 10.0), learned, SPEC, 60.0)
    assert learned.mix is not None
    restored = policy.initial_state(SPEC).resume(learned.learned())
    _, after = policy.decide(filling(1000.0, 0.05), restored, SPEC, 1000.0)
    assert after.mix == learned.mix
