"""The SLO thresholds the sidecar scores attainment against, shared by the exporter and the gate."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SloThresholds:
    """Thresholds for the attainment ratios; ``None`` disables that ratio."""

    ttft: float | None = None
    tpot: float | None = None
