"""Windowed latency and SLO signals of one vLLM server, derived from reset-corrected totals.

Pure: takes the history the tracker keeps and the SLO thresholds, returns values. A signal that
cannot be computed (no traffic in the window, history shorter than the window) is ``None`` and
the collector leaves it out; it is never reported as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller import conventions as cv
from controller.metrics.histogram import Fraction
from controller.metrics.window import SnapshotRing, WindowDelta, between
from controller.model import Quantiles

#: Reset-corrected running totals of every model on the page at one scrape.
Totals = Mapping[str, WindowDelta]


@dataclass(frozen=True, slots=True)
class SloThresholds:
    """Thresholds for the attainment ratios; ``None`` disables that ratio."""

    ttft: float | None = None
    tpot: float | None = None


@dataclass(frozen=True, slots=True)
class WindowSignals:
    """What one model's server did over one window."""

    model_name: str
    window: float
    seconds: float
    ttft: Quantiles
    itl: Quantiles
    tpot: Quantiles
    ttft_attainment: Fraction | None
    tpot_attainment: Fraction | None
    requests: float | None
    requests_per_second: float | None
    generation_tokens_per_second: float | None


def derive(
    ring: SnapshotRing[Totals], windows: Sequence[float], tolerance: float, slo: SloThresholds
) -> list[WindowSignals]:
    """Signals for every model on the newest page and every window that has a start point."""
    newest = ring.newest()
    if newest is None:
        return []
    out = []
    for window in windows:
        start = ring.start_of(window, tolerance)
        if start is None:
            continue
        elapsed = newest[0] - start[0]
        for model, total in newest[1].items():
            before = start[1].get(model)
            if before is None:
                continue
            d = between(total, before)
            # Totals restart when a model vanishes and comes back; then the two ends are not
            # from one continuous history and their difference means nothing.
            if abs(d.seconds - elapsed) <= tolerance:
                out.append(_signals(model, window, d, slo))
    return out


def _signals(model: str, window: float, d: WindowDelta, slo: SloThresholds) -> WindowSignals:
    finished = d.increase(cv.Counter.REQUEST_SUCCESS)
    if finished is None:
        # Pages without request_success (very old vLLM) still count finished requests in e2e.
        finished = d.observations(cv.Histogram.E2E)
    rps = None if finished is None or d.seconds <= 0 else finished / d.seconds
    return WindowSignals(
        model_name=model,
        window=window,
        seconds=d.seconds,
        ttft=d.quantiles(cv.Histogram.TTFT),
        itl=d.quantiles(cv.Histogram.ITL),
        tpot=d.quantiles(cv.Histogram.TPOT),
        ttft_attainment=None if slo.ttft is None else d.attainment(cv.Histogram.TTFT, slo.ttft),
        tpot_attainment=None if slo.tpot is None else d.attainment(cv.Histogram.TPOT, slo.tpot),
        requests=finished,
        requests_per_second=rps,
        generation_tokens_per_second=d.rate(cv.Counter.GENERATION_TOKENS),
    )
