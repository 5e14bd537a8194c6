"""The forecast side of ``benchmarks days``: the seasonal forecast against the classic baselines.

Scored on ServeGen m-small's aggregate rate (10-minute windows, the data's own resolution, so one
window ahead is the shortest horizon the data can say anything about: longer than a cold start),
fitted or warmed up on days 1-7 and scored on days 8-14, per day of the target time:

* **persistence**: the rate now (what a reactive controller assumes);
* **seasonal naive**: the same time yesterday, and the same time last week;
* **Holt-Winters**: additive level, damped trend and daily season on the log rate (an ETS
  model), its three smoothing constants chosen by grid search on days 3-7;
* **ARIMA(p,1,0)**: an autoregression of order 1-3 on the log rate's differences, least squares
  on days 1-7;
* **fleetslo's seasonal forecast** (``fleetslo.policy.forecast``), learning online as in the
  policy, and its calibrated band: how often the rate came in above the band's top (target
  ``1 - band_quantile``) and what the band cost (its top / the rate that came), against a fixed
  headroom on persistence set, with hindsight, to the same coverage.

And why nothing does much better: the autocorrelation of the log rate's 10-minute changes. A
change that cannot be told from the changes before it (lag-1 autocorrelation ρ) leaves any linear
forecast from the past at least √(1 - ρ²) of persistence's error.

Windows with a zero rate (gaps in the data) now or next are not scored, for any forecaster (no
percentage error of 0, and no forecaster is excused a hard window another is scored on); they are
counted. A forecaster that gives no forecast for a scored window is scored 100 % there.
Pure Python (the package has no numpy).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fleetslo.policy.forecast import SeasonalForecast

DAY = 144  # 10-minute windows a day
WINDOW_S = 600.0
Predictor = Callable[[int], float | None]  # forecast of window k + 1 made at the end of window k


@dataclass(frozen=True)
class Scored:
    name: str
    per_day: list[float | None]  # MAPE % for days 8..14
    overall: float | None


def mape_per_day(rates: Sequence[float], predict: Predictor, days: range) -> Scored:
    per_day: list[float | None] = []
    everything: list[float] = []
    for d in days:
        errors = []
        for k in range(d * DAY - 1, (d + 1) * DAY - 1):
            if rates[k] <= 0 or rates[k + 1] <= 0:
                continue  # a gap now or next: every forecaster is scored on the same windows
            actual, predicted = rates[k + 1], predict(k)
            errors.append(1.0 if predicted is None else abs(predicted - actual) / actual)
        per_day.append(100 * statistics.fmean(errors) if errors else None)
        everything += errors
    return Scored("", per_day, 100 * statistics.fmean(everything) if everything else None)


def _logs(rates: Sequence[float]) -> list[float | None]:
    return [math.log(r) if r > 0 else None for r in rates]


def arima(rates: Sequence[float], p: int, train_end: int) -> Predictor:
    """ARIMA(p,1,0) on the log rate: d_k = Σ a_i d_{k-i} + c, least squares on windows < train_end."""
    logs = _logs(rates)
    diffs = [None if a is None or b is None else b - a for a, b in itertools.pairwise(logs)]
    rows, ys = [], []
    for k in range(p, train_end - 1):
        lagged = [diffs[k - i - 1] for i in range(p)]
        y = diffs[k]
        if y is not None and all(v is not None for v in lagged):
            rows.append([*(v for v in lagged if v is not None), 1.0])
            ys.append(y)
    coef = _least_squares(rows, ys)

    def predict(k: int) -> float | None:
        now = logs[k]
        if now is None:
            return None
        lagged = [diffs[k - i - 1] if k - i - 1 >= 0 else None for i in range(p)]
        change = coef[-1] + sum(c * (v or 0.0) for c, v in zip(coef, lagged, strict=False))
        return math.exp(now + change)

    return predict


def holt_winters(rates: Sequence[float], tune: range) -> tuple[Predictor, tuple[float, float, float]]:
    """Additive Holt-Winters (damped trend, daily season) on the log rate; constants by grid search."""
    best: tuple[float, tuple[float, float, float]] | None = None
    for alpha in (0.3, 0.5, 0.7, 0.9):
        for beta in (0.0, 0.05, 0.2):
            for gamma in (0.05, 0.1, 0.2, 0.4):
                forecasts = _holt_winters_run(rates, alpha, beta, gamma)
                err = [abs(math.exp(f) - rates[k]) / rates[k] for k in tune
                       if rates[k] > 0 and (f := forecasts[k]) is not None]  # fmt: skip
                score = statistics.fmean(err)
                if best is None or score < best[0]:
                    best = (score, (alpha, beta, gamma))
    assert best is not None
    chosen = best[1]
    forecasts = _holt_winters_run(rates, *chosen)

    def predict(k: int) -> float | None:
        f = forecasts[k + 1] if k + 1 < len(forecasts) else None
        return None if f is None else math.exp(f)

    return predict, chosen


def _holt_winters_run(
    rates: Sequence[float], alpha: float, beta: float, gamma: float, phi: float = 0.98
) -> list[float | None]:
    """One-step-ahead log forecasts: entry k is the forecast of window k made at the end of k - 1."""
    logs = _logs(rates)
    first = [v for v in logs[:DAY] if v is not None]
    level, trend = statistics.fmean(first), 0.0
    season = [(v - level) if v is not None else 0.0 for v in logs[:DAY]]
    out: list[float | None] = [None] * DAY
    for k in range(DAY, len(logs)):
        s = season[k - DAY]
        out.append(level + phi * trend + s)
        x = logs[k]
        if x is None:  # a gap: carry the state over it
            season.append(s)
            continue
        previous = level
        level = alpha * (x - s) + (1 - alpha) * (level + phi * trend)
        trend = beta * (level - previous) + (1 - beta) * phi * trend
        season.append(gamma * (x - level) + (1 - gamma) * s)
    return out


def seasonal_online(rates: Sequence[float], forecast: SeasonalForecast) -> tuple[Predictor, Predictor]:
    """The point forecast and band top of fleetslo's forecaster, fed each window as 10 one-minute
    samples (as a controller sees it), asked at the end of each window for the middle of the next."""
    points: dict[int, float | None] = {}
    tops: dict[int, float | None] = {}
    for k, rate in enumerate(rates):
        end = (k + 1) * WINDOW_S
        forecast = forecast.observe_many((k * WINDOW_S + j * 60.0, rate) for j in range(10))
        now = end - 1.0
        points[k] = forecast.ahead(now, WINDOW_S / 2 + 1.0)
        tops[k] = forecast.upper(now, WINDOW_S / 2 + 1.0)
    return points.get, tops.get


def lag_autocorrelation(rates: Sequence[float], lags: Sequence[int]) -> dict[int, float]:
    logs = _logs(rates)
    d = [0.0 if a is None or b is None else b - a for a, b in itertools.pairwise(logs)]
    mean = statistics.fmean(d)
    var = sum((x - mean) ** 2 for x in d)
    return {lag: sum((d[i] - mean) * (d[i + lag] - mean) for i in range(len(d) - lag)) / var for lag in lags}


def band_cost(rates: Sequence[float], tops: Predictor, days: range) -> tuple[float, float, float]:
    """(share of windows above the band's top, mean top / actual, the same mean for persistence ×
    a fixed headroom chosen with hindsight to be exceeded as often)."""
    above, ratio, persistence = [], [], []
    for d in days:
        for k in range(d * DAY - 1, (d + 1) * DAY - 1):
            actual, top = rates[k + 1], tops(k)
            if actual > 0 and top is not None and rates[k] > 0:
                above.append(actual > top)
                ratio.append(top / actual)
                persistence.append(actual / rates[k])
    share = statistics.fmean(above)
    # the fixed headroom with the same share of windows above it: that quantile of actual/now
    ordered = sorted(persistence)
    headroom = ordered[min(len(ordered) - 1, math.ceil((1 - share) * len(ordered)) - 1)]
    fixed = statistics.fmean(headroom / x for x in persistence)
    return share, statistics.fmean(ratio), fixed


def _least_squares(rows: list[list[float]], ys: list[float]) -> list[float]:
    """Normal equations by Gaussian elimination (a handful of unknowns)."""
    n = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(n)] for i in range(n)]
    b = [sum(r[i] * y for r, y in zip(rows, ys, strict=True)) for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        a[col], a[pivot], b[col], b[pivot] = a[pivot], a[col], b[pivot], b[col]
        for r in range(n):
            if r != col and a[col][col] != 0:
                factor = a[r][col] / a[col][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
                b[r] -= factor * b[col]
    return [b[i] / a[i][i] if a[i][i] else 0.0 for i in range(n)]


def compare(rates: Sequence[float]) -> dict[str, object]:
    """Every forecaster's per-day MAPE one window ahead on days 8-14, the band and the ACF."""
    days = range(7, 14)
    train_end = 7 * DAY
    hw, constants = holt_winters(rates, range(2 * DAY, train_end))
    point, top = seasonal_online(rates, SeasonalForecast())
    predictors: dict[str, Predictor] = {
        "persistence": lambda k: rates[k],
        "seasonal naive (yesterday)": lambda k: rates[k + 1 - DAY],
        "seasonal naive (last week)": lambda k: rates[k + 1 - 7 * DAY],
        f"Holt-Winters (α β γ = {constants[0]} {constants[1]} {constants[2]})": hw,
        "ARIMA(1,1,0)": arima(rates, 1, train_end),
        "ARIMA(3,1,0)": arima(rates, 3, train_end),
        "fleetslo seasonal (point)": point,
    }
    scored = {name: mape_per_day(rates, f, days) for name, f in predictors.items()}
    share, cost, fixed = band_cost(rates, top, days)
    zeros = sum(1 for k in range(7 * DAY - 1, len(rates) - 1) if rates[k] <= 0 or rates[k + 1] <= 0)
    return {
        "mape": {n: {"per_day": s.per_day, "overall": s.overall} for n, s in scored.items()},
        "band": {"above_share": share, "top_over_actual": cost, "fixed_headroom_same_share": fixed},
        "acf_of_changes": lag_autocorrelation(rates, (1, 2, 3, 6, DAY, 7 * DAY)),
        "unscored_zero_windows": zeros,
    }


def print_comparison(result: dict[str, object]) -> None:
    mape = result["mape"]
    assert isinstance(mape, dict)
    print("\nforecast one 10-minute window ahead, ServeGen m-small aggregate, MAPE % per day (8-14) | all")
    for name, s in mape.items():
        cells = " ".join("   -" if v is None else f"{v:5.1f}" for v in s["per_day"])
        print(f"  {name:44s} {cells} | {s['overall']:.2f}")
    band = result["band"]
    assert isinstance(band, dict)
    print(
        f"  band (q 0.9): rate above its top in {100 * band['above_share']:.1f} % of windows; top / actual "
        f"{band['top_over_actual']:.3f}, a fixed headroom on persistence as often exceeded "
        f"{band['fixed_headroom_same_share']:.3f}"
    )
    acf = result["acf_of_changes"]
    assert isinstance(acf, dict)
    print("  autocorrelation of the log rate's changes by lag (windows): "
          + ", ".join(f"{lag}: {v:+.3f}" for lag, v in acf.items()))  # fmt: skip
    gaps = result["unscored_zero_windows"]
    print(f"  ({gaps} windows on days 8-14 with a zero rate now or next not scored)")
