"""How wrong the policy's own predictions turned out: margins measured, not assumed.

Two things the sizing relies on can be checked one horizon later against what the fleet showed:

* **the load** it sized for (the forecast one cold start ahead, in tokens per second), checked
  against the tokens that actually arrived a cold start later: its ratio is what the forecast
  missed (a ramp outrunning the trend, the traffic's own swings over minutes);
* **the p90 TTFT and TPOT** the model predicted for the fleet as it stands, checked against the
  next window's observed p90s: the model's error where the fleet really operates (bursty
  arrivals, a mix changing faster than the fit follows), in windows the fit never learns from.

Each keeps the most recent ratios observed/predicted. The sizing uses an upper quantile of them
(``upper``): the load is multiplied by the load ratio's, and the targets are divided by the p90
ratios', so a model that was optimistic by 15 % in one window in ten sizes for 15 % less latency.
Until enough ratios exist the configured prior stands in for them (shrinkage: the prior counts as
``prior_weight`` samples), so a new fleet starts from the operator's headroom and moves towards what
its own traffic shows.

Pure value type; every method returns a new one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: p90 ratios kept: about 30 minutes of 15-second decisions, long enough for an upper quantile
#: to be more than the one worst window, short enough to follow a change of regime.
KEEP = 120
#: Load ratios kept, in cold starts' worth of decisions: the forecasts of the last two horizons
#: (a fleet that grew or shrank for a change of traffic forgets the misses from before it).
LOAD_KEEP_HORIZONS = 2.0
#: Beyond this the model, not its margin, is wrong: the feedback on observed breaches takes over.
MAX_LATENCY_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class ErrorRatios:
    """Predictions waiting for their outcome and the recent ratios observed/predicted."""

    #: (time the outcome is due, predicted value), oldest first.
    pending: tuple[tuple[float, float], ...] = ()
    ratios: tuple[float, ...] = ()

    def predicted(self, due: float, value: float | None) -> ErrorRatios:
        """Remember a prediction of a positive, finite ``value`` to be checked at ``due``."""
        if value is None or not (value > 0 and math.isfinite(value)):
            return self
        return ErrorRatios((*self.pending, (due, value)), self.ratios)

    def observed(self, now: float, value: float | None, *, keep: int = KEEP) -> ErrorRatios:
        """Check every prediction due by ``now`` against ``value`` (``None``: nothing to check them
        against, they are dropped, not counted as right)."""
        due = [p for t, p in self.pending if t <= now]
        if not due:
            return self
        pending = tuple((t, p) for t, p in self.pending if t > now)
        if value is None or not (value > 0 and math.isfinite(value)):
            return ErrorRatios(pending, self.ratios)
        return ErrorRatios(pending, (*self.ratios, *(value / p for p in due))[-keep:])

    def upper(self, q: float, prior: float, prior_weight: float) -> float:
        """The ``q``-quantile of the recent ratios, shrunk towards ``prior`` (worth
        ``prior_weight`` ratios): the prior alone before any ratio is known."""
        n = len(self.ratios)
        if n == 0:
            return prior
        ordered = sorted(self.ratios)
        measured = ordered[min(n - 1, math.floor(q * n))]
        return (prior * prior_weight + measured * n) / (prior_weight + n)


@dataclass(frozen=True, slots=True)
class Calibration:
    """The load ratio and the two p90 ratios (see the module docstring)."""

    load: ErrorRatios = ErrorRatios()
    ttft: ErrorRatios = ErrorRatios()
    tpot: ErrorRatios = ErrorRatios()

    def model_checked(
        self, predicted_ttft: float, predicted_tpot: float, ttft: float | None, tpot: float | None
    ) -> Calibration:
        """A window's observed p90s against what the model predicted for it beforehand."""
        return Calibration(
            self.load,
            self.ttft.predicted(0.0, predicted_ttft).observed(0.0, ttft),
            self.tpot.predicted(0.0, predicted_tpot).observed(0.0, tpot),
        )

    def margins(self, q: float, headroom: float, prior_weight: float) -> tuple[float, float, float]:
        """(load ×, TTFT ÷, TPOT ÷) the sizing applies: the p90 ratios never below 1 (the model's
        own prediction is the least the fleet is sized for) nor above ``MAX_LATENCY_RATIO``.

        A step in the traffic (forecasts missing 3x for a few minutes) stays in the load ratios for
        ``LOAD_KEEP_HORIZONS`` cold starts: long enough to keep the fleet it bought while the new
        level settles, short enough that the fleet then converges to what the level needs.
        """

        def latency(ratios: ErrorRatios) -> float:
            return min(MAX_LATENCY_RATIO, max(1.0, ratios.upper(q, 1.0, prior_weight)))

        load = max(1.0, self.load.upper(q, 1 + headroom, prior_weight))
        return load, latency(self.ttft), latency(self.tpot)

    def describe(self, q: float, headroom: float, prior_weight: float) -> str:
        load, ttft, tpot = self.margins(q, headroom, prior_weight)
        return (
            f"margins load x{load:.2f}, TTFT /{ttft:.2f}, TPOT /{tpot:.2f} "
            f"(q{q:g} of {len(self.load.ratios)} checked forecasts, {len(self.tpot.ratios)} checked windows)"
        )

    def to_dict(self) -> dict[str, list[float]]:
        """The measured ratios, JSON-safe and rounded to four significant digits (a new leader sizes
        with the margins this fleet showed instead of the prior headroom). Predictions still
        waiting for their outcome are not kept: their outcome arrives after the restart."""
        return {
            name: [float(f"{r:.4g}") for r in ratios.ratios]
            for name, ratios in (("load", self.load), ("ttft", self.ttft), ("tpot", self.tpot))
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Sequence[float]]) -> Calibration:
        """The ratios ``to_dict`` wrote; a ratio that is not a positive finite number is refused."""

        def ratios(name: str) -> ErrorRatios:
            values = tuple(float(v) for v in data.get(name, ()))
            if not all(v > 0 and math.isfinite(v) for v in values):
                raise ValueError(f"calibration.{name}: every ratio must be a positive finite number")
            return ErrorRatios((), values[-KEEP:])

        return cls(ratios("load"), ratios("ttft"), ratios("tpot"))
