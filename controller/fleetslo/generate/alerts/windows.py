"""Burn-rate tiers as data, and the math that turns them into thresholds for one objective.

A tier says "alert when ``budget_fraction`` of the period's error budget burns within ``long``"
(the SRE Workbook's multiwindow, multi-burn-rate table), with a ``short`` window (long/12) that
makes the alert reset soon after the burn stops. For objective O (budget B = 1 - O) over period
P the tier's burn factor is ``f = budget_fraction * P / long`` and it fires when the error ratio
exceeds ``f * B`` in both windows.

An error ratio cannot exceed 1, so a factor is only reachable when ``f * B < 1``; a p90 objective
(B = 0.1) can never reach the Workbook's 14.4x (1.44 > 1). Where the nominal factor is out of
reach (or nearly so) it is capped at ``reach_cap(B)`` = halfway between the sustainable burn (1)
and the largest burn possible (1/B): always > 1 (faster than sustainable) and always < 1/B
(fires before a total outage is needed). See alerts/README.md for the derivation.

Pure arithmetic on data; no I/O, no PromQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleetslo.core import conventions as cv

HOUR, DAY = 3600.0, 86_400.0


@dataclass(frozen=True, slots=True)
class Tier:
    """One row of the window table: a severity, the share of budget, and the two windows."""

    severity: str
    budget_fraction: float
    long: float
    short: float
    #: ``for:`` of the alert: a little patience against one noisy evaluation.
    hold: float


#: The SRE Workbook's four tiers (ch. 5, "Alerting on SLOs"): 2 % of the budget in 1 h and 5 % in
#: 6 h page; 10 % in 1 d and 10 % in 3 d open a ticket. ``for`` follows Pyrra (2m/15m/1h/3h).
WORKBOOK_TIERS: tuple[Tier, ...] = (
    Tier(cv.SEVERITY_PAGE, 0.02, 1 * HOUR, 5 * 60.0, 2 * 60.0),
    Tier(cv.SEVERITY_PAGE, 0.05, 6 * HOUR, 30 * 60.0, 15 * 60.0),
    Tier(cv.SEVERITY_TICKET, 0.10, 1 * DAY, 2 * HOUR, 1 * HOUR),
    Tier(cv.SEVERITY_TICKET, 0.10, 3 * DAY, 6 * HOUR, 3 * HOUR),
)


@dataclass(frozen=True, slots=True)
class BurnAlert:
    """A tier resolved for one objective: the factor used and the error-ratio threshold."""

    tier: Tier
    nominal_factor: float
    factor: float
    budget: float
    period: float

    @property
    def capped(self) -> bool:
        return self.factor < self.nominal_factor

    @property
    def error_ratio_threshold(self) -> float:
        """Fire when more than this share of requests is over the latency threshold."""
        return self.factor * self.budget

    @property
    def budget_consumed_at_fire(self) -> float:
        """Share of the period's budget burnt when the long window first crosses the threshold."""
        return self.factor * self.tier.long / self.period

    @property
    def exhaustion_seconds(self) -> float:
        """How long the whole budget lasts at exactly this burn rate."""
        return self.period / self.factor

    @property
    def detection_seconds(self) -> float:
        """From a total outage (every request slow) to the long window crossing the threshold."""
        return self.error_ratio_threshold * self.tier.long


def budget_of(objective: float) -> float:
    """The error budget of an objective: the share of requests allowed over the threshold."""
    if not 0.0 < objective < 1.0:
        raise ValueError(f"objective must be in (0, 1) (got {objective!r})")
    return 1.0 - objective


def max_burn(budget: float) -> float:
    """The largest burn rate possible: every request bad."""
    return 1.0 / budget


def reach_cap(budget: float) -> float:
    """The highest factor we alert at: halfway between burn 1 and the maximum burn 1/B."""
    return (1.0 + max_burn(budget)) / 2.0


def nominal_factor(tier: Tier, period: float) -> float:
    """The tier's factor as the Workbook defines it: budget_fraction × period / long window."""
    return tier.budget_fraction * period / tier.long


def resolve(objective: float, period: float, tiers: Sequence[Tier] = WORKBOOK_TIERS) -> list[BurnAlert]:
    """Every tier that fits in ``period``, with its factor capped to one an outage can reach."""
    budget = budget_of(objective)
    cap = reach_cap(budget)
    out = []
    for tier in tiers:
        if tier.long > period:
            continue  # a window longer than the period itself says nothing about that period
        nominal = nominal_factor(tier, period)
        out.append(BurnAlert(tier, nominal, min(nominal, cap), budget, period))
    return out
