"""How the seasonal forecast's candidates are weighed and combined (Bates–Granger, by hand).

Each candidate carries a ``Skill``: the decaying mean of its absolute log errors, and how many were
scored. Its weight is exp(-(error - best error) / (temperature × best error)) among the candidates
scored ``min_scored`` times (one new to the history, as last week's day on day 8, joins once it has
been); equal weights while none has been. At a temperature of 0.05 a candidate 5 % worse than the
best weighs e⁻¹ as much: on traffic where the day profile is noise it fades out, and the forecast is
persistence's, not worse.

The forecasts combine two ways: the weighted mean (the point forecast, what ``ahead`` reports and
the days benchmark scores), and a weighted quantile, the weights read as how plausible each
candidate is: where candidates disagree, the q-quantile is the highest forecast from which the
weight above reaches 1 − q (what the sizing reads, ``RateForecast.cover``).

Pure functions of plain values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Skill:
    """One candidate's record: the decaying mean of its absolute log errors, and how many."""

    mae: float = 0.0
    scored: int = 0

    def scoring(self, error: float, decay: float) -> Skill:
        """With one more absolute log ``error``: a plain mean while few are scored, then decaying."""
        weight = max(1 - decay, 1 / (self.scored + 1))
        return Skill((1 - weight) * self.mae + weight * abs(error), self.scored + 1)


def weights(skills: Mapping[str, Skill], *, min_scored: int, temperature: float) -> dict[str, float]:
    """Each candidate's (unnormalised) weight from its skill (module docstring)."""
    known = {n: s.mae for n, s in skills.items() if s.scored >= min_scored}
    if not known:
        return dict.fromkeys(skills, 1.0)
    best = min(known.values())
    scale = temperature * best + 1e-12
    return {n: math.exp(-(mae - best) / scale) for n, mae in known.items()}


def mean(found: Mapping[str, float], weight: Mapping[str, float]) -> float:
    """The weighted mean of the forecasts ``found`` (every name in ``weight`` is in ``found``)."""
    return sum(w * found[n] for n, w in weight.items()) / sum(weight.values())


def quantile(found: Mapping[str, float], weight: Mapping[str, float], q: float) -> float:
    """The weighted ``q``-quantile: the highest forecast from which the weight above reaches 1 − q."""
    total = sum(weight.values())
    above = 0.0
    for name in sorted(weight, key=lambda n: found[n], reverse=True):
        above += weight[name] / total
        if above >= 1 - q - 1e-12:
            return found[name]
    return min(found[n] for n in weight)
