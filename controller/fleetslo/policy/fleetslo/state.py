"""What the ``fleetslo`` policy carries from one decision to the next (returned, never mutated)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetslo.policy.fleetslo.forecast import RateForecast
from fleetslo.policy.fleetslo.latency_model import TpotModel


@dataclass(frozen=True, slots=True)
class FleetSLOState:
    model: TpotModel = field(default_factory=TpotModel)
    forecast: RateForecast = field(default_factory=RateForecast)
    #: Seconds a request spends in the running batch (Little's law: running / completion rate).
    service_time: float | None = None
    #: The request mix: prompt + generated tokens per request, smoothed over windows.
    tokens_per_request: float | None = None
    #: (time, fleet waiting) at the previous decision: its growth is arrival rate not yet served.
    last_waiting: tuple[float, float] | None = None
    #: Multiplies the model's capacity; shrinks when p90 TPOT breaches inside the modelled capacity.
    correction: float = 1.0
    recommendations: tuple[tuple[float, int], ...] = ()
    events: tuple[tuple[float, int], ...] = ()
    last_change_at: float | None = None
    #: When the policy first saw data: until one window has passed, windowed rates are partial.
    first_seen: float | None = None
    #: Smoothed per-replica capacity (tokens/s at the sizing margin): one new point can move the
    #: fitted curve; sizing on the raw fit would grow the fleet a minute after shrinking it.
    capacity: float | None = None
