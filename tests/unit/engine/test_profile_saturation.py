"""``fleetslo profile``'s saturation rate: the median of the repeated phases, not one lucky phase."""

from __future__ import annotations

import pytest
from fleetslo.cli.profile_check import saturation_rate
from fleetslo.engine.bench import Phase, PhaseResult
from fleetslo.engine.client import Shot


def _result(name: str, clients: int, ok: int, wall: float) -> PhaseResult:
    shots = tuple(Shot(0.0, 64, 32, 0.05, 0.005, True) for _ in range(ok))
    return PhaseResult(Phase(name, clients, 64, 32, ok), shots, wall, {})


def test_the_median_of_the_repeats_wins_over_the_best_sweep_phase() -> None:
    results = [
        _result("c4", 4, 16, 1.0), _result("c8", 8, 32, 1.0),  # c8: 32 req/s, a quiet moment
        _result("s8-0", 8, 16, 1.0), _result("s8-1", 8, 16, 2.0), _result("s8-2", 8, 16, 0.8),
    ]  # fmt: skip
    rate, phase, rates = saturation_rate(results)
    assert rates == [16.0, 8.0, 20.0]
    assert rate == pytest.approx(16.0)
    assert phase.concurrency == 8


def test_without_repeats_the_sweeps_best_phase_is_used() -> None:
    rate, phase, _ = saturation_rate([_result("c1", 1, 4, 1.0), _result("c4", 4, 16, 1.0)])
    assert (rate, phase.name) == (16.0, "c4")
