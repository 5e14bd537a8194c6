"""The side-by-side harness for policy changes (``benchmarks ab``): what it parses, replays and reports."""

from __future__ import annotations

import math

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim.compare import SimulateOptions, make_named_policy
from fleetslo.sim.scenario import run_policy
from fleetslo.sim.traces.synthetic import lognormal_tokens, poisson

from benchmarks.bench_ab import Case, parse_configs, parse_sets, report, run, summary
from benchmarks.bench_policy import scenario
from benchmarks.workloads import QUICK, WORKLOADS, Workload


def _row(case: str, attainment: float | None, hours: float, flaps: int = 0, set_: str = "suite") -> dict:
    return {"set": set_, "case": case, "attainment": attainment, "replica_hours": hours, "flaps": flaps}


def test_configurations_are_option_lists_and_the_first_empty_one_is_the_defaults() -> None:
    configs = parse_configs(";headroom=0.35, calibration_quantile=0.95")
    assert configs == [
        ("defaults", ()),
        ("headroom=0.35,calibration_quantile=0.95", (("headroom", 0.35), ("calibration_quantile", 0.95))),
    ]
    with pytest.raises(SystemExit, match="at least two"):
        parse_configs("headroom=0.35")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_configs(";headroom")
    with pytest.raises(ConfigError, match="unknown option"):  # before any workload is built
        parse_configs(";headrom=0.35")
    with pytest.raises(ConfigError, match=r"bad option value \(headroom must be in \[0, 1\)"):
        parse_configs(";headroom=1.5")


def test_sets_are_the_named_ones_or_a_range_of_drawn_seeds() -> None:
    sets = dict(parse_sets("quick, suite"))
    assert [w.name for w in sets["quick"]] == [w.name for w in WORKLOADS if w.name in QUICK]
    assert len(sets["suite"]) == len(WORKLOADS)
    for bad in ("drawn5-3", "drawn", "drawnx-2", "everything"):
        with pytest.raises(SystemExit, match="AB_SETS"):
            parse_sets(bad)


def test_unknown_attainment_is_left_out_of_the_attainment_figures_not_counted_as_zero() -> None:
    rows = [_row("a", 1.0, 10.0, 1), _row("b", 0.9, 20.0), _row("c", None, 5.0, 2)]
    hours, at_goal, mean, flaps = summary(rows)
    assert (hours, at_goal, flaps) == (35.0, 1, 3)
    assert mean is not None and math.isclose(mean, 0.95)
    assert summary([_row("c", None, 5.0)])[2] is None


def test_the_report_compares_every_set_and_lists_what_moved_against_the_reference() -> None:
    drawn = "drawn0-9"
    reference = [_row("chat", 1.0, 10.0), _row("code", 0.95, 20.0), _row("drawn 3: x", 0.9, 30.0, set_=drawn)]
    changed = [_row("chat", 0.983, 9.0), _row("code", 0.95, 20.1), _row("drawn 3: x", 0.95, 36.0, 1, drawn)]
    text = report(["defaults", "headroom=0.35"], [reference, changed])
    lines = text.splitlines()
    assert lines[0] == "| set | defaults | headroom=0.35 |"
    assert "| suite (2) | 30.0, 1 at ≥ 0.99, mean 0.9750, 0 flaps | 29.1 (-3.0%), 0 at ≥ 0.99" in text
    assert "| drawn0-9 (1) | 30.0, 0 at ≥ 0.99" in text and "| all (3) |" in text
    assert "headroom=0.35: 2 moved, attainment better on 1, worse on 1" in text
    assert not any(line.strip().startswith("code") for line in lines)  # +0.5 %, same attainment: not moved


def _short() -> Workload:
    tokens = lognormal_tokens(400, 200, sigma=0.8)
    trace = lambda: poisson(25.0, 480.0, tokens, seed=3)  # noqa: E731
    return Workload("eight minutes of Poisson at 25/s", trace, "smooth")


def test_a_replay_is_what_the_policy_benchmark_measures_for_fleetslo() -> None:
    """The harness replays the workload as ``benchmarks policy`` builds it; the reference row is a
    plain fleetslo run, and a changed option reaches the policy (more headroom, more replicas)."""
    case = Case("mine", _short())
    results = run([case], [("defaults", ()), ("headroom=0.9", (("headroom", 0.9),))], workers=1)
    (reference,), (roomy,) = results
    sc = scenario(case.workload)
    policy = make_named_policy("fleetslo", sc, SimulateOptions(policies=("fleetslo",)))
    direct = run_policy(sc, policy, label="x")
    assert reference["replica_hours"] == direct.replica_hours
    assert reference["attainment"] == direct.window_attainment
    assert roomy["replica_hours"] > reference["replica_hours"]
