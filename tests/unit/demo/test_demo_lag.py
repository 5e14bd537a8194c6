"""The host check: lag in simulated seconds against a share of the TTFT target, patience, and the
next speed-up to try."""

from __future__ import annotations

import pytest
from fleetslo.sim.demo import lag


def meter_with(source: str, late_s: float, *, at: float = 100.0, n: int = 50) -> lag.LagMeter:
    meter = lag.LagMeter()
    for i in range(n):
        meter.record(source, late_s, at - i * 0.05)
    return meter


def test_lag_is_judged_in_simulated_seconds() -> None:
    # 5 ms of wall lag: 0.05 s simulated at 10× (within 0.1 s, 5 % of 2 s), 0.15 s at 30× (not).
    meter = meter_with(lag.ENGINES, 0.005)
    assert lag.HostCheck(meter, 10.0, 2.0).check(100.0) is None
    behind = lag.HostCheck(meter, 30.0, 2.0).check(100.0)
    assert behind is not None and behind.source == lag.ENGINES
    assert behind.p90_simulated_s == pytest.approx(0.15) and behind.budget_s == pytest.approx(0.1)
    assert "engines p90 lag 5 ms of wall time = 0.15 s simulated" in behind.describe()


def test_only_a_host_behind_several_checks_in_a_row_gives_up() -> None:
    meter = meter_with(lag.CLIENTS, 0.05)
    check = lag.HostCheck(meter, 10.0, 2.0, patience=2)
    assert check.check(100.0) is not None and check.gave_up is None
    assert check.check(200.0) is None  # the window moved past the lag: caught up
    assert check.behind_in_a_row == 0
    for i in range(50):
        meter.record(lag.CLIENTS, 0.05, 300.0 - i * 0.05)
    check.check(300.0)
    check.check(301.0)
    assert check.gave_up is not None and check.summary()["kept_up"] is False
    assert check.summary()["worst_lag_wall_ms"] == {"clients and router": 50.0}


def test_old_samples_fall_out_of_the_window() -> None:
    meter = meter_with(lag.LOADGEN, 1.0, at=10.0)
    assert meter.p90(lag.LOADGEN, 10.0) == 1.0
    assert meter.p90(lag.LOADGEN, 10.0 + lag.WINDOW_S + 3) is None


def test_the_next_speedup_brings_the_lag_within_budget() -> None:
    behind = lag.Behind(lag.ENGINES, 0.04, 0.4, 0.1)  # 4× over budget at 10×
    assert lag.slower(10.0, behind, 1.0) == 2.5
    mild = lag.Behind(lag.ENGINES, 0.012, 0.12, 0.1)
    assert lag.slower(10.0, mild, 1.0) == 5.0  # at least halved
    assert lag.slower(1.5, behind, 1.0) == 1.0
    assert lag.slower(1.0, behind, 1.0) is None


def test_by_default_one_check_behind_gives_up_the_run() -> None:
    """A check spans 50 simulated seconds at 10×, most of the window the controller's p90s cover:
    a run whose host fell behind for one of them was decided by the host, not the controller."""
    check = lag.HostCheck(meter_with(lag.LOADGEN, 0.05), 10.0, 2.0)
    assert check.check(100.0) is not None
    assert check.gave_up is not None and check.summary()["kept_up"] is False


def test_the_token_budget_is_a_share_of_the_tpot_target_times_the_median_tokens_after_the_first() -> None:
    # The demo trace's outputs: median 13 tokens, so 12 after the first; 5 % of 50 ms × 12 = 0.03 s.
    assert lag.token_budget(0.05, [7, 9, 13, 27, 56]) == pytest.approx(0.03)
    assert lag.token_budget(0.05, [1, 1, 2]) == pytest.approx(0.0025)  # never below one token's worth
    assert lag.token_budget(0.05, []) is None


def test_token_path_lag_is_judged_against_the_smaller_token_budget_and_the_rest_against_ttfts() -> None:
    """5 ms of wall lag at 10× is 0.05 s simulated: within 5 % of a 2 s TTFT (0.1 s), but that much
    lag between a 13-token answer's first and last token moves its TPOT by 4 ms, 8 % of 50 ms."""
    cases = ((lag.CLIENTS, True), (lag.ENGINES, True), (lag.LOADGEN, False), (lag.CONTROLLER, False))
    for source, behind in cases:
        check = lag.HostCheck(meter_with(source, 0.005), 10.0, 2.0, token_budget_s=0.03)
        found = check.check(100.0)
        assert (found is not None) is behind, source
        if found is not None:
            assert found.budget_s == pytest.approx(0.03) and found.source == source
            # The token path is within its budget at 10 × 0.03 / 0.05 = 6×; a restart at least halves.
            assert lag.slower(10.0, found, 1.0) == pytest.approx(5.0)
    assert lag.HostCheck(lag.LagMeter(), 10.0, 2.0, token_budget_s=0.5).token_budget_s == pytest.approx(0.1)


def test_the_worst_source_is_the_one_furthest_over_its_own_budget() -> None:
    meter = meter_with(lag.LOADGEN, 0.012)  # 0.12 s simulated: 1.2 × the 0.1 s budget
    for i in range(50):
        meter.record(lag.CLIENTS, 0.006, 100.0 - i * 0.05)  # 0.06 s: 2 × the 0.03 s budget
    found = lag.HostCheck(meter, 10.0, 2.0, token_budget_s=0.03).check(100.0)
    assert found is not None and found.source == lag.CLIENTS
