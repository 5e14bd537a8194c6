"""The simulator runs the controller ``fleetslo run`` ships: guard, finite-only data, back-off, audit.

Each test would fail if the replay called the policy itself, as it once did: the scale-down on a
partial picture would go through, a NaN would reach the policy, a failing source would be asked
again at every decision, and the controller's metrics would count nothing.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from fleetslo.control.ports import Source
from fleetslo.core.errors import BadQuery, FleetSLOError, SourceUnavailable
from fleetslo.core.model import Decision, Observation, Quantiles, Reason, ReplicaCounts
from fleetslo.core.spec import BatchActuator, FleetSLO, FleetSLOSpec
from fleetslo.policy.evidence import guard_scale_down
from fleetslo.sim.control_plane import SCHEDULER_TICK_S, ReplayFailed
from fleetslo.sim.longrun import simulate_stream
from fleetslo.sim.runner import Run, SimConfig, simulate
from fleetslo.sim.traces import lognormal_tokens, poisson
from fleetslo.sim.workload import Trace

from tests.unit.sim.sim_support import ScriptedPolicy, spec_for, tiny_profile

PROFILE = tiny_profile()
TRACE = poisson(4.0, 900.0, lognormal_tokens(200, 40, 0.5), seed=11)
DECISIONS = "fleetslo_controller_decisions_total"
OBSERVE_ERRORS = "fleetslo_controller_observe_errors_total"


def config() -> SimConfig:
    spec = spec_for(PROFILE, ttft_s=1.0, tpot_s=0.05, cold_start_s=60.0)
    return SimConfig(spec, PROFILE, initial_replicas=2)


def sample(run: Run, name: str, **labels: str) -> float:
    assert run.controller is not None
    return run.controller.registry.get_sample_value(name, labels) or 0.0


class FailingSource:
    """The simulated source, failing with ``error`` from ``since`` on; records when it was asked."""

    def __init__(self, inner: Source, error: Exception, since: float) -> None:
        self.inner, self.error, self.since = inner, error, since
        self.asked: list[float] = []

    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        self.asked.append(now)
        if now >= self.since:
            raise self.error
        return self.inner.observe(slo, replicas, batch_limit, now)


class PartialSource:
    """The simulated source with one replica's scrape missing between ``start`` and ``end``."""

    def __init__(self, inner: Source, start: float, end: float) -> None:
        self.inner, self.start, self.end = inner, start, end

    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        obs = self.inner.observe(slo, replicas, batch_limit, now)
        if self.start <= now < self.end:
            return replace(obs, replicas_reporting=obs.replicas_reporting - 1)
        return obs


class NaNSource:
    """The simulated source with a NaN p90 TTFT, as a broken exporter might publish."""

    def __init__(self, inner: Source) -> None:
        self.inner = inner

    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        obs = self.inner.observe(slo, replicas, batch_limit, now)
        return replace(obs, ttft=Quantiles(math.nan, math.nan, math.nan))


def test_a_scale_down_on_a_partial_picture_is_held_as_in_production() -> None:
    policy = ScriptedPolicy(((0.0, 2, None), (50.0, 1, None)), interval=5.0)
    run = simulate(TRACE, policy, config(), wrap_source=lambda inner: PartialSource(inner, 50.0, 60.0))
    at = {d.t_s: d for d in run.decisions}
    partial = [o for o in policy.seen if 50.0 <= o.at < 60.0]
    assert [(o.at, o.replicas.ready, o.replicas_reporting) for o in partial] == [(50.0, 2, 1), (55.0, 2, 1)]
    # held exactly as control.loop holds it: the guard's decision, not the policy's
    for o in partial:
        held = guard_scale_down(policy.decide(o, None, config().spec, o.at)[0], o, 2)
        assert held.reason is Reason.HOLD_PARTIAL_DATA and at[o.at].replicas == held.replicas == 2
    assert sample(run, DECISIONS, target="simulated", reason="HoldPartialData") == 2
    moves = [(e.t_s, e.replicas_from, e.replicas_to, e.reason) for e in run.events]
    assert moves == [(60.0, 2, 1, "Scheduled")]  # down once the picture is whole again


def test_policies_never_see_a_nan() -> None:
    policy = ScriptedPolicy(((0.0, 2, None),))
    simulate(TRACE, policy, config(), wrap_source=NaNSource)
    assert policy.seen and all(o.ttft == Quantiles() for o in policy.seen)


def test_a_permanently_failing_source_is_retried_after_ten_minutes_not_at_every_decision() -> None:
    failing: list[FailingSource] = []

    def wrap(inner: Source) -> Source:
        failing.append(FailingSource(inner, BadQuery("HTTP 400: parse error"), since=100.0))
        return failing[0]

    policy = ScriptedPolicy(((0.0, 2, None),))
    run = simulate(TRACE, policy, config(), wrap_source=wrap)
    # decisions every 15 s: the first ask after 100 s is at 105, then permanent_retry (600 s) later
    assert [t for t in failing[0].asked if t >= 100.0] == [105.0, 705.0]
    assert max(o.at for o in policy.seen) == 90.0  # no decision without an observation
    assert sample(run, OBSERVE_ERRORS, target="simulated", reason="bad_query") == 2


def test_a_failing_reconcile_backs_off_on_the_schedulers_ticks() -> None:
    failing: list[FailingSource] = []

    def wrap(inner: Source) -> Source:
        # a fleetslo error that is neither transient (blind decision) nor permanent (600 s)
        failing.append(FailingSource(inner, FleetSLOError("the source is confused"), since=300.0))
        return failing[-1]

    run = simulate(TRACE, ScriptedPolicy(((0.0, 2, None),)), config(), wrap_source=wrap)
    streamed = simulate_stream(
        iter(TRACE.requests), ScriptedPolicy(((0.0, 2, None),)), config(), wrap_source=wrap
    )
    assert streamed.failures == run.failures  # the one control plane under both replays
    retries = [t for t in failing[0].asked if t >= 300.0][:8]
    # back-off 1, 2, 5, 10, 30, 60, 60 s, each attempt on the next 5 s tick of ``fleetslo run``'s
    # scheduler: 300 (+1 ->) 305 (+2 ->) 310 (+5 ->) 315 (+10 ->) 325 (+30 ->) 355 (+60 ->) 415, 475
    assert SCHEDULER_TICK_S == 5.0
    assert retries == [300.0, 305.0, 310.0, 315.0, 325.0, 355.0, 415.0, 475.0]
    failed = [t for t in failing[0].asked if t >= 300.0]
    assert run.controller is not None and [f[0] for f in run.failures] == failed
    assert sample(run, OBSERVE_ERRORS, target="simulated", reason="error") == len(failed)


@pytest.mark.parametrize("where", ["source", "policy"])
def test_a_bug_stops_the_replay_with_its_cause(where: str) -> None:
    class Crashing(ScriptedPolicy):
        def decide(
            self, obs: Observation, state: None, spec: FleetSLOSpec, now: float
        ) -> tuple[Decision, None]:
            if now >= 60.0:
                raise ZeroDivisionError("a policy bug")
            return super().decide(obs, state, spec, now)

    policy = Crashing(((0.0, 2, None),)) if where == "policy" else ScriptedPolicy(((0.0, 2, None),))

    def wrap(inner: Source) -> Source:
        return FailingSource(inner, ZeroDivisionError("a source bug"), since=60.0)

    stage = "decide" if where == "policy" else "observe"
    with pytest.raises(ReplayFailed, match=f"{stage} stage failed at t=60s: ZeroDivisionError"):
        simulate(TRACE, policy, config(), wrap_source=None if where == "policy" else wrap)


def test_a_source_that_cannot_observe_leaves_the_policy_blind_and_a_scale_down_held() -> None:
    policy = ScriptedPolicy(((0.0, 3, None), (200.0, 1, None)))

    def wrap(inner: Source) -> Source:
        return FailingSource(inner, SourceUnavailable("prometheus down"), since=180.0)

    run = simulate(TRACE, policy, config(), wrap_source=wrap)
    blind = [o for o in policy.seen if o.at >= 180.0]
    assert blind and all(o.replicas_reporting == 0 and o.ttft.p90 is None for o in blind)
    assert all(d.replicas == 3 for d in run.decisions if d.t_s >= 180.0)
    assert sample(run, DECISIONS, target="simulated", reason="HoldNoData") == len(
        [o for o in blind if o.at >= 200.0]
    )


@pytest.mark.parametrize("stream", [False, True])
def test_the_controllers_metrics_count_every_simulated_decision(stream: bool) -> None:
    policy = ScriptedPolicy(((0.0, 2, None), (300.0, 3, 16)))
    cfg = config()
    if stream:
        result = simulate_stream(iter(TRACE.requests), policy, cfg)
        controller, events = result.controller, result.events
    else:
        run = simulate(TRACE, policy, cfg)
        controller, events = run.controller, run.events
        assert len(run.decisions) == len(policy.seen)
    assert controller is not None
    registry = controller.registry
    assert registry.get_sample_value(DECISIONS, {"target": "simulated", "reason": "Scheduled"}) == len(
        policy.seen
    )
    assert registry.get_sample_value("fleetslo_controller_tick_duration_seconds_count") == len(policy.seen)
    assert registry.get_sample_value("fleetslo_controller_desired_replicas", {"target": "simulated"}) == 3
    assert registry.get_sample_value("fleetslo_controller_batch_limit", {"target": "simulated"}) == 16
    assert [(e.replicas_from, e.replicas_to, e.batch_limit) for e in events] == [(2, 3, 16)]


def test_a_spec_without_a_batch_actuator_never_moves_the_limit() -> None:
    cfg = config()
    spec = cfg.spec.model_copy(
        update={"batch_limit": cfg.spec.batch_limit.model_copy(update={"actuator": BatchActuator.NONE})}
    )
    policy = ScriptedPolicy(((0.0, 2, 8),))
    run = simulate(Trace(TRACE.requests[:200]), policy, replace(cfg, spec=spec))
    assert all(o.batch_limit is None for o in policy.seen)  # fleetslo run reads no limit either
    assert {s.batch_limit for s in run.samples} == {PROFILE.max_num_seqs}
    assert run.events == []
