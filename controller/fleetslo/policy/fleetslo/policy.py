"""``fleetslo``: hold p90 TTFT and p90 TPOT under their targets at the lowest replica count.

Two knobs on two time scales. The **batch limit** (the gate's cap on sequences per replica) acts in
seconds: it keeps each replica at the concurrency where p90 TPOT meets its target, so overload turns
into queueing — which spends the TTFT budget, usually far looser than TPOT's — instead of slowing
every stream. **Replicas** act in minutes: the fleet is sized feed-forward for the arrival rate
forecast one cold start ahead (linear trend), divided by the requests per second one replica
carries within the TPOT target: a learned latency model gives the tokens per second per replica
at the target (1/TPOT falls linearly with the tokens an engine processes; ``latency_model``), the
current request mix converts tokens to requests, and a margin and headroom are kept below it. The
instant load (running + waiting, by Little's law) overrides the forecast when a spike outruns it.
Feedback corrects the model when the observed p90s breach their targets anyway.

Safety: missing, stale or contradictory data holds, with a reason, and never scales down; a partial
picture may scale up but not down; a scale-down must leave the survivors' load and p90 TTFT inside
the targets with margin; limits are the shared chain clamp → rate limit → stabilization → cooldown.

Pure: everything comes in as arguments and goes out in the returned decision and state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import BatchActuator, FleetSLOSpec
from fleetslo.policy.fleetslo import signals
from fleetslo.policy.fleetslo.config import FleetSLOConfig
from fleetslo.policy.fleetslo.sizing import Sizing
from fleetslo.policy.fleetslo.state import FleetSLOState
from fleetslo.policy.stages import Step, clamp, cooldown, rate_limit, stabilize

#: The running batch fluctuates around its mean; the gate's limit leaves it this much room above
#: the mean concurrency the model allows, so the limit bites only under real overload.
_BURST_ROOM = 1.5
#: The instant load overrides the forecast only once requests queue: waiting above this share of
#: the running ones (below it, ``running`` alone is scrape-to-scrape noise, not a spike).
_QUEUE_SHARE = 0.1
#: How fast the sizing capacity follows the latency model, per decision.
_CAPACITY_SMOOTHING = 0.1
#: How fast the request mix (tokens per request) follows each window, per decision: a one-minute
#: window of a real trace swings ±30 % in tokens per request, and capacity in requests follows it.
_MIX_SMOOTHING = 0.05


@dataclass(frozen=True, slots=True)
class _Plan:
    replicas: int
    reason: Reason
    message: str
    per_replica: float | None = None  # concurrency per replica the plan expects


class FleetSLOPolicy:
    """The fleetslo two-knob policy (``--policy fleetslo``)."""

    name = "fleetslo"

    def __init__(self, config: FleetSLOConfig | None = None) -> None:
        self.config = config or FleetSLOConfig()
        self.interval = self.config.interval

    def initial_state(self, spec: FleetSLOSpec) -> FleetSLOState:
        return FleetSLOState()

    def decide(
        self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, now: float
    ) -> tuple[Decision, FleetSLOState]:
        current = obs.replicas.provisioned
        if current == 0:
            floor = max(spec.replicas.min, 1)
            return Decision(
                floor, obs.batch_limit, Reason.CLAMPED_MIN, f"no replica at all: start {floor}"
            ), state
        problem = signals.data_problem(obs, self.config.stale_after_s)
        if problem is not None:
            reason, why = problem
            return Decision(current, obs.batch_limit, reason, f"hold at {current}: {why}"), state
        state = self._learn(obs, state, spec, now)
        plan = self._plan(obs, state, spec)
        step, state = self._limit(plan, obs, state, spec, now)
        return self._decision(step, plan, obs, state, spec), state

    # --- learning ---------------------------------------------------------------------------

    def _learn(self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, now: float) -> FleetSLOState:
        cfg = self.config
        per_replica = signals.tokens_per_replica(obs)
        tpot = signals.tpot_p90(obs)
        model = state.model
        if per_replica and tpot is not None:
            pressure = signals.pressure(obs, spec)
            met = pressure is not None and pressure <= 1.0
            model = model.observe(
                now, per_replica, tpot, keep=cfg.model_points, memory_s=cfg.model_memory_s, met=met
            )
        first_seen = now if state.first_seen is None else state.first_seen
        arrival = signals.arrival_rate(obs, state.last_waiting, now)
        forecast = state.forecast
        if arrival is not None and now - first_seen >= obs.window:
            # A window that began before the first data under-counts: keep it out of the trend.
            forecast = forecast.update(now, arrival, max(cfg.trend_window_s, cfg.scale_down_memory_s))
        learned = replace(state, model=model)
        return replace(
            state,
            first_seen=first_seen,
            capacity=self._smoothed_capacity(obs, learned, spec),
            model=model,
            forecast=forecast,
            service_time=signals.service_time(obs, state.service_time),
            tokens_per_request=signals.smooth(
                signals.tokens_per_request(obs), state.tokens_per_request, _MIX_SMOOTHING
            ),
            last_waiting=(now, obs.waiting) if obs.waiting is not None else state.last_waiting,
            correction=self._correction(obs, state, spec, per_replica),
        )

    def _correction(
        self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, per_replica: float | None
    ) -> float:
        """Shrink capacity when p90 TPOT breaches while the model said the load was safe."""
        tpot, target = signals.tpot_p90(obs), spec.objectives.tpot.threshold
        capacity = self._capacity(state, spec, self.config.tpot_margin, correction=1.0)
        if tpot is None or per_replica is None or capacity is None:
            return state.correction
        if tpot > target * self.config.breach_band and per_replica <= capacity * state.correction:
            return max(0.5, state.correction * 0.95)
        if tpot < target * self.config.tpot_margin:
            return min(1.0, state.correction * 1.02)
        return state.correction

    # --- planning ---------------------------------------------------------------------------

    def _plan(self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec) -> _Plan:
        cfg = self.config
        current = obs.replicas.provisioned
        if self._warming_up(state, obs):
            return self._feedback_plan(obs, spec, "first window filling")
        if state.tokens_per_request is None and signals.tokens_rate(obs) is None:
            # The latency model's load axis is tokens: without the prompt and generation token
            # counters there is no capacity to size by, only feedback.
            return self._feedback_plan(obs, spec, "no prompt/generation token rates to size by")
        capacity = self._request_capacity(state)
        arrival = signals.arrival_rate(obs, state.last_waiting, obs.at)
        if capacity is None or capacity <= 0 or arrival is None or state.service_time is None:
            return self._feedback_plan(obs, spec, "learning the latency model")
        per_replica = capacity * (1 - cfg.headroom)
        horizon = spec.replicas.cold_start + cfg.interval
        expected = state.forecast.ahead(
            horizon, arrival, obs.at - cfg.trend_window_s, cfg.trend_damping, cfg.max_forecast_growth
        )
        # Once requests queue, the running ones as the rate that keeps them there (Little's law)
        # plus the backlog spread over ``backlog_drain_s``: a spike shows here within seconds, long
        # before it fills a one-minute rate. The backlog is a one-off amount to drain, not a
        # rate: sizing it as one (backlog / service time) buys a fleet for a queue that is gone
        # by the time the replicas are ready.
        queueing = (obs.waiting or 0.0) > _QUEUE_SHARE * (obs.running or 0.0)
        drain_s = max(cfg.backlog_drain_s, cfg.interval)
        instant = (obs.running or 0.0) / state.service_time + (obs.waiting or 0.0) / drain_s
        instant = instant * signals.reporting_scale(obs) if queueing else 0.0
        load = max(expected, instant)
        need = max(1, math.ceil(load / per_replica)) if load > 0 else spec.replicas.min
        forecast_load, instant_load = expected, instant
        sizing = Sizing(
            need, current, expected, arrival, forecast_load, instant_load, per_replica,
            state.tokens_per_request or 0.0,
        )  # fmt: skip
        if need < current:
            # Shrinking is sized against a lower capacity than growing (the dead band) and for the
            # busiest arrival rate of the last few minutes, not the latest one: one quiet minute
            # between two busy ones must not shed a replica that the next minute asks back.
            peak = max(load, state.forecast.peak(obs.at - cfg.scale_down_memory_s) or 0.0)
            need = min(current, max(1, math.ceil(peak / (per_replica * (1 - cfg.hysteresis)))))
            if need > current * (1 - cfg.min_scale_down):
                need = current
            sizing = replace(sizing, need=need)
        # The dead band on the way up: right after shedding replicas, a forecast a notch higher
        # is noise, not a reason to ask back what was just given away.
        small = need <= math.ceil(current * (1 + cfg.hysteresis))
        if current < need and small and not queueing and self._just_shrank(state, obs.at):
            need = current
            sizing = replace(sizing, need=need)
        plan = _Plan(need, *sizing.why(), per_replica)
        plan = self._ttft_feedback(plan, obs, spec)
        if plan.replicas < current:
            plan = self._safe_scale_down(plan, obs, state, spec, load)
        return plan

    @staticmethod
    def _request_capacity(state: FleetSLOState) -> float | None:
        """Requests/s per replica at the sizing margin: the capacity in tokens/s over the current mix."""
        if state.capacity is None or not state.tokens_per_request:
            return None
        return state.capacity * state.correction / state.tokens_per_request

    def _smoothed_capacity(self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec) -> float | None:
        """Capacity follows the model slowly, except downwards while a p90 breaches its target.

        ``None`` until the model has a real fit: sizing on the proportional fallback alone would
        grow a healthy fleet for no reason, so until then only a breach moves it (feedback).
        """
        if state.model.fitted() is None:
            return state.capacity
        raw = self._capacity(state, spec, self.config.tpot_margin, 1.0)
        if raw is None or state.capacity is None:
            return raw
        pressure = signals.pressure(obs, spec)
        if raw < state.capacity and pressure is not None and pressure > self.config.breach_band:
            return raw
        return signals.smooth(raw, state.capacity, _CAPACITY_SMOOTHING)

    def _capacity(
        self, state: FleetSLOState, spec: FleetSLOSpec, share: float, correction: float
    ) -> float | None:
        """``share`` of the tokens/s per replica at which p90 TPOT is predicted to reach its target.

        A share of the *load*, not of the TPOT target: TPOT never falls below the step's fixed
        cost, so with a tight target (40 ms over a 25 ms floor) 85 % of the target would leave
        only two thirds of the load, where 85 % of the load is the same margin at any target.
        """
        raw = state.model.capacity(spec.objectives.tpot.threshold, self.config.max_extrapolation, share)
        return None if raw is None else raw * correction

    def _just_shrank(self, state: FleetSLOState, now: float) -> bool:
        """A scale-down happened within the scale-down stabilization window."""
        window = self.config.behavior.scale_down.stabilization_s
        return any(change < 0 and t > now - window for t, change in state.events)

    @staticmethod
    def _warming_up(state: FleetSLOState, obs: Observation) -> bool:
        return state.first_seen is None or obs.at - state.first_seen < obs.window

    def _feedback_plan(self, obs: Observation, spec: FleetSLOSpec, why: str) -> _Plan:
        """Without a model yet: scale up in proportion to the worst breach, otherwise hold."""
        current = obs.replicas.provisioned
        pressure = signals.pressure(obs, spec)
        if pressure is not None and pressure > self.config.breach_band:
            need = max(current, math.ceil(obs.replicas.ready * min(pressure, 2.0)))
            return _Plan(need, Reason.SCALE_UP_SLO_BREACH, f"{why}; p90 at {pressure:.2f}x target: {need}")
        return _Plan(current, Reason.STEADY, f"{why}; targets met: hold at {current}")

    def _ttft_feedback(self, plan: _Plan, obs: Observation, spec: FleetSLOSpec) -> _Plan:
        """A p90 above target although the sizing says enough: add replicas in proportion.

        In proportion to the *ready* replicas, with the starting ones credited: the breach lasts
        through their cold start, and multiplying again every decision until they serve would
        compound one breach into a fleet many times too large.
        """
        current = obs.replicas.provisioned
        pressure = signals.pressure(obs, spec)
        if pressure is None or pressure <= self.config.breach_band or plan.replicas > current:
            return plan
        need = math.ceil(obs.replicas.ready * min(pressure, 2.0))
        if need <= current:
            return plan
        message = f"p90 at {pressure:.2f}x its target although sized for it: {current} -> {need}"
        return _Plan(need, Reason.SCALE_UP_SLO_BREACH, message, plan.per_replica)

    def _safe_scale_down(
        self, plan: _Plan, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, load: float
    ) -> _Plan:
        """The smallest count between the plan and now whose survivors stay inside the band."""
        current = obs.replicas.provisioned
        for n in range(plan.replicas, current):
            if self._survivors_ok(n, obs, state, spec, load):
                return replace(plan, replicas=n)
        return _Plan(current, Reason.STEADY, f"{plan.message}; but survivors would breach the band: hold")

    def _survivors_ok(
        self, n: int, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, load: float
    ) -> bool:
        band = self.config.scale_down_band
        current = max(obs.replicas.ready, 1)
        if not state.tokens_per_request:
            return False
        allowed = state.model.capacity(spec.objectives.tpot.threshold, self.config.max_extrapolation, band)
        if allowed is None or load * state.tokens_per_request / n > allowed:
            return False
        # TTFT has no model: scale the observed p90 with the load each survivor takes on (N/(N-1)).
        ttft = obs.ttft.p90
        return ttft is None or ttft * current / n <= spec.objectives.ttft.threshold * band

    # --- limits and the decision ------------------------------------------------------------

    def _limit(
        self, plan: _Plan, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, now: float
    ) -> tuple[Step, FleetSLOState]:
        cfg, current = self.config, obs.replicas.provisioned
        clamped = clamp(plan.replicas, spec.replicas.min, spec.replicas.max)
        limited = rate_limit(clamped[0], current, state.events, cfg.behavior, now)
        stabilized, history = stabilize(limited[0], current, state.recommendations, cfg.behavior, now)
        cooled = cooldown(stabilized[0], current, state.last_change_at, cfg.cooldown_s, now)
        step: Step = (plan.replicas, plan.reason, plan.message)
        for stage in (clamped, limited, stabilized, cooled):
            if stage[1] is not Reason.STEADY:
                step = (stage[0], stage[1], f"{step[2]}; {stage[2]}")
            else:
                step = (stage[0], step[1], step[2])
        if step[0] < current and obs.replicas_reporting < obs.replicas.ready:
            missing = obs.replicas.ready - obs.replicas_reporting
            step = (
                current,
                Reason.HOLD_PARTIAL_DATA,
                f"{missing} ready replicas not reporting: no scale-down",
            )
        return step, self._record(step[0], current, history, state, now)

    def _record(
        self,
        value: int,
        current: int,
        history: tuple[tuple[float, int], ...],
        state: FleetSLOState,
        now: float,
    ) -> FleetSLOState:
        behavior = self.config.behavior
        # Kept for the longest rate-limit period and for the scale-down window (``_just_shrank``).
        longest = max(
            behavior.scale_down.stabilization_s,
            *(p.period_s for p in (*behavior.scale_up.policies, *behavior.scale_down.policies)),
        )
        events = tuple((t, c) for t, c in state.events if t > now - longest)
        if value == current:
            return replace(state, recommendations=history, events=events)
        return replace(
            state, recommendations=history, events=(*events, (now, value - current)), last_change_at=now
        )

    def _decision(
        self, step: Step, plan: _Plan, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec
    ) -> Decision:
        replicas, reason, message = step
        limit = self._batch_limit(obs, state, spec)
        if replicas == obs.replicas.provisioned and limit is not None and limit != obs.batch_limit:
            reason = (
                Reason.BATCH_LIMIT_TIGHTENED
                if obs.batch_limit is None or limit < obs.batch_limit
                else Reason.BATCH_LIMIT_RELAXED
            )
            message = f"{message}; batch limit {obs.batch_limit} -> {limit}"
        tokens = signals.tokens_rate(obs) or 0.0
        predicted_tpot = state.model.tpot_at(tokens / max(replicas, 1)) if tokens > 0 else None
        if predicted_tpot is not None and not math.isfinite(predicted_tpot):
            predicted_tpot = None  # past saturation: no finite prediction to report
        return Decision(
            replicas=replicas,
            batch_limit=limit if limit is not None else obs.batch_limit,
            reason=reason,
            message=f"fleetslo: {message}",
            predicted_ttft_p90=signals.predicted_ttft(obs, replicas),
            predicted_tpot_p90=predicted_tpot,
        )

    def _batch_limit(self, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec) -> int | None:
        """Per-replica sequences at which p90 TPOT is predicted at its share of the target."""
        if spec.batch_limit.actuator == BatchActuator.NONE or self._warming_up(state, obs):
            return None
        # The fitted line alone: no sizing correction, no evidence cap, no fallback. The limit
        # protects TPOT under overload; set too low (a cap learned at light load, a proportional
        # guess) it only trades a TPOT breach for queueing — a TTFT breach — and makes the fleet
        # look busier than it is. Without a fit the current limit stays.
        tokens = state.model.load_at(spec.objectives.tpot.threshold)
        if state.model.fitted() is None or tokens is None:
            return None
        if state.service_time is None or not state.tokens_per_request:
            return None
        # Sequences per replica = completions per replica × time in the batch (Little's law), with
        # room for the batch's swings around that mean.
        sequences = tokens / state.tokens_per_request * state.service_time * _BURST_ROOM
        # Never below what the fleet runs now while it meets TPOT: evidence beats the model.
        tpot = signals.tpot_p90(obs)
        if tpot is not None and tpot <= spec.objectives.tpot.threshold:
            sequences = max(sequences, signals.running_per_replica(obs) or 0.0)
        return min(max(math.ceil(sequences), spec.batch_limit.min), spec.batch_limit.max)
