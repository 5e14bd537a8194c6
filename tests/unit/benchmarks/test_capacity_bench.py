"""Where fleetslo's replicas go (``benchmarks capacity``): the minute counts and the two factors."""

from __future__ import annotations

import pytest
from fleetslo.policy.fleetslo.learning import PerformanceModel
from fleetslo.sim.compare import step_cost
from fleetslo.sim.traces.synthetic import lognormal_tokens, poisson
from fleetslo.sim.workload import Request

from benchmarks.bench_capacity import Minute, bare_need, exact_mix, minutes, summary
from benchmarks.bench_policy import scenario
from benchmarks.workloads import Workload


def _requests(prompts: list[int], outputs: list[int]) -> list[Request]:
    return [Request(float(i), p, o) for i, (p, o) in enumerate(zip(prompts, outputs, strict=True))]


def test_the_exact_mix_is_the_minutes_lengths_at_the_mid_quantile_points_at_their_exact_mean() -> None:
    mix = exact_mix(_requests(list(range(1, 101)), [7] * 100))
    assert mix is not None
    points = (6.0, 16.0, 26.0, 36.0, 46.0, 56.0, 66.0, 76.0, 86.0, 96.0)  # mean 51, the lengths' 50.5
    assert mix.prompt == pytest.approx(tuple(p * 50.5 / 51 for p in points))
    assert mix.output == pytest.approx((7.0,) * 10)
    # A heavy tail the ten points miss (one 100k-token prompt in a hundred) still counts in the
    # mean, as the token counters count it in a window the policy reads.
    tailed = exact_mix(_requests([1000] * 99 + [100_000], [50] * 100))
    assert tailed is not None and tailed.mean_prompt == pytest.approx(1990.0)
    assert exact_mix([]) is None  # a minute without arrivals has no mix, not a zero one


def test_the_factors_split_fleetslo_over_the_oracle_into_model_and_policy() -> None:
    rows = [Minute(0.0, 10.0, 12, 6, 4, 5, True), Minute(60.0, 30.0, 20, 16, 16, 20, False)]
    s = summary(rows)
    assert s["all"] == {
        "minutes": 2, "fleetslo": 32, "bare": 22, "poisson": 20, "oracle": 25,
        "policy": pytest.approx(32 / 22), "model": pytest.approx(22 / 20), "bursts": pytest.approx(25 / 20),
        "total": pytest.approx(32 / 25),
    }  # fmt: skip
    a = s["all"]
    assert a["policy"] * a["model"] / a["bursts"] == pytest.approx(a["total"])
    assert s["steady"]["policy"] == pytest.approx(2.0) and s["changing"]["model"] == pytest.approx(1.0)
    assert summary([])["all"] is None


def _short() -> Workload:
    tokens = lognormal_tokens(400, 200, sigma=0.8)
    return Workload("ten minutes of Poisson at 25/s", lambda: poisson(25.0, 600.0, tokens, seed=3), "smooth")


def test_the_bare_need_grows_with_the_rate_and_meets_the_targets_it_is_sized_for() -> None:
    sc = scenario(_short())
    model = PerformanceModel(step_cost(sc.profile))
    mix = exact_mix(sc.trace.requests)
    assert mix is not None
    needs = [bare_need(model, rate, mix, sc, 200) for rate in (5.0, 25.0, 100.0)]
    assert needs[0] <= needs[1] < needs[2]
    o = sc.spec.objectives
    n = needs[2]
    assert model.predict(100.0 / n, mix, sc.spec.batch_limit.max).meets(o.ttft.threshold, o.tpot.threshold)
    assert not model.predict(100.0 / (n - 1), mix, sc.spec.batch_limit.max).meets(
        o.ttft.threshold, o.tpot.threshold
    )


def test_a_replay_counts_every_judged_minute_after_the_warm_start() -> None:
    rows, info = minutes(_short())
    assert [r.start_s for r in rows] == [60.0 * m for m in range(5, 10)]
    assert all(r.fleetslo >= 1 and r.bare >= 1 and 1 <= r.poisson <= r.oracle for r in rows)
    assert all(20.0 <= r.rate <= 30.0 for r in rows)  # the minute's own arrivals, Poisson at 25/s
    assert info["replica_hours"] > 0
