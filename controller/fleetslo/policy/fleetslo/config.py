"""The tunables of the ``fleetslo`` policy, each with its unit and why it has its default.

Margins and headroom are the explicit headroom-versus-violation trade: no policy without foresight
can absorb a sudden step in traffic during a cold start unless it keeps spare capacity, so how much
to keep is the operator's call, not a constant buried in code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    #: Size the fleet at this share of the load (tokens/s per replica) at which p90 TPOT is
    #: predicted to reach its target. A share of the load, not of the target: it is the same
    #: margin whether the target is loose or close to the step's fixed cost.
    tpot_margin: float = 0.82
    #: Spare capacity kept above the forecast, as a share of per-replica capacity (0.1 = 10 %).
    #: The main cost-versus-attainment knob: on the Azure conversation trace with a 5-minute cold
    #: start, 0.05 met 98.3 % of minutes, 0.1 met 100 % at +5 % replica-hours, 0.3 at +37 %
    #: (benchmarks/bench_policy.py prints the sweep).
    headroom: float = 0.10
    #: A scale-down must leave the survivors under this share of the load at which p90 TPOT
    #: reaches its target, and their p90 TTFT (scaled by N/(N-1)) under this share of its target.
    scale_down_band: float = 0.80
    #: Dead band: scale down only to a count sized at this share below the scale-up capacity, so
    #: load sitting at a threshold does not flip the count back and forth.
    hysteresis: float = 0.10
    #: Observed p90 above this share of its target counts as a breach (feedback acts). A hair
    #: above 1: a p90 1.0003x its target read off histogram buckets is interpolation, and adding
    #: a replica for it right after a scale-down is a flap (seen on the bursty Azure code trace).
    breach_band: float = 1.02
    #: A queue that built up is sized to drain within this many seconds (after the new replicas
    #: are ready): shorter drains the backlog sooner with a larger, briefer overshoot.
    backlog_drain_s: float = 60.0
    #: A scale-down is sized for the busiest arrival rate of this many recent seconds: bursty
    #: traffic (on/off within minutes) must not shed between bursts what the next burst needs.
    scale_down_memory_s: float = 600.0
    #: Scale down only to free at least this share of the fleet: trimming one replica off a
    #: fleet sized at the margin is the step most often asked back minutes later.
    min_scale_down: float = 0.05
    #: Data older than this many seconds is stale: hold.
    stale_after_s: float = 120.0
    #: The arrival trend is fitted over this many seconds of observed rates.
    trend_window_s: float = 300.0
    #: Share of the fitted trend extrapolated over the horizon (1 = all of it).
    trend_damping: float = 1.0
    #: Cap on how far the trend may extrapolate: at most this multiple of the current rate.
    max_forecast_growth: float = 1.5
    #: The load sized for (after ``tpot_margin``) may be at most this multiple of the highest load
    #: seen meeting the targets. It must exceed 1 / ((1 - headroom) × (1 - hysteresis)), or the
    #: fleet could never shrink to a load per replica it has not already seen: with the defaults
    #: a scale-down explores at most 30 % beyond it.
    max_extrapolation: float = 1.6
    #: Latency-model memory: points kept, and how old a point may be (seconds). Short enough to
    #: follow the request mix (prompt lengths drift through a day and move the TPOT-load line).
    model_points: int = 120
    model_memory_s: float = 900.0
    #: Cooldown after any change before a scale-down (seconds).
    cooldown_s: float = 60.0
    behavior: Behavior = field(default_factory=_behavior)

    def __post_init__(self) -> None:
        checks = (
            ("interval", self.interval > 0, "> 0"),
            ("tpot_margin", 0 < self.tpot_margin <= 1, "in (0, 1]"),
            ("headroom", 0 <= self.headroom < 1, "in [0, 1)"),
            ("scale_down_band", 0 < self.scale_down_band <= 1, "in (0, 1]"),
            ("hysteresis", 0 <= self.hysteresis < 1, "in [0, 1)"),
            ("breach_band", self.breach_band >= 1, ">= 1"),
            ("backlog_drain_s", self.backlog_drain_s > 0, "> 0"),
            ("scale_down_memory_s", self.scale_down_memory_s >= 0, ">= 0"),
            ("min_scale_down", 0 <= self.min_scale_down < 1, "in [0, 1)"),
            ("stale_after_s", self.stale_after_s > 0, "> 0"),
            ("trend_window_s", self.trend_window_s > 0, "> 0"),
            ("trend_damping", self.trend_damping >= 0, ">= 0"),
            ("max_forecast_growth", self.max_forecast_growth >= 1, ">= 1"),
            ("model_points", self.model_points >= 4, ">= 4"),
            ("model_memory_s", self.model_memory_s > 0, "> 0"),
            ("cooldown_s", self.cooldown_s >= 0, ">= 0"),
        )
        for name, ok, allowed in checks:
            if not ok:
                raise ValueError(f"{name} must be {allowed}, got {getattr(self, name)!r}")
        floor = 1 / ((1 - self.headroom) * (1 - self.hysteresis))
        if self.max_extrapolation <= floor:
            raise ValueError(
                f"max_extrapolation must exceed 1/((1-headroom)(1-hysteresis)) = {floor:.2f}, got "
                f"{self.max_extrapolation!r}: the fleet could never shrink to a load it has not seen"
            )
