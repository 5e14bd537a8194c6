"""The tracker: windows from scrape history, no signals while down, recovery, vanishing models."""

from __future__ import annotations

import pytest
from fleetslo.core import conventions as cv
from fleetslo.core.errors import EngineScrapeError
from fleetslo.core.metrics.exposition import parse_vllm
from fleetslo.sidecar.exporter.tracker import EngineTracker
from fleetslo.sidecar.thresholds import SloThresholds
from fleetslo.testing import grow_capture

from tests.support import AFTER_LOAD, capture

TEXT = capture(AFTER_LOAD)
SLO = SloThresholds(ttft=2.5, tpot=0.05)


def scrape(factor: float) -> dict:  # type: ignore[type-arg]
    return parse_vllm(grow_capture(TEXT, factor))


def feed(tracker: EngineTracker, start: float, count: int, interval: float = 5.0) -> float:
    t = start
    for _i in range(count):
        tracker.record_success(t, 0.01, scrape(1 + (t / 10)))
        t += interval
    return t - interval


def test_windows_appear_once_history_covers_them() -> None:
    tracker = EngineTracker(ring_size=100, interval=5.0)
    feed(tracker, 0.0, 4)  # 15 s of history
    windows = {s.window for s in tracker.signals([10.0, 60.0], SLO)}
    assert windows == {10.0}
    feed(tracker, 20.0, 10)  # up to 65 s
    assert {s.window for s in tracker.signals([10.0, 60.0], SLO)} == {10.0, 60.0}


def test_signals_over_grown_captures_match_the_capture_and_its_rate() -> None:
    tracker = EngineTracker(ring_size=100, interval=5.0)
    feed(tracker, 0.0, 13)
    (s,) = list(tracker.signals([60.0], SLO))
    assert s.ttft.p90 == pytest.approx(5.03125)
    assert s.requests_per_second == pytest.approx(79 / 10)
    assert s.ttft_attainment is not None and s.ttft_attainment.exact
    assert s.ttft_attainment.value == pytest.approx(55 / 79)
    assert s.tpot_attainment is not None and s.tpot_attainment.value == 1.0


def test_a_failed_scrape_hides_every_signal_until_the_next_success() -> None:
    tracker = EngineTracker(ring_size=100, interval=5.0)
    end = feed(tracker, 0.0, 13)
    tracker.record_failure(end + 5, 0.001, EngineScrapeError("refused", "connect"))
    assert not tracker.up and tracker.signals([10.0], SLO) == []
    assert tracker.errors == {"connect": 1} and tracker.latest == {}
    tracker.record_success(end + 10, 0.01, scrape(1 + (end + 10) / 10))
    assert tracker.up and tracker.signals([10.0], SLO)


def test_a_restarted_vllm_never_yields_negative_rates_or_bogus_quantiles() -> None:
    tracker = EngineTracker(ring_size=100, interval=5.0)
    end = feed(tracker, 0.0, 13)
    # vLLM restarts: counters fall back to a small page, then grow again.
    for i, t in enumerate((end + 5, end + 10, end + 15)):
        tracker.record_success(t, 0.01, scrape(0.1 * (i + 1)))
    for s in tracker.signals([10.0, 60.0], SLO):
        assert s.requests_per_second is not None and s.requests_per_second >= 0
        assert s.ttft.p90 is None or 0 < s.ttft.p90 <= 2560


def test_a_model_that_disappears_loses_its_signals() -> None:
    tracker = EngineTracker(ring_size=100, interval=5.0)
    end = feed(tracker, 0.0, 13)
    other = parse_vllm('vllm:num_requests_running{model_name="other",engine="0"} 1\n')
    tracker.record_success(end + 5, 0.01, other)
    assert {s.model_name for s in tracker.signals([10.0, 60.0], SLO)} <= {"other"}
    assert cv.Gauge.RUNNING in tracker.latest["other"].gauges
