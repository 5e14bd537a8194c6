"""Issue 19's known event end to end: a launch the fleet cannot absorb unwarned is held when the
operator tells the FleetSLO of it (``forecast.events``), and lost for a cold start when not.

The benchmark's launch (``benchmarks days``): a synthetic day at 12 requests/s (±30 %), x6 from
18:00 for an hour, on the exact MI325X TP4 fleet with a 5-minute cold start, each controller
started 90 minutes before with the day and a half before in its metrics store (tokens per
second, as the Prometheus bootstrap reads them). Asserted: behaviour, never wall-clock time.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from benchmarks import bench_days

pytestmark = pytest.mark.slow


@cache
def launch() -> dict[str, Any]:
    return bench_days.launch_at(6.0)


def test_told_of_the_launch_the_fleet_is_ready_when_it_comes() -> None:
    told = launch()["told of the launch"]
    assert told["first_15_min"] == 1.0 and told["attainment"] >= 0.99


@pytest.mark.parametrize("variant", ["seasonal, not told", "seasonal off"])
def test_unwarned_the_launch_s_first_minutes_are_lost_to_the_cold_start(variant: str) -> None:
    unwarned = launch()[variant]
    assert unwarned["first_15_min"] <= 0.8
    # the warning is paid for: replicas started before the launch, not after it
    assert launch()["told of the launch"]["replica_hours"] > unwarned["replica_hours"]
