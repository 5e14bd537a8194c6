"""How good a forecast was: MAPE of what was predicted for a time against what that time brought.

A forecast made at ``t`` for ``t + h`` is scored when ``t + h`` has been observed. MAPE (mean
absolute percentage error, in %) is reported per day of the target time; a pair whose actual value
is zero has no percentage error and is left out (and counted), never scored as 0 or infinity.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class DayError:
    day: int
    mape_pct: float | None
    scored: int
    unscored: int  # pairs with an actual value of zero


def mape_by_day(pairs: Iterable[tuple[float, float, float]], day_s: float = DAY_S) -> list[DayError]:
    """``pairs`` of (target time, predicted, actual) → the MAPE of each day that has any."""
    sums: dict[int, list[float]] = {}
    zeros: dict[int, int] = {}
    for t, predicted, actual in pairs:
        day = int(t // day_s)
        sums.setdefault(day, [])
        if actual > 0:
            sums[day].append(abs(predicted - actual) / actual)
        else:
            zeros[day] = zeros.get(day, 0) + 1
    return [
        DayError(day, 100 * sum(errs) / len(errs) if errs else None, len(errs), zeros.get(day, 0))
        for day, errs in sorted(sums.items())
    ]
