"""Histogram bucket layouts that resolve latency near an SLO threshold.

vLLM's default buckets are coarse exactly where SLOs sit (TTFT jumps 0.1 → 0.25 s; per-request
TPOT 0.025 → 0.05 → 0.075 s), so a p90 inside such a bucket is a linear guess and, for a 50 ms TPOT
target, reads ~47 ms whatever the truth between 25 and 50 ms. ``slo_aligned`` adds edges at the
threshold and on a fine grid around it: the layout the gate uses for its exact per-request
histograms, and what to pass to vLLM's ``--custom-histogram-buckets``.

Pure data and arithmetic; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Edges around a threshold, as multiples of it: 5 % steps from 0.6 to 1.3, coarser outside.
THRESHOLD_GRID: tuple[float, ...] = (
    0.25, 0.4, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.3, 1.5, 2.0, 3.0,
)  # fmt: skip


def slo_aligned(base: Iterable[float], thresholds: Iterable[float]) -> tuple[float, ...]:
    """``base`` edges plus, for each threshold, the threshold itself and the grid around it.

    Edges are rounded to 12 significant digits so ``0.05 * 0.9`` lands on one stable value.
    """
    edges = {float(b) for b in base}
    for threshold in thresholds:
        if threshold > 0:
            edges |= {float(f"{threshold * f:.12g}") for f in THRESHOLD_GRID}
    return tuple(sorted(e for e in edges if e > 0))
