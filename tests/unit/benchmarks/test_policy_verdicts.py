"""The policy benchmark's verdict lines: the issue's goals, judged from result rows."""

from __future__ import annotations

from typing import Any

from fleetslo.sim.result_types import ScaleEventRecord

from benchmarks.bench_policy import flaps, verdicts


def row(policy: str, attainment: float, hours: float, kind: str = "smooth", **kw: Any) -> dict[str, Any]:
    base = {"case": "t", "kind": kind, "policy": policy, "attainment": attainment, "replica_hours": hours,
            "flaps": 0, "recovered_s": None}  # fmt: skip
    return base | kw


def test_smooth_verdict_against_the_oracle_and_the_no_foresight_frontier() -> None:
    frontier = {"headroom": 0.8, "attainment": 1.0, "replica_hours": 36.0}
    lines = verdicts([row("fleetslo", 1.0, 39.6), row("oracle", 1.0, 24.0, frontier=frontier)])
    assert "t: attainment 1.000 (goal 0.990), replica-hours 1.65x oracle (goal <= 1.15): NOT MET" in lines
    assert "t: reacting alone costs 1.50x oracle (no-foresight frontier, +80% headroom); " \
        "fleetslo is at 1.10x that" in lines  # fmt: skip
    assert "t: fleetslo flaps 0 (goal 0)" in lines


def test_bursty_verdict_names_the_baselines_that_dominate() -> None:
    lines = verdicts([row("fleetslo", 0.9, 50.0, "bursty"), row("hpa-util", 0.95, 49.0, "bursty"),
                      row("llmd-slo", 0.95, 60.0, "bursty")])  # fmt: skip
    assert "t: dominated by ['hpa-util']" in lines
    with_oracle = verdicts([row("fleetslo", 1.0, 50.0, "bursty"), row("oracle", 1.0, 40.0, "bursty")])
    assert "t: attainment 1.000 (oracle 1.000), replica-hours 1.25x oracle" in with_oracle
    tuned = verdicts([row("fleetslo", 0.9, 50.0, "bursty"), row("hpa-running@20", 0.9, 50.0, "bursty")])
    assert "t: dominated by ['hpa-running@20']" in tuned


def test_a_flap_is_a_scale_down_asked_back_within_the_stabilization_window() -> None:
    def event(t: float, a: int, b: int) -> ScaleEventRecord:
        return ScaleEventRecord(t, a, b, batch_limit=128, reason="r", message="")

    assert flaps([event(0, 10, 9), event(200, 9, 12)]) == 1
    assert flaps([event(0, 10, 9), event(400, 9, 12)]) == 0
    assert flaps([event(0, 10, 12), event(100, 12, 11)]) == 0
