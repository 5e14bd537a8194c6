"""Window math over snapshots: per-series resets, reset-corrected totals, the snapshot ring."""

from __future__ import annotations

import pytest
from fleetslo.core import conventions as cv
from fleetslo.core.histogram import INF, BucketHistogram
from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.core.metrics.window import SnapshotRing, WindowDelta, accumulate, between, combine, window_delta
from fleetslo.core.model import EngineSnapshot, Quantiles
from fleetslo.testing import grow_capture
from hypothesis import given
from hypothesis import strategies as st

from tests.support import AFTER_LOAD, capture

TTFT = cv.Histogram.TTFT
BOUNDS = (0.1, 1.0, INF)


def snap(
    per_engine: dict[str, tuple[float, float, float]], success: float, created: float = 1.0
) -> EngineSnapshot:
    return EngineSnapshot(
        model_name="m",
        counters={cv.Counter.REQUEST_SUCCESS: {(e, "stop"): success for e in per_engine}},
        histograms={TTFT: {e: BucketHistogram(BOUNDS, c) for e, c in per_engine.items()}},
        created={(f, e): created for e in per_engine for f in (TTFT, cv.Counter.REQUEST_SUCCESS)},
    )


def test_the_delta_of_a_grown_capture_has_the_same_quantiles_as_the_capture() -> None:
    text = capture(AFTER_LOAD)
    older = parse_vllm(grow_capture(text, 2.0))["tiny-llama"]
    newer = parse_vllm(grow_capture(text, 5.0))["tiny-llama"]
    d = window_delta(newer, older, 30.0)
    whole = parse_vllm(text)["tiny-llama"]
    assert d.quantiles(TTFT).p90 == pytest.approx(
        WindowDelta(1, {TTFT: whole.histogram(TTFT)}).quantiles(TTFT).p90
    )  # type: ignore[dict-item]
    assert d.rate(cv.Counter.REQUEST_SUCCESS) == pytest.approx(79 * 3 / 30)


def test_a_restart_of_one_engine_resets_only_that_engines_series() -> None:
    older = snap({"0": (5, 8, 10), "1": (5, 8, 10)}, 10)
    newer = EngineSnapshot(
        model_name="m",
        histograms={
            TTFT: {"0": BucketHistogram(BOUNDS, (6, 9, 12)), "1": BucketHistogram(BOUNDS, (1, 1, 2))}
        },
    )
    d = window_delta(newer, older, 10)
    # engine 0 grew by (1, 1, 2); engine 1 restarted, so all of its (1, 1, 2) is new.
    assert d.histograms[TTFT].counts == (2, 2, 4)


def test_a_newer_created_timestamp_is_a_restart_even_when_counts_grew_past_the_old_ones() -> None:
    older = snap({"0": (5, 8, 10)}, 10, created=100.0)
    newer = snap({"0": (20, 30, 40)}, 50, created=200.0)
    d = window_delta(newer, older, 10)
    assert d.histograms[TTFT].counts == (20, 30, 40)
    assert d.increase(cv.Counter.REQUEST_SUCCESS) == 50


def test_a_counter_that_went_down_restarted_and_never_yields_a_negative_increase() -> None:
    d = window_delta(snap({"0": (1, 1, 1)}, 3), snap({"0": (5, 8, 10)}, 10), 10)
    assert d.increase(cv.Counter.REQUEST_SUCCESS) == 3


def test_combine_sums_replicas() -> None:
    a = WindowDelta(60, {TTFT: BucketHistogram(BOUNDS, (1, 2, 3))}, {"c": {"": 1.0}})
    b = WindowDelta(60, {TTFT: BucketHistogram(BOUNDS, (2, 2, 2))}, {"c": {"": 2.0}})
    c = combine([a, b])
    assert c is not None and c.histograms[TTFT].counts == (3, 4, 5) and c.increase("c") == 3
    assert combine([]) is None


steps = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20), st.booleans()),
    min_size=2,
    max_size=30,
)


@given(steps)
def test_totals_accumulated_across_restarts_make_every_window_non_negative_and_additive(
    increments: list[tuple[int, int, int, bool]],
) -> None:
    """Replays a counter history with random restarts; windows from totals equal the sum of steps.

    Each restart moves the ``_created`` timestamp, as a real restart does; without it, a restart
    whose counters grew back past the old values is undetectable by anyone, PromQL included.
    """
    cumulative = [0.0, 0.0, 0.0]
    epoch = 0
    previous: EngineSnapshot | None = None
    totals = [WindowDelta(0.0)]
    true_increase = []
    for a, b, c, restart in increments:
        if restart:
            cumulative = [0.0, 0.0, 0.0]
            epoch += 1
        cumulative = [cumulative[0] + a, cumulative[1] + a + b, cumulative[2] + a + b + c]
        current = snap({"0": tuple(cumulative)}, cumulative[2], created=epoch)  # type: ignore[arg-type]
        if previous is not None:
            step = window_delta(current, previous, 1.0)
            totals.append(accumulate(totals[-1], step))
            true_increase.append(a + b + c if not restart else cumulative[2])
        previous = current
    for i in range(len(totals)):
        for j in range(i, len(totals)):
            window = between(totals[j], totals[i])
            h = window.histograms.get(TTFT)
            if h is not None:
                assert all(x >= 0 for x in h.counts)
            assert (window.increase(cv.Counter.REQUEST_SUCCESS) or 0) == pytest.approx(
                sum(true_increase[i:j])
            )


def test_the_ring_finds_the_snapshot_closest_to_the_window_start() -> None:
    ring: SnapshotRing[str] = SnapshotRing(10)
    for t in (0.0, 5.1, 9.8, 15.2, 20.0):
        ring.append(t, f"s{t}")
    assert ring.start_of(10.0, 2.0) == (9.8, "s9.8")
    assert ring.start_of(20.0, 2.0) == (0.0, "s0.0")


def test_the_ring_has_no_start_while_history_is_short_or_after_a_gap() -> None:
    ring: SnapshotRing[str] = SnapshotRing(10)
    ring.append(0.0, "a")
    ring.append(5.0, "b")
    assert ring.start_of(30.0, 3.0) is None
    ring.append(600.0, "after outage")
    assert ring.start_of(30.0, 3.0) is None


def test_the_ring_is_bounded_and_refuses_time_going_backwards() -> None:
    ring: SnapshotRing[int] = SnapshotRing(3)
    for t in range(5):
        ring.append(float(t), t)
    assert [item for _, item in ring] == [2, 3, 4]
    with pytest.raises(ValueError, match="older"):
        ring.append(1.0, 9)


def test_a_windows_p90_comes_with_the_bucket_it_was_interpolated_in() -> None:
    """Every observation lies in (0.1, 1.0]: the p90 reads 0.91 (a linear guess) and the truth is
    anywhere in the bucket, so a prediction inside it is as right as the measurement can tell; one
    outside it is checked against the reading."""
    q = WindowDelta(60.0, {TTFT: BucketHistogram(BOUNDS, (0.0, 10.0, 10.0))}).quantiles(TTFT)
    assert q.p90 == pytest.approx(0.91) and q.p90_bucket == (0.1, 1.0)
    assert q.p90_seen_by(0.3) == 0.3 and q.p90_seen_by(0.1) == 0.1
    assert q.p90_seen_by(0.05) == pytest.approx(0.91) and q.p90_seen_by(2.0) == pytest.approx(0.91)
    assert q.p90_seen_by(INF) == pytest.approx(0.91)  # an unbounded prediction: the reading itself
    assert Quantiles(p90=0.91).p90_seen_by(0.3) == 0.91  # a source that does not know the bucket
    assert Quantiles().p90_seen_by(0.3) is None
    assert WindowDelta(60.0, {}).quantiles(TTFT) == Quantiles()
    assert Quantiles(p90=INF, p90_bucket=(1.0, INF)).finite_only() == Quantiles()
