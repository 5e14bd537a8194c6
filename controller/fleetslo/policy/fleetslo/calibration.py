"""How wrong the policy's own predictions turned out: margins measured, not assumed.

Two things the sizing relies on can be checked one horizon later against what the fleet showed:

* **the load** it sized for (the forecast one cold start ahead, in tokens per second), checked
  against the tokens that actually arrived a cold start later: its ratio is what the forecast
  missed (a ramp outrunning the trend, the traffic's own swings over minutes);
* **the p90 TTFT and TPOT** the model predicted for the fleet as it stands, checked against the
  next window's observed p90s: the model's error where the fleet really operates (bursty
  arrivals, a mix changing faster than the fit follows), in windows the fit never learns from.

Each keeps the most recent ratios observed/predicted. A load miss that was a *level shift* — the
traffic stepped up and stayed — is forgotten once the fleet has caught up with it (``LoadChecks``):
it taught the sizing the new level, and keeping its ratio would size every later minute for a
second step of the same height on top of the first. Likewise a p90 miss in a window that carried
more than the fleet had been sized for — the load checked that window missed (more arrived than
was sized for), or the sizing itself (the model with its margins) would not have called the
window's per-replica rate within both targets — is the load's miss (a fleet under-sized in a step
or a burst, queues building), not the model's: it is not counted, while a ratio at or below 1 from
such a window still is (the model held even there). Kept, the overload minutes after a 3x step
held the latency margins (TTFT /1.45, TPOT /1.22) for the half hour of ``KEEP`` checks. And a
p90 read off histogram buckets is checked as the buckets allow (``Quantiles.p90_seen_by``, the
policy's ``_check_model``): a prediction inside the p90's bucket is right as far as they tell.
The sizing uses an upper quantile of them
(``upper``): the load is multiplied by the load ratio's, taken at the level of the load sized now
(``LoadChecks.upper``: what arrived after sizings like this one, not after a lull's), and the targets
are divided by the p90 ratios', so a model that was optimistic by 15 % in one window in ten sizes
for 15 % less latency.
Until enough ratios exist the configured prior stands in for them (shrinkage: the prior counts as
``prior_weight`` samples), so a new fleet starts from the operator's headroom and moves towards what
its own traffic shows.

Pure value type; every method returns a new one.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

#: p90 ratios kept: about 30 minutes of 15-second decisions, long enough for an upper quantile
#: to be more than the one worst window, short enough to follow a change of regime.
KEEP = 120
#: Load ratios kept, in cold starts' worth of decisions: the forecasts of the last two horizons
#: (a fleet that grew or shrank for a change of traffic forgets the misses from before it).
LOAD_KEEP_HORIZONS = 2.0
#: Beyond this the model, not its margin, is wrong: the feedback on observed breaches takes over.
MAX_LATENCY_RATIO = 2.0


def moved(old: float, new: float) -> float:
    """How a prediction moved, ``old / new``, for ``Calibration.rebased``; NaN (nothing to rebase
    by) unless both are positive and finite."""
    return old / new if 0 < old < math.inf and 0 < new < math.inf else math.nan


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

    def observed(
        self, now: float, value: float | None, *, keep: int = KEEP, misses: bool = True
    ) -> ErrorRatios:
        """Check every prediction due by ``now`` against ``value`` (``None``: nothing to check them
        against, they are dropped, not counted as right). ``misses=False``: a ratio above 1 is
        explained by something else (see ``Calibration.model_checked``) and dropped too."""
        due = [p for t, p in self.pending if t <= now]
        if not due:
            return self
        pending = tuple((t, p) for t, p in self.pending if t > now)
        if value is None or not (value > 0 and math.isfinite(value)):
            return ErrorRatios(pending, self.ratios)
        ratios = [value / p for p in due]
        return ErrorRatios(pending, (*self.ratios, *(r for r in ratios if misses or r <= 1))[-keep:])

    def upper(self, q: float, prior: float, prior_weight: float) -> float:
        """The ``q``-quantile of the recent ratios, shrunk towards ``prior`` (worth
        ``prior_weight`` ratios): the prior alone before any ratio is known."""
        n = len(self.ratios)
        if n == 0:
            return prior
        ordered = sorted(self.ratios)
        measured = ordered[min(n - 1, math.floor(q * n))]
        return shrunk(measured, n, prior, prior_weight)


def shrunk(measured: float, n: float, prior: float, prior_weight: float) -> float:
    """``measured`` from ``n`` checks (a weight where they are weighed) shrunk towards ``prior``,
    which counts as ``prior_weight`` of them."""
    return (prior * prior_weight + measured * n) / (prior_weight + n)


@dataclass(frozen=True, slots=True)
class LoadCheck:
    """One sized load checked one horizon later (tokens/s)."""

    made: float
    checked: float
    sized: float
    arrived: float

    @property
    def ratio(self) -> float:
        return self.arrived / self.sized


@dataclass(frozen=True, slots=True)
class LoadChecks:
    """The sized loads waiting for their outcome, the recent checks, and the latest arrivals.

    A miss (``arrived > sized``) counts until it is *caught up*: a load sized after its outcome
    was known proved enough (ratio ≤ 1), and the traffic still sits at the level the miss
    revealed (the latest arrivals nearer the arrived level than the sized one, geometrically).
    Then the miss was a level shift the sizing has absorbed. Nothing here is a tuned threshold;
    each test compares the fleet's own numbers:

    * a **step** that stays is absorbed one horizon after it, once the first loads sized at the
      new level are checked and found enough;
    * a **burst** that went away is not at its level any more: its miss keeps counting, the
      evidence that the traffic swings that far;
    * a **ramp** keeps missing after every re-sizing (no later check is ≤ 1): its misses count.
    """

    #: (due, sized, made), oldest first.
    pending: tuple[tuple[float, float, float], ...] = ()
    checks: tuple[LoadCheck, ...] = ()
    #: Ratios resumed from a record (their times are unknown; they count until they age out).
    resumed: tuple[float, ...] = ()
    latest: float | None = None

    def predicted(self, due: float, value: float | None, *, made: float) -> LoadChecks:
        """Remember a load of ``value`` tokens/s sized at ``made``, to be checked at ``due``."""
        if value is None or not (value > 0 and math.isfinite(value)):
            return self
        return replace(self, pending=(*self.pending, (due, value, made)))

    def observed(self, now: float, value: float | None, *, keep: int = KEEP) -> LoadChecks:
        """Check every sized load due by ``now`` against the arrived ``value``."""
        ok = value is not None and value > 0 and math.isfinite(value)
        latest = value if ok else self.latest
        due = [p for p in self.pending if p[0] <= now]
        if not due:
            return replace(self, latest=latest)
        pending = tuple(p for p in self.pending if p[0] > now)
        if not ok or value is None:
            return replace(self, pending=pending, latest=latest)
        checks = (*self.checks, *(LoadCheck(made, now, sized, value) for _, sized, made in due))
        resumed = self.resumed[max(0, len(self.resumed) + len(checks) - keep) :]
        return LoadChecks(pending, checks[-keep:], resumed, latest)

    @property
    def ratios(self) -> tuple[float, ...]:
        """The ratios that count: resumed ones, and every check not caught up."""
        return (*self.resumed, *(c.ratio for c in self.counted))

    @property
    def counted(self) -> tuple[LoadCheck, ...]:
        """The checks that count: every one not caught up."""
        # A miss is caught up when some load sized after its outcome (made at or after its check)
        # proved enough: the latest such sizing decides for all of them at once.
        enough = [c.made for c in self.checks if c.ratio <= 1]
        proven = max(enough) if enough else None
        return tuple(c for c in self.checks if not self._caught_up(c, proven))

    def missed(self, now: float) -> bool:
        """Whether a load checked at ``now`` was short of what arrived (``arrived > sized``)."""
        return any(c.ratio > 1 for c in self.checks if c.checked == now)

    def _caught_up(self, miss: LoadCheck, proven: float | None) -> bool:
        if miss.ratio <= 1 or self.latest is None or proven is None:
            return False
        if self.latest < math.sqrt(miss.arrived * miss.sized):
            return False  # the traffic left the level the miss showed: a swing, not a shift
        return proven >= miss.checked

    def upper(self, q: float, prior: float, prior_weight: float, at: float | None = None) -> float:
        """The ``q``-quantile of what arrives over what is sized, shrunk towards ``prior`` (as
        ``ErrorRatios.upper``), for a load of ``at`` tokens/s sized now (``None``: at any level).

        A ratio measured at one level is not the error at another: on traffic that comes and goes
        within a cold start (Azure's code trace), a lull's forecast of 0.5 requests/s was followed
        by bursts of 4-6, ratios of x5-10, and the q0.9 of them multiplied a burst's own 5/s into
        25/s (151 replicas where the oracle ran 30). So the quantile is of the arrived load *given*
        the sized one, ``level_upper``, and it rests on the checks near that level, the prior
        standing in for the rest; where the sized loads all sat at one level it is the quantile of
        the ratios, as before. With no headroom (no width to tell levels by) it is the ratios'.
        """
        counted = self.counted
        width = math.log(prior) if prior > 1 else 0.0
        if at is None or not (at > 0 and math.isfinite(at)) or self.resumed or not counted or width <= 0:
            return ErrorRatios(ratios=self.ratios).upper(q, prior, prior_weight)
        pairs = tuple((c.sized, c.arrived) for c in counted)
        return level_cover(pairs, q, prior, prior_weight, width).at(at) / at


@dataclass(frozen=True, slots=True)
class LevelCover:
    """The load to size for, by the load sized: at each level checked, the level times its margin
    (``level_upper`` shrunk towards the prior by the weight of the checks near it), made
    non-decreasing (more load is never covered by less: a lull's sizing covers the burst that
    followed lulls, and a sizing above it at least that much), and read between levels
    geometrically. Below the lowest and above the highest the nearest level's margin carries on."""

    levels: tuple[float, ...]
    covers: tuple[float, ...]
    #: The highest level's own margin, which carries on above it.
    last_margin: float = 1.0

    def at(self, load: float) -> float:
        levels, covers = self.levels, self.covers
        if load <= levels[0]:
            return load * covers[0] / levels[0]
        if load >= levels[-1]:
            return max(covers[-1], load * self.last_margin)
        k = bisect.bisect_right(levels, load) - 1
        share = math.log(load / levels[k]) / math.log(levels[k + 1] / levels[k])
        return covers[k] * math.pow(covers[k + 1] / covers[k], share)


@functools.lru_cache(maxsize=8)
def level_cover(
    pairs: tuple[tuple[float, float], ...], q: float, prior: float, prior_weight: float, width: float
) -> LevelCover:
    """``LevelCover`` from (sized, arrived) pairs; memoized, since one decision reads it for the
    load, the queue it carries and the prediction alike."""
    levels = sorted({s for s, _ in pairs})
    margins = []
    for level in levels:
        measured, n = level_upper(pairs, level, q, width=width)
        margins.append(shrunk(measured, n, prior, prior_weight))
    covers = list(itertools.accumulate((lv * m for lv, m in zip(levels, margins, strict=True)), max))
    return LevelCover(tuple(levels), tuple(covers), margins[-1])


def level_upper(
    pairs: Sequence[tuple[float, float]], at: float, q: float, *, width: float
) -> tuple[float, float]:
    """The ``q``-quantile of arrived / sized over (sized, arrived) pairs, each weighed by how near
    its sized load is to ``at``, and the weight in all (the checks it rests on).

    The weight is a Gaussian in the logs of the sized loads, ``width`` wide (the policy passes the
    prior's own ln(1 + headroom): sizings within the spare capacity the operator keeps of each other
    are alike). Where the traffic follows the sizing (a ramp, noise about a level) every sizing has
    the same ratio and this is the ratios' quantile; where it comes and goes faster than a cold
    start, a burst's sizing is judged by what followed bursts and a lull's by what followed lulls.
    A global line through the logs was tried first: it read a step down (sized 13/s, then 4.5/s
    arrived) as lulls followed by more than they were sized for, and doubled the margin there.
    Beyond the sized loads seen nothing is known of the level: ``at`` is taken as the nearest seen,
    so a step above every sizing is covered by the ratios of the highest, as by all the ratios.
    """
    logs = [math.log(s) for s, _ in pairs]
    x = min(max(math.log(at), min(logs)), max(logs))
    near = (math.exp(-0.5 * ((lg - x) / width) ** 2) for lg in logs)
    weighted = sorted((a / s, w) for (s, a), w in zip(pairs, near, strict=True))
    total = sum(w for _, w in weighted)
    running = 0.0
    for ratio, weight in weighted:
        running += weight
        if running > q * total:
            return ratio, total
    return weighted[-1][0], total


@dataclass(frozen=True, slots=True)
class Calibration:
    """The load ratio and the two p90 ratios (see the module docstring)."""

    load: LoadChecks = LoadChecks()
    ttft: ErrorRatios = ErrorRatios()
    tpot: ErrorRatios = ErrorRatios()

    def model_checked(
        self,
        predicted_ttft: float,
        predicted_tpot: float,
        ttft: float | None,
        tpot: float | None,
        *,
        sized: bool = True,
    ) -> Calibration:
        """A window's observed p90s against what the model predicted for it beforehand.

        ``sized=False``: the window carried more than the fleet had been sized for (see the module
        docstring); a p90 above the prediction is then the load's miss, not the model's, and is
        not counted. A p90 at or below it counts either way: the model held even there.
        """
        return Calibration(
            self.load,
            self.ttft.predicted(0.0, predicted_ttft).observed(0.0, ttft, misses=sized),
            self.tpot.predicted(0.0, predicted_tpot).observed(0.0, tpot, misses=sized),
        )

    def rebased(self, ttft: float, tpot: float) -> Calibration:
        """The p90 ratios against the model as it now predicts: ``ttft`` and ``tpot`` are the old
        prediction over the new one where the model just learned, and every ratio kept is
        multiplied by them (observed / new = observed / old x old / new).

        A ratio measures the model it was checked against. Kept unchanged after the model learned
        better, the errors of a model that no longer exists hold the margins for the half hour of
        ``KEEP`` checks: a reasoning fleet whose first windows taught a too-fast engine (p90 TPOT
        predicted 25 ms, 46 observed) sized for TPOT / 1.57 for 30 minutes after the model had
        converged, at 2.5x the oracle's fleet. One point stands in for all, an idle replica's: the
        model moves mostly by its speed, which scales every prediction alike there, while near the
        knee one small step of the speed moves a loaded prediction many-fold (rebased at each
        window's own rate, long-context traffic bought 40 % more replica-hours).
        """
        if not all(f > 0 and math.isfinite(f) for f in (ttft, tpot)):
            return self
        return Calibration(
            self.load,
            ErrorRatios(self.ttft.pending, tuple(r * ttft for r in self.ttft.ratios)),
            ErrorRatios(self.tpot.pending, tuple(r * tpot for r in self.tpot.ratios)),
        )

    def margins(
        self, q: float, headroom: float, prior_weight: float, at: float | None = None
    ) -> tuple[float, float, float]:
        """(load ×, TTFT ÷, TPOT ÷) the sizing applies: the p90 ratios never below 1 (the model's
        own prediction is the least the fleet is sized for) nor above ``MAX_LATENCY_RATIO``. The
        load's is for a load of ``at`` tokens/s (``LoadChecks.upper``).

        A step in the traffic (forecasts missing 3x for a few minutes) counts until the loads sized
        at the new level prove enough while it holds (``LoadChecks``), one horizon after the step;
        a swing counts for ``LOAD_KEEP_HORIZONS`` cold starts, the memory of the load ratios.
        """

        def latency(ratios: ErrorRatios) -> float:
            return min(MAX_LATENCY_RATIO, max(1.0, ratios.upper(q, 1.0, prior_weight)))

        load = max(1.0, self.load.upper(q, 1 + headroom, prior_weight, at))
        return load, latency(self.ttft), latency(self.tpot)

    def describe(self, q: float, headroom: float, prior_weight: float, at: float | None = None) -> str:
        load, ttft, tpot = self.margins(q, headroom, prior_weight, at)
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

        def ratios(name: str) -> tuple[float, ...]:
            values = tuple(float(v) for v in data.get(name, ()))
            if not all(v > 0 and math.isfinite(v) for v in values):
                raise ValueError(f"calibration.{name}: every ratio must be a positive finite number")
            return values[-KEEP:]

        return cls(
            LoadChecks(resumed=ratios("load")),
            ErrorRatios((), ratios("ttft")),
            ErrorRatios((), ratios("tpot")),
        )
