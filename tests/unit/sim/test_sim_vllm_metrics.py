"""Simulated vLLM metrics: vLLM's buckets, exact bulk counting, and snapshots the window code reads."""

from __future__ import annotations

import math
import random
from bisect import bisect_left

import pytest
from fleetslo.core import conventions as cv
from fleetslo.core.histogram import quantile
from fleetslo.core.metrics.window import window_delta
from fleetslo.sim.vllm_metrics import ITL_BUCKETS, TTFT_BUCKETS, EngineMetrics, Hist


def brute(bounds: tuple[float, ...], first: float, step: float, n: int, weight: int) -> list[int]:
    counts = [0] * (len(bounds) + 1)
    for i in range(n):
        counts[bisect_left(bounds, first + step * i)] += weight
    return counts


@pytest.mark.parametrize("seed", range(40))
def test_bulk_linear_observations_equal_one_by_one(seed: int) -> None:
    rng = random.Random(seed)
    first = rng.choice([0.009, 0.01, 0.024, 0.05, 0.3, rng.uniform(0.001, 2.0)])
    step = rng.choice([0.0, 1e-6, 1e-4, rng.uniform(0, 0.01)])
    n, weight = rng.randint(1, 3000), rng.randint(1, 40)
    h = Hist(ITL_BUCKETS)
    h.observe_linear(first, step, n, weight)
    assert h.counts == brute(ITL_BUCKETS, first, step, n, weight)
    assert h.sum == pytest.approx(weight * sum(first + step * i for i in range(n)))


def test_values_on_a_bound_fall_in_that_bucket() -> None:
    h = Hist(TTFT_BUCKETS)
    h.observe(0.5)
    assert h.cumulative().counts[TTFT_BUCKETS.index(0.5)] == 1
    assert h.cumulative().counts[TTFT_BUCKETS.index(0.25)] == 0


def test_snapshot_has_vllm_families_and_feeds_the_window_math() -> None:
    m = EngineMetrics("qwen")
    before = m.snapshot()
    for v in (0.3, 0.35, 0.4, 0.45, 1.2):
        m.ttft.observe(v)
    m.success = 5
    after = m.snapshot()
    assert set(after.histograms) == {h.value for h in cv.Histogram}
    assert after.histogram(cv.Histogram.TTFT) is not None
    delta = window_delta(after, before, 60.0)
    assert delta.rate(cv.Counter.REQUEST_SUCCESS) == pytest.approx(5 / 60)
    p90 = quantile(0.9, delta.histograms[cv.Histogram.TTFT])
    assert p90 is not None and 1.0 < p90 <= 2.5  # bucket-interpolated, not the exact 1.2
    lean = m.snapshot([cv.Histogram.TTFT])
    assert set(lean.histograms) == {cv.Histogram.TTFT}


def test_custom_buckets_replace_a_family() -> None:
    m = EngineMetrics("qwen", {"time_to_first_token": [0.1, 1.0, 10.0]})
    assert m.ttft.bounds == (0.1, 1.0, 10.0)
    assert m.snapshot().histograms[cv.Histogram.TTFT]["0"].bounds[-1] == math.inf
    with pytest.raises(ValueError, match="unknown bucket families"):
        EngineMetrics("qwen", {"nope": [1.0]})
