"""How p90 TPOT grows with the work each replica does, learned online from what the fleet shows.

The physics (research/traces_perf.md; vLLM issue #17598): an engine step costs a fixed part ``c0``
(weights read once per step, launch, sync) plus a part per token it processes — a decode token per
running sequence, and the prefill tokens of the chunks it shares. Over one second a replica that
processes ``x`` tokens spends ``c·x`` seconds on them and the rest on fixed costs, so it runs
``(1 − c·x)/c0`` steps and each step lasts ``c0/(1 − c·x)``. A stream gains one token per step, so

    TPOT ≈ c0 / (1 − c·x)      i.e.      1/TPOT = α − β·x      (α = 1/c0, β = c/c0)

— linear in the *reciprocal*, with the load axis ``x`` = prompt + generated tokens per second per
replica. Two things follow. TPOT is a hockey stick, not a line: flat at light load and exploding as
``c·x → 1``, which a straight line fitted at light load would miss. And the axis is tokens, not
requests: a request mix drifting to longer prompts moves the load along the same curve instead of
rotating a requests-based line (on the Azure conversation trace this fit's TPOT error is 2.6 %
against 6 % for TPOT linear in requests per second). p90 TPOT follows the same shape as the mean.

The model keeps recent (x, p90 TPOT) points and fits α and β by least squares. With too little
spread in x to carry a slope it falls back to TPOT proportional to x through the newest point,
which underestimates capacity: wrong in the safe direction.

Pure value type; ``observe`` returns a new model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Point = tuple[float, float, float, bool]  # (time, load per replica, p90 TPOT s, both targets met)

#: Below this relative spread of the load the slope is noise, not signal.
_MIN_RELATIVE_SPREAD = 0.15
_MIN_POINTS = 4


@dataclass(frozen=True, slots=True)
class TpotModel:
    points: tuple[Point, ...] = ()
    #: The least-squares fit of ``points``, computed once: a decision asks for it a dozen times
    #: (sizing, the survivors of each candidate count, the batch limit, the prediction).
    _fit: tuple[float, float] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_fit", _least_squares(self.points))

    def observe(
        self, now: float, load: float, tpot_p90: float, *, keep: int, memory_s: float, met: bool = True
    ) -> TpotModel:
        """Add a point; ``met`` says whether both p90 targets held at it (evidence of capacity)."""
        if load <= 0 or tpot_p90 <= 0:
            return self
        kept = tuple(p for p in self.points if p[0] > now - memory_s)[-(keep - 1) :]
        return TpotModel((*kept, (now, load, tpot_p90, met)))

    @property
    def ready(self) -> bool:
        return bool(self.points)

    def fitted(self) -> tuple[float, float] | None:
        """(α, β) of 1/TPOT = α − β·x, both > 0, only when the points spread enough to carry a slope."""
        return self._fit

    def load_at(self, tpot: float) -> float | None:
        """Load per replica at which p90 TPOT is predicted to equal ``tpot`` (no evidence cap)."""
        if not self.points or tpot <= 0:
            return None
        fitted = self.fitted()
        if fitted is None:
            _, x0, y0, _ = self.points[-1]
            return x0 * tpot / y0
        alpha, beta = fitted
        return max(0.0, (alpha - 1.0 / tpot) / beta)

    def tpot_at(self, load: float) -> float | None:
        """Predicted p90 TPOT at ``load`` per replica; ``math.inf`` past saturation."""
        if not self.points:
            return None
        fitted = self.fitted()
        if fitted is None:
            _, x0, y0, _ = self.points[-1]
            return y0 * load / x0
        alpha, beta = fitted
        rate = alpha - beta * load
        return 1.0 / rate if rate > 0 else math.inf

    def evidence(self) -> float | None:
        """The highest load per replica seen with both p90 targets met: capacity proven in practice."""
        met = [p[1] for p in self.points if p[3]]
        return max(met) if met else None

    def capacity(self, tpot: float, extrapolation: float, share: float = 1.0) -> float | None:
        """``share`` of the load per replica at which p90 TPOT reaches ``tpot``, by the fit, and at
        most ``extrapolation`` × the load proven by evidence; the proportional fallback without a
        fit; ``None`` without data.

        The cap makes shrinking the fleet an exploration in steps: a curve fitted at light load
        must not be trusted far beyond where it was seen to hold (the request mix, the KV reads of
        long contexts and preemptions all bend it). The fallback through the newest point ignores
        the fixed part of the step time, so it underestimates capacity: more replicas than needed,
        never fewer.
        """
        model = self.load_at(tpot)
        if model is None or self.fitted() is None:
            return None if model is None else model * share
        evidence = self.evidence()
        return model * share if evidence is None else min(model * share, extrapolation * evidence)


def _least_squares(points: tuple[Point, ...]) -> tuple[float, float] | None:
    """(α, β) of 1/TPOT = α − β·x by least squares; ``None`` with too few or too close points, or
    a fit contradicting the physics."""
    if len(points) < _MIN_POINTS:
        return None
    xs = [p[1] for p in points]
    ys = [1.0 / p[2] for p in points]
    n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0 or (sxx / n) ** 0.5 < _MIN_RELATIVE_SPREAD * mx:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    alpha, beta = my - slope * mx, -slope
    if beta <= 0 or alpha <= 0:
        # TPOT falling with load, or no load at which it is finite: contradicts the physics;
        # prefer the safe fallback.
        return None
    return alpha, beta
