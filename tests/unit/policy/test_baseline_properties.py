"""Properties of every baseline over random observation sequences: bounds hold, missing data never
scales, and the same inputs give the same decisions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fleetslo.core.config import load
from fleetslo.core.model import Observation, Quantiles, ReplicaCounts
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.registry import POLICIES, make_policy
from hypothesis import given, settings
from hypothesis import strategies as st

LOW, HIGH = 2, 12
SPEC = load(
    FleetSLOSpec,
    {
        "target": {"name": "q", "model_name": "q"},
        "objectives": {"ttft": {"threshold": "2s"}, "tpot": {"threshold": "50ms"}},
        "replicas": {"min": LOW, "max": HIGH},
    },
)
#: The signals each policy reads; with all of them missing it must hold.
INPUTS = {
    "hpa-util": ("gpu_utilization",),
    "hpa-running": ("running",),
    "keda-waiting": ("waiting", "request_rate"),
    "llmd-slo": ("ttft", "tpot", "request_rate"),
}
MAYBE = st.one_of(st.none(), st.floats(0, 500, allow_nan=False))


@st.composite
def observations(draw: st.DrawFn) -> Observation:
    provisioned = draw(st.integers(LOW, HIGH))
    starting = draw(st.integers(0, provisioned))
    return Observation(
        target="q",
        at=0.0,
        window=60.0,
        replicas=ReplicaCounts(provisioned - starting, starting),
        batch_limit=64,
        ttft=Quantiles(p90=draw(MAYBE)),
        tpot=Quantiles(p90=draw(st.one_of(st.none(), st.floats(0, 1)))),
        request_rate=draw(MAYBE),
        running=draw(MAYBE),
        waiting=draw(MAYBE),
        gpu_utilization=draw(st.one_of(st.none(), st.floats(0, 1))),
    )


def blind(obs: Observation, signals: tuple[str, ...]) -> Observation:
    """The observation with the policy's inputs unknown."""
    cleared: dict[str, Any] = {s: Quantiles() if s in ("ttft", "tpot") else None for s in signals}
    return replace(obs, **cleared)


def play(name: str, steps: list[Observation]) -> list[tuple[int, str]]:
    policy = make_policy(name, SPEC)
    state = policy.initial_state(SPEC)
    out = []
    for i, obs in enumerate(steps):
        decision, state = policy.decide(obs, state, SPEC, 15.0 * i)
        out.append((decision.replicas, decision.message))
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([n for n in POLICIES if n != "oracle"]), st.lists(observations(), min_size=1, max_size=25)
)
def test_bounds_and_determinism(name: str, steps: list[Observation]) -> None:
    first = play(name, steps)
    assert all(LOW <= replicas <= HIGH for replicas, _ in first)
    assert play(name, steps) == first


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(INPUTS)), st.lists(observations(), min_size=1, max_size=25), st.data())
def test_missing_inputs_hold_the_current_count(
    name: str, steps: list[Observation], data: st.DataObject
) -> None:
    policy = make_policy(name, SPEC)
    state = policy.initial_state(SPEC)
    for i, obs in enumerate(steps):
        if data.draw(st.booleans()):
            unknown = blind(obs, INPUTS[name])
            decision, state = policy.decide(unknown, state, SPEC, 15.0 * i)
            assert decision.replicas == unknown.replicas.provisioned
        else:
            _, state = policy.decide(obs, state, SPEC, 15.0 * i)
