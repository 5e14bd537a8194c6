"""How p90 TPOT grows with the load per replica, learned online from what the fleet shows.

On real hardware a decode step costs a fixed part (weights read once per step) plus a part per
sequence in the batch, and prefill chunks stretch the steps they share (vLLM issue #17598;
research/traces_perf.md). Both the batch and the prefill work grow with the requests each replica
serves per second, x, so for a stable request mix p90 TPOT ≈ a + b·x. (Running sequences would be a
worse axis: they also grow *because* TPOT grows, as each request stays longer in the batch.) The
model keeps recent (x, p90 TPOT) points and fits a and b by least squares. With too little spread
in x to fit a slope, it falls back to the proportional model
(a = 0) through the newest point, which underestimates capacity: wrong in the safe direction.

From the fit, ``concurrency_at(tpot)`` answers "how much load per replica keeps p90 TPOT at this
value" — the per-replica capacity behind replica sizing and the gate's batch limit.
Pure value type; ``observe`` returns a new model.
"""

from __future__ import annotations

from dataclasses import dataclass

Point = tuple[float, float, float, bool]  # (time, load per replica, p90 TPOT s, both targets met)

#: Below this relative spread of B the slope is noise, not signal.
_MIN_RELATIVE_SPREAD = 0.15
_MIN_POINTS = 4


@dataclass(frozen=True, slots=True)
class TpotModel:
    points: tuple[Point, ...] = ()

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

    def coefficients(self) -> tuple[float, float] | None:
        """(a, b) with a ≥ 0 and b > 0: the fit, else the proportional fallback; ``None`` without data."""
        if not self.points:
            return None
        fitted = self.fitted()
        if fitted is not None:
            return fitted
        _, x0, y0, _ = self.points[-1]
        return 0.0, y0 / x0

    def fitted(self) -> tuple[float, float] | None:
        """The least-squares (a, b), only when the points spread enough to carry a slope."""
        return self._least_squares()

    def concurrency_at(self, tpot: float) -> float | None:
        """Running requests per replica at which p90 TPOT is predicted to equal ``tpot``."""
        coef = self.coefficients()
        if coef is None:
            return None
        a, b = coef
        return max(0.0, (tpot - a) / b)

    def tpot_at(self, running_per_replica: float) -> float | None:
        coef = self.coefficients()
        return None if coef is None else coef[0] + coef[1] * running_per_replica

    def evidence(self) -> float | None:
        """The highest load per replica seen with both p90 targets met: capacity proven in practice."""
        met = [p[1] for p in self.points if p[3]]
        return max(met) if met else None

    def capacity(self, tpot: float, extrapolation: float) -> float | None:
        """Load per replica for p90 TPOT ``tpot``: the fit, at most ``extrapolation`` × the load
        proven by evidence; the proportional fallback without a fit; ``None`` without data.

        The cap makes shrinking the fleet an exploration in small steps: latency is close to linear
        in load far from saturation and explodes near it (queueing), so a line fitted at low load
        must not be trusted far beyond where it was seen to hold. The fallback through the newest
        point ignores the fixed part of the step time, so it underestimates capacity: more
        replicas than needed, never fewer.
        """
        fitted = self.fitted()
        if fitted is None:
            return self.concurrency_at(tpot)
        a, b = fitted
        model = max(0.0, (tpot - a) / b)
        evidence = self.evidence()
        return model if evidence is None else min(model, extrapolation * evidence)

    def _least_squares(self) -> tuple[float, float] | None:
        if len(self.points) < _MIN_POINTS:
            return None
        xs = [p[1] for p in self.points]
        ys = [p[2] for p in self.points]
        n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        if sxx <= 0 or (sxx / n) ** 0.5 < _MIN_RELATIVE_SPREAD * mx:
            return None
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
        a = my - b * mx
        if b <= 0 or a < 0:
            # A falling or negative-intercept fit contradicts the physics; prefer the safe fallback.
            return None
        return a, b
