"""The numbers behind one sizing of the fleet, and the reason and message they give the decision."""

from __future__ import annotations

from dataclasses import dataclass

from fleetslo.core.model import Reason


@dataclass(frozen=True, slots=True)
class Sizing:
    """The numbers behind a sizing, for the decision's message."""

    need: int
    current: int
    expected: float
    arrival: float
    forecast_load: float
    instant_load: float
    per_replica: float
    tokens_per_request: float

    def why(self) -> tuple[Reason, str]:
        load = max(self.forecast_load, self.instant_load)
        basis = (
            f"arrivals {self.arrival:.2f}/s, {self.expected:.2f}/s expected in one cold start; load "
            f"{load:.1f}/s at {self.per_replica:.2f}/s per replica "
            f"({self.tokens_per_request:,.0f} tokens per request)"
        )
        if self.need > self.current:
            if self.instant_load > self.forecast_load:
                return Reason.SCALE_UP_QUEUE, f"{basis} (instant load outruns the forecast): {self.need}"
            return Reason.SCALE_UP_FORECAST, f"{basis}: {self.need}"
        if self.need < self.current:
            return Reason.SCALE_DOWN_LOW_LOAD, f"{basis}: {self.need}"
        return Reason.STEADY, f"{basis}: hold at {self.current}"
