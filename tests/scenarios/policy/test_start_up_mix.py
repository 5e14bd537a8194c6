"""A fleet that starts empty under long answers and a long cold start: drawn 65 of the policy
benchmark (gamma gaps of CV 3.2, answers of ~1,141 tokens, a 10-minute cold start), where the
first request mix, read off a window that began before the first data, counted 72,253 tokens per
request where about 1,900 arrive: the first sizing asked for 184 replicas, the fleet sat at its
maximum of 96 for ten minutes where 5-6 serve (0.754 at 46.5 replica-hours, 4.85x the oracle,
dominated by hpa-util's 0.820 at 12.0). Read off whole windows only it holds the oracle's
attainment (0.967) at about 22 replica-hours.
"""

from __future__ import annotations

import pytest
from fleetslo.sim.compare import SimulateOptions, make_named_policy
from fleetslo.sim.scenario import run_policy

from benchmarks.bench_policy import scenario
from benchmarks.drawn import drawn

pytestmark = pytest.mark.slow


def test_a_fleet_filling_with_long_answers_does_not_buy_its_maximum() -> None:
    (workload,) = drawn(count=1, first=65)
    sc = scenario(workload)
    result = run_policy(sc, make_named_policy("fleetslo", sc, SimulateOptions(policies=("fleetslo",))))
    first_ten = [
        (w.ready_replicas or 0) + (w.starting_replicas or 0) for w in result.windows if w.start_s < 600.0
    ]
    assert max(first_ten) <= 20, first_ten  # the oracle runs 5-6; the defect bought 96
    assert (result.window_attainment or 0.0) >= 0.95  # the oracle's 0.967: one window of the step is lost
    assert result.replica_hours <= 30.0  # hpa-util pays 12.0 at 0.820; the defect paid 46.5
