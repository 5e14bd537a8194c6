"""``fleetslo``: hold p90 TTFT and p90 TPOT under their targets at the lowest replica count.

Two knobs on two time scales, both chosen from one model of what a replica carries
(``perf_model``: step physics, the request mix's length distributions, the chain of steps prompts join):

* **Replicas** act in minutes: the cheapest count whose predicted p90 TTFT and TPOT meet both
  targets at the arrival rate forecast one cold start ahead, with ``headroom``. The instant load
  (running + waiting, by Little's law) overrides the forecast when a spike outruns it.
* **The batch limit** acts in seconds and only bites when it protects TPOT at TTFT's expense:
  when the ready replicas, at the load they carry now, are predicted to break TPOT while TTFT has
  room (overload, replicas still starting). Otherwise it is the engine's maximum — never a
  standing cap that costs throughput while both targets have room.

The model learns online from every clean window (``PerformanceModel.learn``) and starts from the
engine profile's step costs when one is configured, from a conservative prior otherwise (the
decision's message says which). Feedback (``feedback``) adds replicas in proportion when an
observed p90 breaches anyway; every decision carries the predicted p90s behind it.

Safety: missing, stale or contradictory data holds, with a reason, and never scales down; a partial
picture may scale up but not down; limits are the one shared chain (``stages.run_chain``).

Pure: everything comes in as arguments and goes out in the returned decision and state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.base import Carried, Restored
from fleetslo.policy.fleetslo import backlog, carry, feedback, signals
from fleetslo.policy.fleetslo.calibration import LOAD_KEEP_HORIZONS, Calibration, moved
from fleetslo.policy.fleetslo.config import FleetSLOConfig
from fleetslo.policy.fleetslo.decision import decision
from fleetslo.policy.fleetslo.feedback import Plan
from fleetslo.policy.fleetslo.learning import PerformanceModel
from fleetslo.policy.fleetslo.perf_model import Prediction
from fleetslo.policy.fleetslo.physics import CONSERVATIVE_PRIOR
from fleetslo.policy.fleetslo.sizing import Sizing, kv_floor, reachable, smallest
from fleetslo.policy.fleetslo.state import FleetSLOState
from fleetslo.policy.stages import Step, run_chain

#: The instant load overrides the forecast only once requests queue: waiting above this share of
#: the running ones (below it, ``running`` alone is scrape-to-scrape noise, not a spike).
_QUEUE_SHARE = 0.1
#: A window teaches the model only while the batch limit is clearly not what set its latencies,
#: and while the fleet is near a steady state: arrivals within this share of completions.
_LIMIT_ROOM = 0.9
#: Requests/s of a replica that is as good as idle (the model's floor: one request's latencies).
_IDLE_RATE = 1e-3
_STATIONARY = 0.1


class FleetSLOPolicy:
    """The fleetslo two-knob policy (``--policy fleetslo``)."""

    name = "fleetslo"

    def __init__(self, config: FleetSLOConfig | None = None) -> None:
        self.config = config or FleetSLOConfig()
        self.interval = self.config.interval
        #: The last ``_targets`` answer and what it was computed from (the model, the mix, the
        #: calibration whose margins it applied, the targets): the sizing asks it once per candidate.
        self._targets_memo: tuple[tuple[object, ...], tuple[float, float, str | None]] | None = None

    def initial_state(self, spec: FleetSLOSpec) -> FleetSLOState:
        state = FleetSLOState(PerformanceModel(self.config.step_cost or CONSERVATIVE_PRIOR))
        return carry.with_known_events(state, spec)

    # --- across restarts (``policy.base.Restorable``; the logic is in ``carry``) --------------

    def learned(self, state: FleetSLOState) -> dict[str, Any]:
        return state.learned()

    def history_step(self, state: FleetSLOState) -> float | None:
        seasonal = state.forecast.seasonal
        return None if seasonal is None else seasonal.config.bin_s

    def restore(
        self, state: FleetSLOState, spec: FleetSLOSpec, carried: Carried
    ) -> tuple[FleetSLOState, Restored]:
        return carry.restore(state, carried)

    def decide(
        self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, now: float
    ) -> tuple[Decision, FleetSLOState]:
        current = obs.replicas.provisioned
        if current == 0:
            floor = max(spec.replicas.min, 1)
            why = f"no replica at all: start {floor}"
            return Decision(floor, obs.batch_limit, Reason.CLAMPED_MIN, why), state
        problem = signals.data_problem(obs, self.config.stale_after_s)
        if problem is not None:
            reason, why = problem
            return Decision(current, obs.batch_limit, reason, f"hold at {current}: {why}"), state
        state = self._learn(obs, state, spec, now)
        plan = self._plan(obs, state, spec)
        horizon = spec.replicas.cold_start + self.config.interval
        load = state.calibration.load.predicted(now + horizon, plan.tokens, made=now)
        state = replace(state, calibration=replace(state.calibration, load=load))
        step, chain = run_chain(
            Step(plan.replicas, plan.reason, plan.message), current, state.chain, self.config.behavior,
            bounds=(spec.replicas.min, spec.replicas.max), now=now, cooldown_s=self.config.cooldown_s,
            keep_events_s=self.config.behavior.scale_down.stabilization_s,
        )  # fmt: skip
        if step.replicas < current and obs.replicas_reporting < obs.replicas.ready:
            missing = obs.replicas.ready - obs.replicas_reporting
            why = f"{missing} ready replicas not reporting: no scale-down"
            step, chain = Step(current, Reason.HOLD_PARTIAL_DATA, why), state.chain
        state = replace(state, chain=chain)
        return decision(step, obs, state, spec, warming_up=self._warming_up(state, obs)), state

    # --- learning ---------------------------------------------------------------------------

    def _learn(self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, now: float) -> FleetSLOState:
        cfg = self.config
        first_seen = now if state.first_seen is None else state.first_seen
        arrival = signals.arrival_rate(obs, state.held_history, now, drain_share=cfg.drain_share)
        forecast, calibration, whole = state.forecast, state.calibration, now - first_seen >= obs.window
        # Only windows begun after the first data: earlier ones under-count the arrivals and divide a
        # filling fleet's token counters by its few completions (drawn 65: 72,253 tokens a request).
        window_mix = signals.request_mix(obs) if whole else None
        mix = state.mix if window_mix is None else window_mix if state.mix is None else state.mix.blend(
            window_mix, cfg.mix_smoothing
        )  # fmt: skip
        if arrival is not None and mix is not None and whole:
            # The trend is of tokens arriving, not requests: a mix drifting to longer prompts is
            # load growing as surely as more requests are.
            tokens = arrival * (window_mix or mix).tokens_per_request
            forecast = forecast.update(now, tokens, max(cfg.trend_window_s, self._memory(spec)))
            keep = round(LOAD_KEEP_HORIZONS * (spec.replicas.cold_start + cfg.interval) / cfg.interval)
            calibration = replace(calibration, load=calibration.load.observed(now, tokens, keep=keep))
        calibration = self._check_model(obs, state, spec, calibration)
        held = signals.outstanding(obs)
        ready, since = obs.replicas.ready, state.ready_since
        changed = since is None or since[0] != ready
        state = replace(
            state,
            first_seen=first_seen,
            forecast=forecast,
            mix=mix,
            held_history=signals.remember(state.held_history, now, held, obs.window + 2 * cfg.interval),
            ready_history=signals.remember(state.ready_history, now, ready, obs.window + 2 * cfg.interval),
            calibration=calibration,
            ready_since=(ready, now) if changed else since,
            ready_before=(since[0] if since else None) if changed else state.ready_before,
            quiet_at=now if obs.request_rate == 0 and held == 0 else state.quiet_at,
        )
        if mix is not None and self._clean(obs, state, spec, arrival):
            rate = (obs.request_rate or 0.0) / obs.replicas_reporting
            q = spec.objectives.tpot.quantile
            # In a window replicas joined, TTFT shows the router's flood onto them, not the engine.
            ttft = None if feedback.replicas_joined(state, obs) else obs.ttft.p90
            model = state.model.learn(
                rate, mix, obs.batch_limit, ttft, signals.tpot_p90(obs), q=q, min_weight=cfg.learning_rate
            )
            # The stay against the model as this window left it: a ratio taken against a model
            # still moving (a prior learning the engine's speed) would carry its old error along.
            # The p90 ratios likewise move to the new model (``Calibration.rebased``).
            before = state.model.predict(_IDLE_RATE, window_mix or mix, obs.batch_limit, q)
            after = model.predict(_IDLE_RATE, window_mix or mix, obs.batch_limit, q)
            calibration = state.calibration.rebased(
                moved(before.ttft_p90, after.ttft_p90), moved(before.tpot_p90, after.tpot_p90)
            )
            stay = model.predict(rate, window_mix or mix, obs.batch_limit, q).stay_s
            stay_ratio = backlog.stay_ratio(obs, stay, state.stay_ratio)
            state = replace(state, model=model, stay_ratio=stay_ratio, calibration=calibration)
        return state

    def _check_model(
        self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, calibration: Calibration
    ) -> Calibration:
        """This window's p90s against the model as it stood before, at the window's rate and mix on
        the fleet that served it. A miss counts only if the fleet was sized for the window: no more
        arrived than the load sized for now, at a rate the sizing meets (``calibration``). TPOT once
        the longest answers were decoded wholly on this fleet (``signals.decode_life``, the README)."""
        since = state.ready_since
        partial = obs.replicas_reporting != obs.replicas.ready or obs.replicas.draining
        if state.mix is None or self._warming_up(state, obs) or not obs.request_rate or partial:
            return calibration
        if since is None or since[0] != obs.replicas.ready or obs.at - since[1] < obs.window:
            return calibration  # replicas joined or left within the window: another fleet served it
        # The window's own mix: what the load and its mix missed is the load ratio's to measure.
        mix = signals.request_mix(obs) or state.mix
        rate = obs.request_rate / obs.replicas_reporting
        before = state.model.predict(rate, mix, obs.batch_limit, spec.objectives.tpot.quantile)
        sized = not calibration.load.missed(obs.at) and self._meets(rate, state, spec)
        # A prediction inside the p90's bucket is as right as the buckets tell (``p90_seen_by``).
        decoded = obs.at - since[1] >= signals.decode_life(obs, state.mix)
        tpot = signals.tpot_quantiles(obs).p90_seen_by(before.tpot_p90) if decoded else None
        ttft = obs.ttft.p90_seen_by(before.ttft_p90)
        return calibration.model_checked(before.ttft_p90, before.tpot_p90, ttft, tpot, sized=sized)

    def _clean(
        self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, arrival: float | None
    ) -> bool:
        """Whether this window shows the engine as the model describes it: whole, settled, unlimited."""
        if self._warming_up(state, obs) or not obs.request_rate or obs.replicas.draining:
            return False
        if obs.replicas_reporting != obs.replicas.ready or (obs.preemption_rate or 0.0) > 0:
            return False  # partial picture, or KV recompute the step model leaves out
        if arrival is None or abs(arrival - obs.request_rate) > _STATIONARY * obs.request_rate:
            return False  # requests pile up or drain: a transient, not the steady state the model is
        running = signals.running_per_replica(obs)
        limit = obs.batch_limit or spec.batch_limit.max
        return running is not None and running < _LIMIT_ROOM * limit

    # --- planning ---------------------------------------------------------------------------

    def _plan(self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec) -> Plan:
        cfg = self.config
        current = obs.replicas.provisioned
        if self._warming_up(state, obs):
            return feedback.without_model(obs, state, spec, cfg.breach_band, "first window filling")
        # The completion rate (a one-minute average), not ``signals.arrival_rate``: its 15-second
        # growth cost 1-31 % more replica-hours on 9 of 10 workloads for two windows on the ramp
        # and one after the step; a queue building reaches the sizing as the instant load below.
        arrival = obs.request_rate
        if state.mix is None or arrival is None:
            why = "no request mix (token rates) to size by yet"
            return feedback.without_model(obs, state, spec, cfg.breach_band, why)
        if not self._meets(_IDLE_RATE, state, spec):
            # Neither target is within the model's reach on an idle replica (one alone is relaxed
            # and the other sized for, ``_targets``): the model (a prior far from this engine) or
            # the targets are wrong, and sizing by it would buy the maximum.
            why = f"model cannot meet the targets at any size [{state.model.describe()}]"
            return feedback.without_model(obs, state, spec, cfg.breach_band, why)
        horizon = spec.replicas.cold_start + cfg.interval
        per_request = state.mix.tokens_per_request
        ahead = state.forecast.ahead(
            horizon, arrival * per_request, obs.at - cfg.trend_window_s, damping=cfg.trend_damping,
            max_growth=cfg.max_forecast_growth, confidence=cfg.trend_confidence,
        )  # fmt: skip
        expected = max(arrival, ahead / per_request)
        # The backlog (``backlog``: requests held beyond what the arrivals keep there at this
        # window's mix) spread over ``backlog_drain_s``: a one-off amount to drain, not a rate;
        # sized as one it buys a fleet for a queue gone by the time the replicas are ready.
        queueing = (obs.waiting or 0.0) > _QUEUE_SHARE * (obs.running or 0.0)
        drain_s = max(cfg.backlog_drain_s, cfg.interval)
        instant = arrival + backlog.backlog(obs, arrival, self._stay(obs, state, spec)) / drain_s
        load = max(expected, instant)
        covered_load = self._cover(load, per_request, state)
        need, prediction = self._cheapest(covered_load, state, spec)
        held, arriving = None, load
        if instant > expected:  # a queue stays on the replicas holding it (``backlog.useful``)
            arriving = max(expected, (state.forecast.peak(obs.at - obs.window) or 0.0) / per_request)
            covered = self._cover(arriving, per_request, state)
            carry = self._cheapest(covered, state, spec)[0]
            need, held = backlog.useful(need, carry, obs.replicas.ready)
            prediction = prediction if held is None else self._at(covered / carry, state, spec)
        # A load the smallest fleet carries anyway decides nothing, and is not checked: held through
        # a lull, a fleet would learn x2,000 from its ~0 forecasts when the traffic comes back (31
        # -> 96 replicas). Nor one sized while the windows overlap a lull (``quiet_at``): they count
        # less than arrives as it comes back, read misses of up to x4 (on 8 min / off 4: 30.1 ->
        # 24.9 replica-h). Its trend is left alone: what follows a gap is often a burst above the
        # level before it (without the rise extrapolated the Azure code traces lost windows).
        refilling = state.quiet_at is not None and obs.at < state.quiet_at + obs.window + cfg.interval
        checked = load * per_request if need > max(spec.replicas.min, 1) and not refilling else None
        need = max(need, kv_floor(obs, arrival, load if held is None else arriving, cfg.kv_usage_limit))
        prediction_for = need
        if need < current:
            # Shrinking is sized for the busiest arrival rate of the last few minutes and a dead
            # band below the scale-up size: one quiet minute between two busy ones must not shed a
            # replica that the next minute asks back. The peak takes the margin of every level, not
            # its own: the peak of a cold start times the margin of all the checks is load-bearing
            # (about the q0.99 of the next cold start's peak, `docs/policy-log.md` stop 50), and the
            # peak's own level, the top of the checks, reads the lowest ratios (stop 54: on all 175
            # workloads 60 -> 51 at >= 0.99 and flaps 159 -> 236 with it, 56 and 142 without).
            peak = max(load, (state.forecast.peak(obs.at - self._memory(spec)) or 0.0) / per_request)
            need, prediction = self._cheapest(
                peak * self._margins(state)[0] / (1 - cfg.hysteresis), state, spec
            )
            need = min(current, max(need, kv_floor(obs, arrival, peak, cfg.kv_usage_limit)))
            prediction_for = need
            if need > current * (1 - cfg.min_scale_down):
                need = current
        if (
            current < need
            and not queueing
            and self._just_shrank(state, obs.at)
            and self._meets(load / current, state, spec)
        ):
            # Right after shedding, hold while today's fleet still meets both targets at the
            # forecast load (the headroom is what this dead band spends): a forecast a notch
            # higher is noise, not a reason to ask back what was just given away.
            need = current
        if need != prediction_for:
            prediction = self._at(covered_load / max(need, 1), state, spec)
        sizing = Sizing(need, current, arrival, expected, instant, prediction, per_request, held)
        reason, message = sizing.why()
        relaxed = self._targets(state, spec)[2]
        if relaxed is not None:
            message = f"{message} ({relaxed})"
        if state.model.prior is CONSERVATIVE_PRIOR or state.model.windows == 0:
            message = f"{message} [{state.model.describe()}]"
        message = f"{message}; {state.calibration.describe(*self._calibration_args(), load * per_request)}"
        plan = Plan(need, reason, message)
        plan = feedback.corrected(
            plan, obs, state, spec, cfg.breach_band, held_to=self._held_to(state, spec),
            level=instant <= arrival and expected <= arrival,
        )  # fmt: skip
        return replace(plan, tokens=checked)

    def _stay(self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec) -> float:
        """Seconds a request stays in the fleet as it serves now: the model's, at the ready
        replicas' share of the completion rate and this window's mix, times the learned ratio."""
        assert state.mix is not None
        serving = max(obs.replicas.ready, obs.replicas_reporting, 1)
        mix = signals.request_mix(obs) or state.mix
        rate = (obs.request_rate or 0.0) / serving
        predicted = state.model.predict(rate, mix, obs.batch_limit, spec.objectives.tpot.quantile)
        return predicted.stay_s * (state.stay_ratio or 1.0)

    def _cheapest(self, load: float, state: FleetSLOState, spec: FleetSLOSpec) -> tuple[int, Prediction]:
        """The fewest replicas whose predicted p90s meet both targets at ``load``, and the prediction."""

        def at(n: int) -> Prediction:
            return self._at(load / n, state, spec)

        # Searched past the maximum, so the clamp (with its own reason) is what caps the answer.
        return smallest(lambda n: self._meets(load / n, state, spec), at, 2 * max(spec.replicas.max, 1))

    @staticmethod
    def _at(rate: float, state: FleetSLOState, spec: FleetSLOSpec) -> Prediction:
        """The model's p90s for one replica at ``rate`` requests/s, the batch limit at its maximum."""
        assert state.mix is not None
        return state.model.predict(rate, state.mix, spec.batch_limit.max, spec.objectives.tpot.quantile)

    def _meets(self, rate: float, state: FleetSLOState, spec: FleetSLOSpec) -> bool:
        """Whether one replica at ``rate`` meets both targets with the measured margins (a target
        an idle replica misses or nearly misses relaxed, see ``_targets``)."""
        ttft, tpot, _ = self._targets(state, spec)
        assert state.mix is not None
        q, top = spec.objectives.tpot.quantile, spec.batch_limit.max
        return state.model.meets(rate, state.mix, top, q, ttft=ttft, tpot=tpot)

    def _targets(self, state: FleetSLOState, spec: FleetSLOSpec) -> tuple[float, float, str | None]:
        """The p90 TTFT and TPOT the sizing holds a replica to: the targets over the measured
        margins, one an idle replica misses or nearly misses relaxed (``sizing.reachable``), and why."""
        o = spec.objectives
        key = (state.model, state.mix, state.calibration, o.ttft.threshold, o.tpot.threshold)
        if self._targets_memo is None or self._targets_memo[0] != key:
            _, ttft_margin, tpot_margin = self._margins(state)
            ttft, tpot = o.ttft.threshold / ttft_margin, o.tpot.threshold / tpot_margin
            idle = self._at(_IDLE_RATE, state, spec)
            self._targets_memo = (key, reachable(idle, ttft, tpot, 1 + self.config.headroom))
        return self._targets_memo[1]

    def _memory(self, spec: FleetSLOSpec) -> float:
        """Seconds of peak load a scale-down keeps: by default one cold start and a decision (a
        replica shed now is back no sooner; a burst that returns within it finds it still there)."""
        memory = self.config.scale_down_memory_s
        return spec.replicas.cold_start + self.config.interval if memory is None else memory

    def _calibration_args(self) -> tuple[float, float, float]:
        return self.config.calibration_quantile, self.config.headroom, self.config.calibration_prior_weight

    def _cover(self, rate: float, per_request: float, state: FleetSLOState) -> float:
        """``rate`` (requests/s) times the load margin measured at its level (``LoadChecks.upper``):
        a burst is not sized for what a lull's forecasts missed by on top of itself."""
        return rate * self._margins(state, rate * per_request)[0]

    def _margins(self, state: FleetSLOState, at: float | None = None) -> tuple[float, float, float]:
        """The calibration's margins; the load's for a load of ``at`` tokens/s."""
        return state.calibration.margins(*self._calibration_args(), at)

    def _held_to(self, state: FleetSLOState, spec: FleetSLOSpec) -> tuple[float, float] | None:
        """The p90s (as observed: the margins put back) the sizing holds targets to, where relaxed."""
        ttft, tpot, relaxed = self._targets(state, spec)
        margins = None if relaxed is None else self._margins(state)  # read only where one is relaxed
        return None if margins is None else (ttft * margins[1], tpot * margins[2])

    def _just_shrank(self, state: FleetSLOState, now: float) -> bool:
        """A scale-down happened within the scale-down stabilization window."""
        return state.chain.shrank_since(now - self.config.behavior.scale_down.stabilization_s)

    @staticmethod
    def _warming_up(state: FleetSLOState, obs: Observation) -> bool:
        return state.first_seen is None or obs.at - state.first_seen < obs.window
