"""Windowed latency and SLO signals of one vLLM server, derived from reset-corrected totals.

Pure: takes the history the tracker keeps and the SLO thresholds, returns values. A signal that
cannot be computed (no traffic in the window, history shorter than the window) is ``None`` and
the collector leaves it out; it is never reported as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from fleetslo.core import conventions as cv
from fleetslo.core.histogram import Fraction
from fleetslo.core.metrics.window import SnapshotRing, WindowDelta, between
from fleetslo.core.model import Quantiles
from fleetslo.sidecar.thresholds import SloThresholds

#: Reset-corrected running totals of every model on the page at one scrape.
Totals = Mapping[str, WindowDelta]


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
    #: Where ``ttft``/``tpot`` and their attainment came from (the ``source`` label).
    ttft_source: str = cv.LatencySource.VLLM
    tpot_source: str = cv.LatencySource.VLLM

    def source_of(self, field: str) -> str:
        """The ``source`` label of a latency field (``ttft``, ``itl``, ``tpot``)."""
        return {"ttft": self.ttft_source, "tpot": self.tpot_source}.get(field, cv.LatencySource.VLLM)


class ExactLatency(Protocol):
    """Per-request latency measured outside vLLM (the gate), as windows of histograms.

    ``delta`` returns a ``WindowDelta`` whose histograms are keyed by vLLM's names
    (``cv.Histogram.TTFT``/``TPOT``) so the same quantile and attainment code applies.
    """

    def snapshot(self, at: float) -> None: ...

    def delta(self, window: float, tolerance: float, model: str) -> WindowDelta | None: ...


def prefer_exact(
    signals: Sequence[WindowSignals], exact: ExactLatency, tolerance: float, slo: SloThresholds
) -> list[WindowSignals]:
    """Replace TTFT and TPOT (quantiles and attainment) by the exact measurements where they exist.

    Per window and per signal: a window in which the gate saw no streamed request (only
    non-streamed ones, or none) keeps vLLM's values and says ``source="vllm"``, so turning the
    gate on never makes a signal vanish. ITL, rates and counts always come from vLLM.
    """
    return [_with_exact(s, exact.delta(s.window, tolerance, s.model_name), slo) for s in signals]


def _with_exact(s: WindowSignals, d: WindowDelta | None, slo: SloThresholds) -> WindowSignals:
    if d is None:
        return s
    gate = cv.LatencySource.GATE
    if d.observations(cv.Histogram.TTFT):
        ttft_ok = None if slo.ttft is None else d.attainment(cv.Histogram.TTFT, slo.ttft)
        s = replace(s, ttft=d.quantiles(cv.Histogram.TTFT), ttft_attainment=ttft_ok, ttft_source=gate)
    if d.observations(cv.Histogram.TPOT):
        tpot_ok = None if slo.tpot is None else d.attainment(cv.Histogram.TPOT, slo.tpot)
        s = replace(s, tpot=d.quantiles(cv.Histogram.TPOT), tpot_attainment=tpot_ok, tpot_source=gate)
    return s


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
