"""The tunables of the ``fleetslo`` policy, each with its unit and why it has its default.

Margins and headroom are the explicit headroom-versus-violation trade: no policy without foresight
can absorb a sudden step in traffic during a cold start unless it keeps spare capacity, so how much
to keep is the operator's call, not a constant buried in code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetslo.policy.fleetslo.physics import StepCost
from fleetslo.policy.stages import Behavior, RatePolicy, ScalingRules


def _behavior() -> Behavior:
    # Up: as fast as the HPA default (the cold start is the real brake). Down: one replica or 50 %
    # per minute after a 5-minute stabilization window, so a dip does not shed capacity a minute
    # before the traffic returns, yet a decline is followed within minutes (every idle
    # replica-minute is paid for; the survivors check guards each step).
    return Behavior(
        scale_up=ScalingRules(0.0, (RatePolicy("Pods", 4, 15.0), RatePolicy("Percent", 100, 15.0))),
        scale_down=ScalingRules(300.0, (RatePolicy("Pods", 1, 60.0), RatePolicy("Percent", 50, 60.0))),
    )


@dataclass(frozen=True, slots=True)
class FleetSLOConfig:
    #: Seconds between two decisions.
    interval: float = 15.0
    #: The step costs of one replica (an engine profile's, turned into ``StepCost`` by the caller);
    #: ``None``: ``physics.CONSERVATIVE_PRIOR``, learned from the fleet, and the reason says so.
    step_cost: StepCost | None = None
    #: Spare capacity before the fleet's own forecast errors are known: the prior of the load
    #: margin (``calibration``), which then becomes the upper quantile of what the forecast
    #: missed one cold start later. 0.3: on the Azure conversation trace x15 (5-minute cold
    #: start) a fixed 0.1 met 91.5 % of windows at 31.3 replica-h, 0.3 met 98.3 % at 36.2.
    headroom: float = 0.30
    #: The upper quantile of the checked prediction ratios the sizing covers
    #: (``calibration.ErrorRatios.upper``): the load the forecast missed one cold start later and
    #: the p90s the model under-predicted. ``headroom`` (load) and 1 (p90s) are their prior until
    #: the fleet's own errors are known.
    calibration_quantile: float = 0.9
    #: How many checked predictions the priors are worth: about five minutes of decisions.
    calibration_prior_weight: float = 20.0
    #: Dead band: scale down only to a count that meets the targets at the load / (1 − hysteresis),
    #: so load sitting at a threshold does not flip the count back and forth.
    hysteresis: float = 0.10
    #: Observed p90 above this share of its target counts as a breach (feedback acts). A hair
    #: above 1: a p90 1.0003x its target read off histogram buckets is interpolation.
    breach_band: float = 1.02
    #: A queue that built up is sized to drain within this many seconds (after the new replicas
    #: are ready): shorter drains the backlog sooner with a larger, briefer overshoot.
    backlog_drain_s: float = 60.0
    #: A scale-down is sized for the busiest arrival rate of this many recent seconds: bursty
    #: traffic (on/off within minutes) must not shed between bursts what the next burst needs.
    #: ``None``: one cold start plus a decision interval, from the spec.
    scale_down_memory_s: float | None = None
    #: Scale down only to free at least this share of the fleet: trimming one replica off a
    #: fleet sized at the margin is the step most often asked back minutes later.
    min_scale_down: float = 0.05
    #: Data older than this many seconds is stale: hold.
    stale_after_s: float = 120.0
    #: The arrival trend is fitted over this many seconds of observed rates.
    trend_window_s: float = 300.0
    #: Share of the fitted trend extrapolated over the horizon (1 = all of it).
    trend_damping: float = 1.0
    #: The trend extrapolated is the fitted slope less this many standard errors: one-minute
    #: rates of real traffic swing ±20 %, and a slope fitted to that noise, extrapolated over a
    #: cold start, buys replicas for a ramp that is not there.
    trend_confidence: float = 2.0
    #: Cap on how far the trend may extrapolate: at most this multiple of the current rate.
    max_forecast_growth: float = 1.5
    #: Weight of each window in the smoothed request mix: a one-minute window of a real trace
    #: swings ±30 % in tokens per request.
    mix_smoothing: float = 0.1
    #: The TTFT bias moves this share towards each clean window (the step-cost parameters have
    #: their own, uncertainty-weighted gain). TTFT follows the minute's mix closely: on the
    #: Azure conversation trace 0.3 put 85 % of the next windows' p90s within 20 %, 0.03 72 %.
    learning_rate: float = 0.3
    #: Arrivals are completions plus the growth of the requests held. The growth is taken since
    #: the last decision (a queue building shows at once), except where the fleet drained more
    #: than this share of the window's completions over the window: the window's completions still
    #: hold that drain, so the growth is taken over the window too (``signals.arrival_rate``). A
    #: tenth: a steady fleet's count held moves less than that in a minute; a spike's backlog
    #: drained by new replicas is a third of it (drawn 94: 4,000 of 13,350).
    drain_share: float = 0.1
    #: KV cache use per replica the sizing stays under (KV tokens grow with the load per replica;
    #: past a full cache vLLM preempts and recomputes, which the step model does not describe).
    kv_usage_limit: float = 0.9
    #: Cooldown after any change before a scale-down (seconds).
    cooldown_s: float = 60.0
    behavior: Behavior = field(default_factory=_behavior)

    def __post_init__(self) -> None:
        checks = (
            ("interval", self.interval > 0, "> 0"),
            ("drain_share", self.drain_share >= 0, ">= 0"),
            ("headroom", 0 <= self.headroom < 1, "in [0, 1)"),
            ("calibration_quantile", 0 < self.calibration_quantile < 1, "in (0, 1)"),
            ("calibration_prior_weight", self.calibration_prior_weight > 0, "> 0"),
            ("hysteresis", 0 <= self.hysteresis < 1, "in [0, 1)"),
            ("breach_band", self.breach_band >= 1, ">= 1"),
            ("backlog_drain_s", self.backlog_drain_s > 0, "> 0"),
            ("scale_down_memory_s", (self.scale_down_memory_s or 0.0) >= 0, ">= 0 or None"),
            ("min_scale_down", 0 <= self.min_scale_down < 1, "in [0, 1)"),
            ("stale_after_s", self.stale_after_s > 0, "> 0"),
            ("trend_window_s", self.trend_window_s > 0, "> 0"),
            ("trend_damping", self.trend_damping >= 0, ">= 0"),
            ("trend_confidence", self.trend_confidence >= 0, ">= 0"),
            ("max_forecast_growth", self.max_forecast_growth >= 1, ">= 1"),
            ("mix_smoothing", 0 < self.mix_smoothing <= 1, "in (0, 1]"),
            ("learning_rate", 0 < self.learning_rate <= 1, "in (0, 1]"),
            ("kv_usage_limit", 0 < self.kv_usage_limit <= 1, "in (0, 1]"),
            ("cooldown_s", self.cooldown_s >= 0, ">= 0"),
        )
        for name, ok, allowed in checks:
            if not ok:
                raise ValueError(f"{name} must be {allowed}, got {getattr(self, name)!r}")
        if self.step_cost is not None and not isinstance(self.step_cost, StepCost):
            raise ValueError(f"step_cost must be a StepCost, got {type(self.step_cost).__name__}")
