"""Histogram math: PromQL's histogram_quantile rules, fractions under a threshold, deltas, merges."""

from __future__ import annotations

import math

import pytest
from fleetslo.core.histogram import (
    INF,
    BucketHistogram,
    delta,
    fraction_at_or_below,
    is_reset,
    merge,
    quantile,
    quantile_bucket,
)
from hypothesis import given
from hypothesis import strategies as st

H = BucketHistogram((0.1, 0.25, 0.5, 1.0, INF), (10.0, 20.0, 60.0, 90.0, 100.0), 42.0)


def test_quantile_interpolates_linearly_inside_the_bucket_that_holds_the_rank() -> None:
    # rank 90 is the end of the (0.5, 1.0] bucket: exactly 1.0
    assert quantile(0.9, H) == 1.0
    # rank 50 lies 30/40 of the way into (0.25, 0.5]
    assert quantile(0.5, H) == pytest.approx(0.25 + 0.25 * (30 / 40))


def test_quantile_in_the_first_bucket_interpolates_from_zero() -> None:
    assert quantile(0.05, H) == pytest.approx(0.05)


def test_quantile_in_the_inf_bucket_is_the_highest_finite_bound() -> None:
    assert quantile(0.95, H) == 1.0
    assert quantile(0.999, H) == 1.0


def test_quantile_is_none_without_observations_or_without_an_inf_bucket() -> None:
    assert quantile(0.9, BucketHistogram((0.1, INF), (0.0, 0.0))) is None
    assert quantile(0.9, BucketHistogram((0.1, 1.0), (3.0, 5.0))) is None
    assert quantile(0.9, BucketHistogram((INF,), (5.0,))) is None
    assert quantile(0.9, None) is None


def test_quantile_out_of_range_gives_infinities_like_promql() -> None:
    assert quantile(-0.1, H) == -INF
    assert quantile(1.1, H) == INF
    assert quantile(math.nan, H) is None


def test_quantile_with_a_non_positive_first_bound_returns_that_bound() -> None:
    h = BucketHistogram((-1.0, 0.0, 1.0, INF), (5.0, 6.0, 10.0, 10.0))
    assert quantile(0.2, h) == -1.0


def test_quantile_repairs_non_monotonic_buckets_like_promql() -> None:
    dipped = BucketHistogram((0.1, 0.2, 0.4, INF), (5.0, 4.0, 8.0, 10.0))
    fixed = BucketHistogram((0.1, 0.2, 0.4, INF), (5.0, 5.0, 8.0, 10.0))
    assert quantile(0.45, dipped) == quantile(0.45, fixed)


def test_quantile_bucket_is_the_bucket_the_interpolation_falls_in() -> None:
    assert quantile_bucket(0.5, H) == (0.25, 0.5)
    assert quantile_bucket(0.9, H) == (0.5, 1.0)  # the rank at the bucket's end is still its own
    assert quantile_bucket(0.05, H) == (0.0, 0.1)  # the first bucket reaches down to 0
    assert quantile_bucket(0.95, H) == (1.0, INF)  # past every finite edge: only a lower bound


def test_quantile_bucket_is_none_where_the_quantile_is() -> None:
    assert quantile_bucket(0.9, BucketHistogram((0.1, INF), (0.0, 0.0))) is None
    assert quantile_bucket(0.9, None) is None
    assert quantile_bucket(1.5, H) is None
    assert quantile_bucket(0.0, BucketHistogram((1.0, INF), (0.0, 1.0))) is None
    assert quantile_bucket(0.5, BucketHistogram((-1.0, 1.0, INF), (5.0, 8.0, 10.0))) == (-1.0, -1.0)


def test_fraction_is_exact_when_the_threshold_is_a_bucket_edge() -> None:
    f = fraction_at_or_below(H, 0.5)
    assert f is not None and f.exact and f.value == pytest.approx(0.6)


def test_fraction_interpolates_inside_a_bucket_and_says_so() -> None:
    f = fraction_at_or_below(H, 0.75)
    assert f is not None and not f.exact
    assert f.value == pytest.approx((60 + 30 * 0.5) / 100)


def test_fraction_beyond_the_last_finite_edge_counts_only_what_is_known() -> None:
    f = fraction_at_or_below(H, 5.0)
    assert f is not None and not f.exact and f.value == pytest.approx(0.9)


def test_fraction_is_none_without_observations() -> None:
    assert fraction_at_or_below(BucketHistogram((1.0, INF), (0.0, 0.0)), 1.0) is None


def test_delta_subtracts_bucket_by_bucket() -> None:
    older = BucketHistogram(H.bounds, (5.0, 10.0, 30.0, 45.0, 50.0), 20.0)
    d = delta(H, older)
    assert d.counts == (5.0, 10.0, 30.0, 45.0, 50.0)
    assert d.sum == pytest.approx(22.0)


def test_delta_after_a_restart_is_the_new_histogram_whole() -> None:
    restarted = BucketHistogram(H.bounds, (1.0, 1.0, 2.0, 2.0, 3.0), 0.5)
    assert is_reset(restarted, H)
    assert delta(restarted, H) == restarted


def test_a_new_bucket_layout_counts_as_a_restart() -> None:
    other = BucketHistogram((0.2, INF), (50.0, 200.0))
    assert is_reset(other, H)


def test_merge_keeps_every_bucket_as_promql_sum_by_le_does() -> None:
    # Issue 15 defect 11: PromQL's sum by (le) keeps an le that only some inputs have, summed over
    # those that have it; the le=0.2 series here is b's alone.
    a = BucketHistogram((0.1, 0.5, INF), (1.0, 2.0, 3.0), 1.0)
    b = BucketHistogram((0.1, 0.2, 0.5, INF), (1.0, 1.5, 2.0, 4.0), 2.0)
    m = merge([a, b])
    assert m == BucketHistogram((0.1, 0.2, 0.5, INF), (2.0, 1.5, 4.0, 7.0), 3.0)
    # histogram_quantile repairs the dip at 0.2 (ensureMonotonic): rank 3.5 lies in (0.2, 0.5].
    assert quantile(0.5, m) == pytest.approx(0.2 + 0.3 * (3.5 - 2.0) / 2.0)
    assert merge([]) is None


def cumulative(draw: st.DrawFn) -> BucketHistogram:
    n = draw(st.integers(1, 12))
    edges = sorted(set(draw(st.lists(st.floats(0.001, 1000), min_size=n, max_size=n))))
    increments = draw(st.lists(st.integers(0, 1000), min_size=len(edges) + 1, max_size=len(edges) + 1))
    counts, total = [], 0.0
    for inc in increments:
        total += inc
        counts.append(total)
    return BucketHistogram((*edges, INF), tuple(counts), float(total))


histograms = st.composite(cumulative)()


@given(histograms, st.floats(0, 1, exclude_min=True))
def test_quantile_lies_within_the_finite_bucket_range(h: BucketHistogram, q: float) -> None:
    value = quantile(q, h)
    if h.count == 0:
        assert value is None
    else:
        assert value is not None and 0 <= value <= h.bounds[-2]


def test_quantile_zero_over_an_empty_first_bucket_is_nan_like_promql() -> None:
    assert quantile(0.0, BucketHistogram((1.0, INF), (0.0, 1.0))) is None


@given(histograms, st.floats(0, 1), st.floats(0, 1))
def test_quantile_is_monotonic_in_q(h: BucketHistogram, a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    qa, qb = quantile(lo, h), quantile(hi, h)
    if qa is not None and qb is not None:
        assert qa <= qb + 1e-12


@given(histograms, st.floats(0.0001, 2000))
def test_fraction_is_a_ratio_and_grows_with_the_threshold(h: BucketHistogram, t: float) -> None:
    f, g = fraction_at_or_below(h, t), fraction_at_or_below(h, t * 1.5)
    if h.count == 0:
        assert f is None
    else:
        assert f is not None and g is not None
        assert 0 <= f.value <= 1 and f.value <= g.value + 1e-12


@given(histograms, histograms)
def test_delta_is_never_negative(a: BucketHistogram, b: BucketHistogram) -> None:
    assert all(c >= 0 for c in delta(a, b).counts)


@given(histograms, st.floats(0, 1, exclude_min=True))
def test_quantile_lies_in_its_bucket(h: BucketHistogram, q: float) -> None:
    value, bucket = quantile(q, h), quantile_bucket(q, h)
    assert (value is None) == (bucket is None)
    if value is not None and bucket is not None:
        assert bucket[0] <= value <= bucket[1]
