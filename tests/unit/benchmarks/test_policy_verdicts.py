"""The policy benchmark's verdict lines: the issue's goals, judged from result rows."""

from __future__ import annotations

from typing import Any

from fleetslo.sim.result_types import ScaleEventRecord
from fleetslo.sim.traces.synthetic import lognormal_tokens, poisson

from benchmarks.bench_policy import flaps, run_workload, table, verdicts
from benchmarks.workloads import Workload


def row(policy: str, attainment: float, hours: float, kind: str = "smooth", **kw: Any) -> dict[str, Any]:
    base = {"case": "t", "kind": kind, "policy": policy, "attainment": attainment, "replica_hours": hours,
            "flaps": 0, "recovered_s": None, "standing_limit_windows": 0}  # fmt: skip
    return base | kw


def test_smooth_verdict_against_the_oracle_and_the_no_foresight_frontier() -> None:
    frontier = {"headroom": 0.8, "attainment": 1.0, "replica_hours": 36.0}
    lines = verdicts([row("fleetslo", 1.0, 39.6, frontier=frontier), row("oracle", 1.0, 24.0)])
    assert "t: attainment 1.000 >= 0.990: MET" in lines
    assert "t: replica-h 1.65x oracle <= 1.15: NOT MET" in lines
    assert "t: replica-h 1.10x frontier (+80%) <= 1.10: MET" in lines
    assert "t: flaps 0: MET" in lines and "t: standing-limit windows 0: MET" in lines


def test_a_step_verdict_judges_the_recovery_and_the_settling() -> None:
    lines = verdicts([row("fleetslo", 0.9, 50.0, "step", recovered_s=420.0, settle_s=1200.0),
                      row("oracle", 1.0, 40.0, "step")])  # fmt: skip
    assert "t: met again 420s after the step <= 600: MET" in lines
    assert "t: within 15% of the oracle's size 1200.0s after the step <= 900: NOT MET" in lines
    assert not any("x oracle <= 1.15" in line for line in lines)  # a step is judged on the frontier


def test_the_verdict_names_the_baselines_that_dominate() -> None:
    lines = verdicts([row("fleetslo", 0.9, 50.0, "bursty"), row("hpa-util", 0.95, 49.0, "bursty"),
                      row("llmd-slo", 0.95, 60.0, "bursty"), row("oracle", 1.0, 40.0, "bursty")])  # fmt: skip
    assert "t: dominated by ['hpa-util']: NOT MET" in lines
    tuned = verdicts([row("fleetslo", 0.9, 50.0, "bursty"), row("hpa-running@20", 0.9, 50.0, "bursty"),
                      row("oracle", 1.0, 40.0, "bursty")])  # fmt: skip
    assert "t: dominated by ['hpa-running@20']: NOT MET" in tuned


def test_a_flap_is_a_scale_down_asked_back_within_the_stabilization_window() -> None:
    def event(t: float, a: int, b: int) -> ScaleEventRecord:
        return ScaleEventRecord(t, a, b, batch_limit=128, reason="r", message="")

    assert flaps([event(0, 10, 9), event(200, 9, 12)]) == 1
    assert flaps([event(0, 10, 9), event(400, 9, 12)]) == 0
    assert flaps([event(0, 10, 12), event(100, 12, 11)]) == 0


def test_prediction_errors_report_the_last_windows_p90s_as_a_reference_predictor() -> None:
    from types import SimpleNamespace

    from fleetslo.sim.result_types import DecisionRecord

    from benchmarks.bench_policy import prediction_errors

    def decision(t: float, predicted: float, observed: float, ready: int = 4) -> DecisionRecord:
        return DecisionRecord(t, ready, ready, 0, predicted, 0.040, observed, 0.040)

    # The model says 1.0 s each time; the windows show 1.0, 2.0, 2.0, 2.0: the model misses the
    # three later windows by half, the last window's p90 misses only the first change.
    steady = [decision(300.0, 1.0, 1.0), decision(360.0, 1.0, 2.0), decision(420.0, 1.0, 2.0),
              decision(480.0, 1.0, 2.0)]  # fmt: skip
    report = prediction_errors(SimpleNamespace(windows=[], decisions=steady))
    assert report is not None and report["decisions"] == 3
    assert report["ttft_within"] == 0.0 and report["tpot_within"] == 1.0
    assert report["persistence"]["ttft_within"] == 2 / 3
    # A fleet that changed between a decision and the next window is not judged, for either.
    changed = [decision(300.0, 1.0, 1.0), decision(360.0, 1.0, 2.0, ready=5)]
    assert prediction_errors(SimpleNamespace(windows=[], decisions=changed)) is None


def test_the_settling_verdict_shows_the_reactive_frontier_beside_it() -> None:
    reference = {"headroom": 0.6, "attainment": 0.92, "replica_hours": 35.0, "settle_s": None,
                 "last_quarter_size": 1.61}  # fmt: skip
    lines = verdicts([row("fleetslo", 0.915, 53.0, "step", recovered_s=300.0, settle_s=None,
                          last_quarter_size=1.7, frontier_after_step=reference),
                      row("oracle", 1.0, 27.0, "step")])  # fmt: skip
    settle = next(line for line in lines if "within 15%" in line)
    assert "last quarter hour 1.70x the oracle's size" in settle
    assert "(no-foresight frontier at 0.920, +60%: settled never, 1.61x)" in settle
    assert settle.endswith("NOT MET")


def test_a_step_is_judged_against_its_own_cold_start() -> None:
    """A workload with a 2-minute cold start must be met again within 2 + 5 minutes, not 10."""
    quick = {"kind": "step", "cold_start_s": 120.0}
    lines = verdicts([row("fleetslo", 0.9, 50.0, recovered_s=480.0, settle_s=600.0, **quick),
                      row("oracle", 1.0, 40.0, **quick)])  # fmt: skip
    assert "t: met again 480s after the step <= 420: NOT MET" in lines


def test_without_baselines_a_workload_runs_fleetslo_the_oracle_and_the_frontier_only() -> None:
    """``BENCH_POLICY_BASELINES=none``: the rows a verdict and the table need, and nothing else."""
    tokens = lognormal_tokens(400, 200, sigma=0.8)
    trace = lambda: poisson(25.0, 480.0, tokens, seed=3)  # noqa: E731
    rows = run_workload(Workload("eight minutes of Poisson at 25/s", trace, "smooth"), True, baselines=False)
    assert [r["policy"] for r in rows] == ["fleetslo", "oracle"]
    assert rows[0]["frontier"] is not None and rows[0]["prediction"] is not None
    lines = verdicts(rows)
    assert any("dominated by none: MET" in line for line in lines)
    assert "| — |" in table(rows)
