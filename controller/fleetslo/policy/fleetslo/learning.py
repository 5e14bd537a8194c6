"""What the fleet teaches the performance model: the engine's speed, prefill interference, TTFT bias.

The prior step costs (an engine profile's, or the conservative prior) fix the *shape* of the
physics; three numbers learned from every clean window fit it to the fleet:

* ``speed`` multiplies every step cost (a slower GPU, another model, a conservative prior);
* ``interference`` scales how many prefills a decoding request lives through, relative to the
  mean-field Poisson rate (routing imbalance and chunking make the tail of TPOT worse than the
  mean load predicts);
* ``ttft_bias`` multiplies the predicted p90 TTFT (bucket interpolation, what the step chain leaves out).

``speed`` and ``interference`` both move the predicted p90 TPOT, differently with load: speed
moves the whole curve and its knee, interference the tail at high prefill load. They are fitted
together by an extended Kalman filter on ln(p90 TPOT) — a Gauss–Newton step per window, weighted
by how uncertain each parameter still is — so windows at several loads separate the two, and a
random-walk term lets both follow a drift. ``ttft_bias`` is an exponential average in log space.

Pure value type; ``to_dict``/``from_dict`` make it persistable across controller restarts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from fleetslo.policy.fleetslo.mix import RequestMix
from fleetslo.policy.fleetslo.perf_model import Prediction, meets, predict
from fleetslo.policy.fleetslo.physics import CONSERVATIVE_PRIOR, StepCost
from fleetslo.policy.fleetslo.ttft import INF

#: ln-space bounds of the learned factors: beyond them the physics, not a factor, is wrong.
_LN_SPEED = (math.log(0.02), math.log(5.0))
_LN_INTERFERENCE = (math.log(0.3), math.log(4.0))
_LN_BIAS = (math.log(0.4), math.log(3.0))
#: Prior standard deviations (ln units): an engine profile's costs are trusted to ~±25 %, the
#: conservative prior to a factor ~2.7; interference starts at the mean field, ±65 %.
_PRIOR_SD_PROFILE, _PRIOR_SD_CONSERVATIVE, _PRIOR_SD_INTERFERENCE = 0.25, 1.0, 0.5
#: Noise of one window's ln(p90 TPOT) (sampling, bucket interpolation) and the random walk of
#: the parameters per window (lets them follow a drifting engine or mix).
_MEASUREMENT_VAR = 0.12**2
_DRIFT_VAR = 4e-4
#: A window further than this from the prediction (ln units) is clipped: a burst or a fault must
#: not rewrite the engine in one step.
_MAX_INNOVATION = 0.5
_DELTA = 0.02


@dataclass(frozen=True, slots=True)
class PerformanceModel:
    """The prior step costs and what the fleet taught about them (see the module docstring)."""

    prior: StepCost
    ln_speed: float = 0.0
    ln_interference: float = 0.0
    ln_ttft_bias: float = 0.0
    #: Covariance of (ln speed, ln interference): how much is still unknown.
    cov: tuple[float, float, float] | None = None
    #: Windows learned from so far.
    windows: int = 0

    def __post_init__(self) -> None:
        if self.cov is None:
            sd = _PRIOR_SD_CONSERVATIVE if self.prior == CONSERVATIVE_PRIOR else _PRIOR_SD_PROFILE
            object.__setattr__(self, "cov", (sd * sd, 0.0, _PRIOR_SD_INTERFERENCE**2))

    @property
    def speed(self) -> float:
        return math.exp(self.ln_speed)

    @property
    def interference(self) -> float:
        return math.exp(self.ln_interference)

    @property
    def ttft_bias(self) -> float:
        return math.exp(self.ln_ttft_bias)

    def predict(self, rate: float, mix: RequestMix, limit: int | None, q: float = 0.9) -> Prediction:
        raw = predict(self.prior.scaled(self.speed), rate, mix, limit, q, interference=self.interference)
        return replace(raw, ttft_p90=raw.ttft_p90 * self.ttft_bias)

    def meets(
        self, rate: float, mix: RequestMix, limit: int | None, q: float, *, ttft: float, tpot: float
    ) -> bool:
        """Whether ``predict``'s p90s are within ``ttft`` and ``tpot``, without solving for them."""
        cost = self.prior.scaled(self.speed)
        return meets(
            cost, rate, mix, limit, q, ttft=ttft, tpot=tpot, interference=self.interference,
            ttft_scale=self.ttft_bias,
        )  # fmt: skip

    def learn(
        self,
        rate: float,
        mix: RequestMix,
        limit: int | None,
        observed_ttft: float | None,
        observed_tpot: float | None,
        *,
        q: float = 0.9,
        min_weight: float = 0.1,
    ) -> PerformanceModel:
        """One window's evidence: what the fleet showed at ``rate`` requests/s per replica."""
        model = self
        if observed_tpot and observed_tpot > 0 and math.isfinite(observed_tpot):
            model = model._learn_tpot(rate, mix, limit, observed_tpot, q)
        if observed_ttft and observed_ttft > 0 and math.isfinite(observed_ttft):
            raw = predict(
                model.prior.scaled(model.speed), rate, mix, limit, q, interference=model.interference
            )
            if 0 < raw.ttft_p90 < INF:
                weight = max(min_weight, 1.0 / (self.windows + 1))
                sample = math.log(observed_ttft / raw.ttft_p90)
                ln_bias = _bounded((1 - weight) * model.ln_ttft_bias + weight * sample, _LN_BIAS)
                model = replace(model, ln_ttft_bias=ln_bias)
        return replace(model, windows=self.windows + 1)

    def _learn_tpot(
        self, rate: float, mix: RequestMix, limit: int | None, observed: float, q: float
    ) -> PerformanceModel:
        def f(a: float, b: float) -> float:
            p = predict(self.prior.scaled(math.exp(a)), rate, mix, limit, q, interference=math.exp(b))
            return math.log(p.tpot_p90) if 0 < p.tpot_p90 < INF and not p.limited else math.nan

        a, b = self.ln_speed, self.ln_interference
        assert self.cov is not None
        paa, pab, pbb = self.cov[0] + _DRIFT_VAR, self.cov[1], self.cov[2] + _DRIFT_VAR
        base = f(a, b)
        if not math.isfinite(base):
            # The model calls this load saturated while the fleet serves it with a finite TPOT:
            # the engine is faster than the model says, by an amount this window cannot tell.
            # Step the speed by one standard deviation of what is still unknown, at most a
            # halving: from the conservative prior (sd ~1) that halves until the load is not
            # saturated, a search that finds a 2x-off prior in a few windows; a profile (sd 0.25)
            # or a model many windows have confirmed moves a little per window, so one overloaded
            # window (a burst the fleet served late) cannot teach it a 2x-too-fast engine.
            step = min(math.log(2), math.sqrt(paa))
            return replace(self, ln_speed=_bounded(a - step, _LN_SPEED), cov=(paa, pab, pbb))
        ja, jb = _slope(lambda d: f(a + d, b), base), _slope(lambda d: f(a, b + d), base)
        if not (math.isfinite(ja) and math.isfinite(jb)):
            return self  # limited both ways: this window says nothing about the free engine
        # EKF update with the 1x2 Jacobian J = (ja, jb): S = J P Jᵀ + R, K = P Jᵀ / S.
        pja, pjb = paa * ja + pab * jb, pab * ja + pbb * jb
        s = ja * pja + jb * pjb + _MEASUREMENT_VAR
        ka, kb = pja / s, pjb / s
        innovation = max(-_MAX_INNOVATION, min(_MAX_INNOVATION, math.log(observed) - base))
        cov = (paa - ka * pja, pab - ka * pjb, pbb - kb * pjb)
        return replace(
            self,
            ln_speed=_bounded(a + ka * innovation, _LN_SPEED),
            ln_interference=_bounded(b + kb * innovation, _LN_INTERFERENCE),
            cov=cov,
        )

    def describe(self) -> str:
        learned = (
            f"learned speed x{self.speed:.2f}, interference x{self.interference:.2f}, "
            f"TTFT x{self.ttft_bias:.2f}"
        )
        return f"step costs from {self.prior.source}, {learned} over {self.windows} windows"

    def to_dict(self) -> dict[str, Any]:
        return {
            "prior": self.prior.to_dict(), "ln_speed": self.ln_speed,
            "ln_interference": self.ln_interference, "ln_ttft_bias": self.ln_ttft_bias,
            "cov": list(self.cov or ()), "windows": self.windows,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PerformanceModel:
        cov = data.get("cov")
        return cls(
            StepCost.from_dict(data["prior"]),
            _bounded(float(data.get("ln_speed", 0.0)), _LN_SPEED),
            _bounded(float(data.get("ln_interference", 0.0)), _LN_INTERFERENCE),
            _bounded(float(data.get("ln_ttft_bias", 0.0)), _LN_BIAS),
            None if not cov else (float(cov[0]), float(cov[1]), float(cov[2])),
            int(data.get("windows", 0)),
        )


def _slope(g: Callable[[float], float], base: float) -> float:
    """d g / d x at 0, forward, or backward where a step forward saturates the model: at the
    knee (the model just short of saturation) the backward side, a faster engine, is where the
    evidence points, and a model left there with no slope would never learn again."""
    ahead = g(_DELTA)
    if math.isfinite(ahead):
        return (ahead - base) / _DELTA
    return (base - g(-_DELTA)) / _DELTA


def _bounded(value: float, bounds: tuple[float, float]) -> float:
    return min(bounds[1], max(bounds[0], value))
