"""A seasonal forecast of one positive series (arrival or token rate, request mix), with an error band.

Inference traffic repeats: a day shape, a week shape, on top of a level that drifts. Whether that
helps one cold start ahead depends on the traffic: on a smooth daily curve the shape is most of
the answer; on ServeGen's production aggregate the next minutes are mostly a few large clients'
bursts, and the rate a cold start from now is barely better known than "what it is now". So the
forecast does not assume which it is. It keeps five simple forecasts (``candidates``:
persistence, persistence with a fitted reversion of the last change, the daily profile, last
week's same day, the daily profile with a trend), scores
each on every bin it has seen (what it *would* have forecast one horizon earlier), and combines
them weighted by their recent skill (exponential weights on their mean absolute log error over
about a day, robust to the odd outage bin; a candidate 5 % worse than the best weighs e⁻¹): on
traffic with a shape the profile takes over, on traffic without one the forecast falls back
toward persistence instead of being worse than it. That is the classic forecast combination
(Bates–Granger), which a reader can check by hand (``combination``: the weights, their mean, and
the weighted quantile the sizing reads).

What the sizing needs is not the mean rate a cold start ahead but a rate it will rarely exceed:
``upper`` is the combined forecast × the ``band_quantile`` of the combination's own log
residuals at the same time of day (±``band_halfwidth_bins``) over the last ``band_days`` days,
plus an offset that an online conformal step (adaptive conformal inference: +``band_step`` ×
(missed − (1 − q)) per scored bin) moves until the band is exceeded 1 − q of the time, whatever
the residuals' drift. The band can be wide where the traffic is bursty and narrow where it is
calm, which a fixed headroom cannot. ``None`` until enough residuals exist. (On ServeGen it is
calibrated, exceeded 10.0 % of the time, but no cheaper than a fixed headroom picked with
hindsight: ``benchmarks days``.)

* **History** (``history.BinnedHistory``): observations averaged into ``bin_s`` (5-minute) bins,
  ``days_kept`` days; missing bins stay missing.
* **Scoring**: when bin ``j`` closes, each candidate's forecast of it made at the end of bin
  ``j - lead_bins`` (``lead_bins = 1 + floor(horizon_s / bin_s)``: a live forecast one cold start
  ahead is made part-way through a bin, so the scored lead is at least the horizon) is compared
  with what came. The combination's weights at that time are the skills as of bin ``j - 1``.
* **Known events** (a launch at 18:00): the forecast for a time inside one is multiplied by its
  factor, and observations inside one are stored divided by it, so the event leaks into neither
  the level nor what later days learn.

Until ``min_days`` of history exist there is no forecast (``None``): the caller's reactive path
decides alone.

**API** (used by the policy and the controller's bootstrap; stable):

* ``SeasonalForecast(config)``; ``observe(t, value)`` and ``observe_many(samples)`` return a new
  forecaster (``None``, NaN, infinite or negative values are ignored, late samples of a closed bin
  dropped); ``bootstrapped(samples)`` is ``observe_many`` under the name a start-up reads best
  with (the last days from the metrics store: the same quantity, in the same unit, as what is
  observed live).
* ``with_events(events)`` → the forecaster told of ``KnownEvent(start, end, factor)``s (Unix or
  trace seconds, whichever the observations use).
* ``ahead(now, horizon_s)`` → the expected value at ``now + horizon_s``; ``upper(now, horizon_s)``
  → the band's top; both ``None`` when unknown. ``weights()`` says which candidates it trusts.

Pure value type; updates cost O(1) except once per bin (one scoring and a tuple copy).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from fleetslo.policy.forecast import candidates as cand
from fleetslo.policy.forecast import combination
from fleetslo.policy.forecast.combination import Skill
from fleetslo.policy.forecast.history import BinnedHistory

DAY_S = 86_400.0
#: The calibration never moves the band by more than e^1 either way.
_MAX_OFFSET = 1.0
#: Σ x² of the level's changes below which φ is not fitted (a flat history has no changes).
_MIN_CHANGE_VARIANCE = 1e-3
#: The ``reverting`` candidate extrapolates a change of at most this many root-mean-square changes
#: of its fit: a least-squares line is known over the spread of x it was fitted on, and three
#: standard deviations hold nearly all of a spread. Beyond, a step on smooth traffic (fitted φ 1.0
#: on changes of 1-3 %) was extrapolated whole a second time: x2.3 five minutes after a x2.5 step.
_REACH_RMS = 3.0


@dataclass(frozen=True, slots=True)
class KnownEvent:
    """Traffic expected at ``factor`` × its usual level over [start, end) (Unix or trace seconds)."""

    start: float
    end: float
    factor: float


@dataclass(frozen=True, slots=True)
class SeasonalConfig:
    bin_s: float = 300.0
    days_kept: int = 15
    #: Days of history before any forecast is made.
    min_days: float = 1.0
    profile_days: int = 7
    level_bins: int = 6
    #: The level is the recent bins, most recent weighted most (half a bin: mostly the newest).
    level_half_life_bins: float = 0.5
    trend_damping: float = 0.5
    #: The trend factor stays within [1/max_level, max_level].
    max_level: float = 4.0
    #: The horizon the forecaster scores itself at: one cold start.
    horizon_s: float = 300.0
    #: The candidates combined (a subset of ``cand.NAMES``).
    candidates: tuple[str, ...] = cand.NAMES
    #: Half-life, in bins, of each candidate's mean absolute log error (a day).
    skill_half_life_bins: float = 288.0
    #: Scored bins a candidate needs before its skill weighs it (until then: equal weights).
    min_scored: int = 12
    #: How sharply skill decides: a candidate this much worse (relative) than the best weighs e⁻¹.
    skill_temperature: float = 0.05
    band_quantile: float = 0.9
    band_days: int = 7
    band_halfwidth_bins: int = 6
    min_band_samples: int = 24
    #: Step of the band's calibration (adaptive conformal inference: log units per scored bin).
    band_step: float = 0.01

    def __post_init__(self) -> None:
        checks = (
            ("bin_s", self.bin_s > 0 and DAY_S % self.bin_s == 0, "> 0 and divide a day"),
            ("days_kept", self.days_kept >= max(1, self.min_days), ">= min_days"),
            ("profile_days", self.profile_days >= 1, ">= 1"),
            ("level_bins", self.level_bins >= 1, ">= 1"),
            ("level_half_life_bins", self.level_half_life_bins > 0, "> 0"),
            ("trend_damping", 0 <= self.trend_damping <= 1, "in [0, 1]"),
            ("max_level", self.max_level >= 1, ">= 1"),
            ("horizon_s", self.horizon_s >= 0, ">= 0"),
            ("candidates", bool(self.candidates) and set(self.candidates) <= set(cand.NAMES),
             f"a non-empty subset of {cand.NAMES}"),
            ("skill_half_life_bins", self.skill_half_life_bins > 0, "> 0"),
            ("skill_temperature", self.skill_temperature > 0, "> 0"),
            ("band_quantile", 0.5 <= self.band_quantile < 1, "in [0.5, 1)"),
            ("band_days", self.band_days >= 1, ">= 1"),
            ("band_halfwidth_bins", self.band_halfwidth_bins >= 0, ">= 0"),
            ("min_band_samples", self.min_band_samples >= 1, ">= 1"),
            ("band_step", 0 <= self.band_step <= 0.5, "in [0, 0.5]"),
        )  # fmt: skip
        bad = [f"{name} must be {rule}" for name, ok, rule in checks if not ok]
        if bad:
            raise ValueError("; ".join(bad))

    @property
    def day_bins(self) -> int:
        return int(DAY_S / self.bin_s)

    @property
    def lead_bins(self) -> int:
        return 1 + math.floor(self.horizon_s / self.bin_s)

    @property
    def shape(self) -> cand.Shape:
        return cand.Shape(
            self.day_bins, self.profile_days, self.level_bins, self.level_half_life_bins,
            self.trend_damping, self.max_level,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class SeasonalForecast:
    """Binned history of one series, the candidates' skills and the combination's residuals."""

    config: SeasonalConfig = field(default_factory=SeasonalConfig)
    events: tuple[KnownEvent, ...] = ()
    history: BinnedHistory | None = None
    skills: tuple[Skill, ...] = ()
    #: Log residual (log actual / combined forecast) of each bin of ``history.bins``; None if unscored.
    residuals: tuple[float | None, ...] = ()
    #: Added to the band's log spread, so that it is exceeded 1 - ``band_quantile`` of the time.
    band_offset: float = 0.0
    #: Decayed sums (Σ x·y, Σ x², Σ 1) of the level's change x and the change that followed y: the
    #: least-squares φ of the ``reverting`` candidate, and the spread of x it was fitted on.
    reversion: tuple[float, float, float] = (0.0, 0.0, 0.0)

    # --- learning ---------------------------------------------------------------------------

    def observe(self, t: float, value: float | None) -> SeasonalForecast:
        """Add one observation (``None`` or a non-finite/negative value is ignored)."""
        return self.observe_many(((t, value),))

    def observe_many(self, samples: Iterable[tuple[float, float | None]]) -> SeasonalForecast:
        """Fold samples in, in time order (one tuple copy for the lot)."""
        clean = [
            (t, v / self.event_factor(t)) for t, v in samples if v is not None and math.isfinite(v) and v >= 0
        ]
        if not clean:
            return self
        history, closed = self._history().add(clean)
        if not closed:
            return replace(self, history=history)
        return self._scored(history, closed)

    def bootstrapped(self, samples: Iterable[tuple[float, float | None]]) -> SeasonalForecast:
        """The forecaster with a stored history folded in (see the module docstring)."""
        return self.observe_many(samples)

    def with_events(self, events: Sequence[KnownEvent]) -> SeasonalForecast:
        return replace(self, events=tuple(events))

    # --- forecasting ------------------------------------------------------------------------

    @property
    def bins(self) -> tuple[float | None, ...]:
        return self._history().bins

    def ready(self) -> bool:
        return len(self.bins) >= self.config.min_days * self.config.day_bins

    def ahead(self, now: float, horizon_s: float, q: float | None = None) -> float | None:
        """The value expected at ``now + horizon_s``; None before ``min_days`` of history.

        The candidates' skill-weighted mean; with ``q``, their weighted ``q``-quantile instead: the
        weights read as how plausible each candidate is, so where they disagree (yesterday's 09:00
        surge against persistence, on the second day, before either has earned the weight) the
        higher forecast is covered while it holds at least ``1 − q`` of the weight. Where they
        agree, the same as the mean."""
        if not self.ready():
            return None
        history, cfg = self._history(), self.config
        now_bin, target = history.bin_of(now), now + horizon_s
        cur = history.current
        current = history.current_mean() if cur is not None and cur[0] == now_bin else None
        found = cand.forecasts(
            history, cfg.shape, now_bin, history.bin_of(target),
            horizon_s=horizon_s, bin_s=cfg.bin_s, current=current, reversion=self._reversion(),
        )  # fmt: skip
        combined = self._combine(found, q)
        return None if combined is None else combined * self.event_factor(target)

    def upper(self, now: float, horizon_s: float) -> float | None:
        """The ``band_quantile`` of the value at ``now + horizon_s`` (None without enough residuals)."""
        point = self.ahead(now, horizon_s)
        if point is None:
            return None
        spread = self.band(self._history().bin_of(now + horizon_s))
        return None if spread is None else point * math.exp(spread)

    def band(self, target_bin: int) -> float | None:
        """The log spread of the band at ``target_bin``: the ``band_quantile`` of the residuals
        around its time of day on past days, plus the calibration offset; None with too few."""
        first = self._history().first_bin
        if first is None:
            return None
        spread = _band(self.residuals, first, target_bin, self.config)
        return None if spread is None else spread + self.band_offset

    def weights(self) -> dict[str, float]:
        """Each candidate's weight in the combination now (equal until each has been scored enough)."""
        raw = self._raw_weights(self.config.candidates)
        total = sum(raw.values())
        return {name: w / total for name, w in raw.items()}

    def profile(self, b: int) -> float | None:
        """The typical value of bin ``b``: the median of the same time over the last days."""
        return cand.profile(self._history(), self.config.shape, b)

    # --- scoring ----------------------------------------------------------------------------

    def _scored(self, history: BinnedHistory, closed: list[int]) -> SeasonalForecast:
        """``history`` with each newly closed bin scored, oldest first."""
        cfg = self.config
        assert history.first_bin is not None
        state = self
        residuals = list(self.residuals)
        # the residuals follow the bins: the same start, the same forgetting (trimmed at the end)
        first = history.first_bin - (len(residuals) + len(closed) - len(history.bins))
        offset = self.band_offset
        for b in closed:
            then = b - cfg.lead_bins
            found = cand.forecasts(
                history, cfg.shape, then, b,
                horizon_s=cfg.horizon_s, bin_s=cfg.bin_s, reversion=state._reversion(),
            )  # fmt: skip
            actual = history.value(b)
            state = state._fitted_reversion(history, then, actual, found.get("persistence"))
            # the band is the seasonal forecast's error: bins before it had a day to learn from
            # (persistence alone) would make it the error of another forecaster
            seasonal = len(found) > 1
            residual = _log_error(actual, state._combine(found)) if seasonal else None
            spread = _band(residuals, first, b, cfg)
            if residual is not None and spread is not None:
                # adaptive calibration: nudge the band until it is exceeded 1 - q of the time
                missed = residual > spread + offset
                offset += cfg.band_step * (missed - (1 - cfg.band_quantile))
                offset = min(max(offset, -_MAX_OFFSET), _MAX_OFFSET)
            residuals.append(residual)
            state = replace(state, skills=state._updated_skills(found, actual))
        dropped = len(residuals) - len(history.bins)
        return replace(state, history=history, residuals=tuple(residuals[dropped:]), band_offset=offset)

    def _reversion(self) -> tuple[float, int, float] | None:
        """(φ, lag, reach) of the ``reverting`` candidate, reach the largest change it extrapolates
        (``_REACH_RMS`` root-mean-square changes of its fit); None until the fit has something."""
        xy, xx, n = self.reversion
        if xx < _MIN_CHANGE_VARIANCE or n <= 0:
            return None
        return min(max(xy / xx, -1.0), 1.0), self.config.lead_bins, _REACH_RMS * math.sqrt(xx / n)

    def _fitted_reversion(
        self, history: BinnedHistory, then: int, actual: float | None, level: float | None
    ) -> SeasonalForecast:
        """The least-squares sums with this bin's pair: (the level's change up to ``then``, the
        change from the level at ``then`` to ``actual``)."""
        if actual is None or level is None or actual <= 0 or level <= 0:
            return self
        moved = cand.change(history, self.config.shape, then, self.config.lead_bins, level)
        if moved is None:
            return self
        followed = math.log(actual / level)
        decay = math.pow(0.5, 1 / self.config.skill_half_life_bins)
        xy, xx, n = self.reversion
        return replace(
            self, reversion=(decay * xy + moved * followed, decay * xx + moved * moved, decay * n + 1)
        )

    def _updated_skills(self, found: dict[str, float], actual: float | None) -> tuple[Skill, ...]:
        decay = math.pow(0.5, 1 / self.config.skill_half_life_bins)
        out = []
        for i, name in enumerate(self.config.candidates):
            skill = self.skills[i] if i < len(self.skills) else Skill()
            error = _log_error(actual, found.get(name))
            if error is not None:
                skill = skill.scoring(error, decay)
            out.append(skill)
        return tuple(out)

    def _raw_weights(self, names: Iterable[str]) -> dict[str, float]:
        """The candidates' weights from their skills (``combination.weights``)."""
        index = {name: i for i, name in enumerate(self.config.candidates)}
        skills = {n: self.skills[index[n]] if index[n] < len(self.skills) else Skill() for n in names}
        cfg = self.config
        return combination.weights(skills, min_scored=cfg.min_scored, temperature=cfg.skill_temperature)

    def _combine(self, found: dict[str, float], q: float | None = None) -> float | None:
        """The weighted mean of the candidates' forecasts, or with ``q`` their weighted quantile."""
        usable = [n for n in self.config.candidates if n in found]
        if not usable:
            return None
        weights = self._raw_weights(usable)
        return combination.mean(found, weights) if q is None else combination.quantile(found, weights, q)

    # --- plumbing ---------------------------------------------------------------------------

    def _history(self) -> BinnedHistory:
        if self.history is not None:
            return self.history
        return BinnedHistory(self.config.bin_s, self.config.days_kept * self.config.day_bins)

    def event_factor(self, t: float) -> float:
        """The product of the known events' factors at ``t`` (1 outside every event); known from
        the spec, so it applies from the first minute, before any history."""
        factor = 1.0
        for e in self.events:
            if e.start <= t < e.end:
                factor *= e.factor
        return factor


def _band(
    residuals: Sequence[float | None], first_bin: int, target_bin: int, cfg: SeasonalConfig
) -> float | None:
    """The ``band_quantile`` of the residuals (``residuals[0]`` is bin ``first_bin``) within
    ``band_halfwidth_bins`` of the target's time of day over the last ``band_days`` days."""
    near = []
    for d in range(1, cfg.band_days + 1):
        centre = target_bin - d * cfg.day_bins - first_bin
        for i in range(max(0, centre - cfg.band_halfwidth_bins), centre + cfg.band_halfwidth_bins + 1):
            if i < len(residuals) and (r := residuals[i]) is not None:
                near.append(r)
    return _quantile(near, cfg.band_quantile) if len(near) >= cfg.min_band_samples else None


def _log_error(actual: float | None, predicted: float | None) -> float | None:
    """log(actual / predicted); None where either is missing or not positive (no ratio to score)."""
    if actual is None or predicted is None or actual <= 0 or predicted <= 0:
        return None
    return math.log(actual / predicted)


def _quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile, linearly interpolated between order statistics."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
