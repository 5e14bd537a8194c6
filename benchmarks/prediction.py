"""The model-quality report of issue 13: how far the p90s fleetslo predicted behind each steady-state
decision were from what the next window showed, beside the laziest predictor there is (the last
window's p90s), which is the metric's own noise floor."""

from __future__ import annotations

import math
from typing import Any

from fleetslo.sim.result_types import DecisionRecord, SimResult

#: A prediction is "within" when both p90s are within this share of what the next window saw.
PREDICTION_BAND = 0.2


def prediction_errors(result: SimResult) -> dict[str, Any] | None:
    """Relative errors of the steady-state decisions' predicted p90s against what the following
    window showed: the controller's own observation one window later (what it can check itself,
    bucket-interpolated) and the judge's exact p90s of that window."""
    windows = {w.start_s: w for w in result.windows}
    decisions = {d.t_s: d for d in result.decisions}
    seen: list[tuple[float, float]] = []
    exact: list[tuple[float, float]] = []
    # The noise floor of the metric: the last window's observed p90s taken as the prediction
    # (persistence), on the same decisions. A minute's p90 TTFT rests on that minute's longest
    # prompts; where persistence is no closer than the model, no predictor of the mix does better.
    persistence: list[tuple[float, float]] = []
    for d in decisions.values():
        if d.predicted_ttft_s is None or d.predicted_tpot_s is None or d.t_s < 300:
            continue
        later = decisions.get(d.t_s + 60.0)
        if later is None or d.starting or later.starting:
            continue
        if not d.ready == d.replicas == later.ready == later.replicas:
            continue  # the fleet changed: the next window is not the one predicted
        if later.observed_ttft_s and later.observed_tpot_s:
            seen.append(_errors(d, later.observed_ttft_s, later.observed_tpot_s))
            if d.observed_ttft_s and d.observed_tpot_s:
                persistence.append(
                    (
                        abs(d.observed_ttft_s - later.observed_ttft_s) / later.observed_ttft_s,
                        abs(d.observed_tpot_s - later.observed_tpot_s) / later.observed_tpot_s,
                    )
                )
        w = windows.get(math.ceil(d.t_s / 60.0) * 60.0)
        if w is not None and w.p90_ttft_s and w.p90_tpot_s:
            exact.append(_errors(d, w.p90_ttft_s, w.p90_tpot_s))
    if not seen:
        return None
    return {
        "decisions": len(seen), **_shares(seen), "exact": _shares(exact) if exact else None,
        "persistence": _shares(persistence) if persistence else None,
    }  # fmt: skip


def _errors(d: DecisionRecord, ttft: float, tpot: float) -> tuple[float, float]:
    return abs(d.predicted_ttft_s - ttft) / ttft, abs(d.predicted_tpot_s - tpot) / tpot


def _shares(errors: list[tuple[float, float]]) -> dict[str, Any]:
    def quantiles(values: list[float]) -> list[float]:
        ordered = sorted(values)
        return [round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3) for q in (0.5, 0.8, 0.95)]

    n = len(errors)
    return {
        "within": sum(max(e) <= PREDICTION_BAND for e in errors) / n,
        "ttft_within": sum(e[0] <= PREDICTION_BAND for e in errors) / n,
        "tpot_within": sum(e[1] <= PREDICTION_BAND for e in errors) / n,
        "ttft_error_p50_p80_p95": quantiles([e[0] for e in errors]),
        "tpot_error_p50_p80_p95": quantiles([e[1] for e in errors]),
    }
