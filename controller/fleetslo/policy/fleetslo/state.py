"""What the ``fleetslo`` policy carries from one decision to the next (returned, never mutated).

``learned()`` and ``resume()`` are the part worth keeping across a controller restart or a leader
change — the performance model, the request mix and the measured margins (``calibration``, an
optional key: a record without it resumes with the prior headroom) — as a plain dict (JSON-safe)
the controller can store (e.g. in the FleetSLO's status) and hand back, so a new leader does not
relearn the engine by over-provisioning. The rest (forecast samples, recent recommendations) is
minutes of memory that a new leader rebuilds within one window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fleetslo.policy.fleetslo.calibration import Calibration
from fleetslo.policy.fleetslo.forecast import RateForecast
from fleetslo.policy.fleetslo.learning import PerformanceModel
from fleetslo.policy.fleetslo.mix import RequestMix
from fleetslo.policy.stages import ChainState

#: Bumped when the shape of ``learned()`` changes; ``resume`` ignores other versions.
LEARNED_VERSION = 1


@dataclass(frozen=True, slots=True)
class FleetSLOState:
    model: PerformanceModel
    #: The request mix (prompt and output length distributions), smoothed over windows.
    mix: RequestMix | None = None
    forecast: RateForecast = field(default_factory=RateForecast)
    #: How long requests stay in the fleet (Little's law: held / completion rate) over what the
    #: model predicts for that window (``backlog.stay_ratio``), from clean windows only: under
    #: overload the stay balloons, and sizing by it would buy a fleet for a batch that is slow,
    #: not large.
    stay_ratio: float | None = None
    #: (time, requests in the fleet) at recent decisions, one window back and a little more, oldest
    #: first: their growth is arrivals not yet served.
    held_history: tuple[tuple[float, float], ...] = ()
    #: (time, ready replicas) at the same decisions: the fleet that served the window.
    ready_history: tuple[tuple[float, float], ...] = ()
    chain: ChainState = field(default_factory=ChainState)
    #: When the policy first saw data: until one window has passed, windowed rates are partial.
    first_seen: float | None = None
    #: How wrong the forecast and the model turned out (the sizing's measured margins).
    calibration: Calibration = field(default_factory=Calibration)
    #: (ready replicas, since when): a window judges the fleet it ran on only once that long.
    ready_since: tuple[int, float] | None = None
    #: The ready count before it last changed: a change that grew it is replicas joining, one that
    #: shrank it without a scale-down is replicas lost (a crash, an eviction).
    ready_before: int | None = None
    #: When the fleet last sat empty (a window with nothing completed, nothing held): the windows
    #: overlapping that lull count less than arrives once traffic is back (``FleetSLOPolicy._plan``).
    quiet_at: float | None = None

    def learned(self) -> dict[str, Any]:
        """The learned model and mix as a JSON-safe dict (``resume`` reads it back)."""
        return {
            "version": LEARNED_VERSION,
            "model": self.model.to_dict(),
            "mix": None if self.mix is None else self.mix.to_dict(),
            "calibration": self.calibration.to_dict(),
        }

    def resume(self, learned: Mapping[str, Any]) -> FleetSLOState:
        """This state with a persisted model and mix; unchanged if ``learned`` is another version.

        The persisted prior is kept only if it is the one this policy was configured with: a new
        engine profile outranks what was learned on another one.
        """
        if learned.get("version") != LEARNED_VERSION:
            return self
        model = PerformanceModel.from_dict(learned["model"])
        if model.prior != self.model.prior:
            return self
        mix = learned.get("mix")
        margins = learned.get("calibration")
        calibration = self.calibration if margins is None else Calibration.from_dict(margins)
        return replace(
            self, model=model, mix=None if mix is None else RequestMix.from_dict(mix), calibration=calibration
        )
