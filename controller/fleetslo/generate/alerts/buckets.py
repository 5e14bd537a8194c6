"""Which histogram bucket edge an SLO threshold can be counted at.

"Share of requests at or under T" is exact only when T is a bucket edge (``_bucket{le="T"}``);
Prometheus returns nothing at all for a missing edge. This module knows vLLM's default edges,
resolves a threshold to the edge the SLI will use, and formats ``le`` exactly as vLLM's
prometheus_client writes it. Pure data and arithmetic; no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client.utils import floatToGoString

from fleetslo.core import conventions as cv

#: vLLM's default bucket edges (``vllm/v1/metrics/buckets.py``, identical in 0.32 and 0.33).
TTFT_DEFAULT: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
INTER_TOKEN_DEFAULT: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)  # fmt: skip

#: SLO → (the vLLM histogram the SLI reads, its ``--custom-histogram-buckets`` family, defaults).
#: TPOT is the per-request ``request_time_per_output_token_seconds`` (vLLM >= 0.11), which shares
#: the ``inter_token_latency`` bucket family.
HISTOGRAMS: dict[cv.SloName, tuple[cv.Histogram, str, tuple[float, ...]]] = {
    cv.SloName.TTFT: (cv.Histogram.TTFT, "time_to_first_token", TTFT_DEFAULT),
    cv.SloName.TPOT: (cv.Histogram.TPOT, "inter_token_latency", INTER_TOKEN_DEFAULT),
}


@dataclass(frozen=True, slots=True)
class BucketChoice:
    """The edge an SLI counts at for a threshold, and whether that is the threshold itself."""

    threshold: float
    edge: float
    exact: bool
    edges: tuple[float, ...]
    family: str

    @property
    def le(self) -> str:
        """The ``le`` label value as vLLM exposes it (``2.0``, ``0.05``)."""
        return le_label(self.edge)

    def advice(self) -> str:
        """What to tell the user when the threshold is not an edge (empty when it is)."""
        if self.exact:
            return ""
        wanted = sorted({*self.edges, self.threshold})
        flag = json.dumps({self.family: wanted}, separators=(",", ":"))
        return (
            f"threshold {self.threshold:g}s is not a bucket edge of {self.family} "
            f"(edges: {', '.join(f'{e:g}' for e in self.edges)}); counting at the nearest edge below, "
            f"{self.edge:g}s, so requests between {self.edge:g}s and {self.threshold:g}s count as slow "
            f"and the alerts fire early (conservative). To make it exact, start vLLM with "
            f"--custom-histogram-buckets '{flag}' and list the same edges under the objective's buckets."
        )


class NoUsableBucket(ValueError):
    """The threshold is below the smallest edge: no bucket counts requests under it."""


def le_label(edge: float) -> str:
    """``le`` as prometheus_client formats it: ``repr`` of the float (``1.0``, not ``1``)."""
    return str(floatToGoString(edge))  # type: ignore[no-untyped-call]


def choose(threshold: float, edges: Sequence[float], family: str) -> BucketChoice:
    """The edge equal to ``threshold`` (to 1e-9 relative), else the largest edge below it."""
    ordered = tuple(sorted(edges))
    for edge in ordered:
        if math.isclose(edge, threshold, rel_tol=1e-9, abs_tol=0.0):
            return BucketChoice(threshold, edge, True, ordered, family)
    below = [e for e in ordered if e < threshold]
    if not below:
        raise NoUsableBucket(
            f"threshold {threshold:g}s is below the smallest bucket edge of {family} ({ordered[0]:g}s); "
            f"add an edge at {threshold:g} with vLLM's --custom-histogram-buckets"
        )
    return BucketChoice(threshold, below[-1], False, ordered, family)
