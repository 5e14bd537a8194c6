"""Transforms: rate and time scaling, windows and spliced spikes keep order and hit their rates."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces import (
    fixed_tokens,
    load_trace,
    poisson,
    rate_scale,
    splice_spike,
    time_scale,
    window,
)
from fleetslo.sim.workload import Request, Trace

CONV = load_trace(Path(__file__).resolve().parents[3] / "traces/azure2023/AzureLLMInferenceTrace_conv.csv")
CODE = load_trace(Path(__file__).resolve().parents[3] / "traces/azure2023/AzureLLMInferenceTrace_code.csv")


def per_minute(trace: Trace) -> Counter[int]:
    return Counter(int(r.arrival_s // 60) for r in trace.requests)


def assert_sorted(trace: Trace) -> None:
    times = [r.arrival_s for r in trace.requests]
    assert times == sorted(times)


@pytest.mark.parametrize("factor", [0.25, 0.5, 1.0, 2.0, 3.5, 20.0])
def test_rate_scale_total(factor: float) -> None:
    scaled = rate_scale(CONV, factor, seed=1)
    assert len(scaled) == pytest.approx(factor * len(CONV), rel=0.03)
    assert_sorted(scaled)


def test_rate_scale_keeps_the_shape_of_a_bursty_trace() -> None:
    base, scaled = per_minute(CODE), per_minute(rate_scale(CODE, 3.0, seed=2))
    busy = [m for m, n in base.items() if n >= 100]
    assert len(busy) >= 10
    for minute in busy:  # every busy minute is three times as busy, not smeared elsewhere
        assert scaled[minute] / base[minute] == pytest.approx(3.0, rel=0.05)


def test_rate_scale_copies_keep_token_pairs_and_jitter_forward() -> None:
    trace = Trace((Request(10.0, 7, 3),), "one")
    scaled = rate_scale(trace, 4.0, seed=3, jitter_s=0.5)
    assert len(scaled) == 4
    assert {(r.input_tokens, r.output_tokens) for r in scaled.requests} == {(7, 3)}
    assert scaled.requests[0].arrival_s == 10.0
    assert all(10.0 <= r.arrival_s < 10.5 for r in scaled.requests)
    assert len({r.arrival_s for r in scaled.requests}) == 4


def test_rate_scale_is_deterministic_per_seed() -> None:
    assert rate_scale(CODE, 2.5, seed=4) == rate_scale(CODE, 2.5, seed=4)
    assert rate_scale(CODE, 2.5, seed=4).requests != rate_scale(CODE, 2.5, seed=5).requests
    assert rate_scale(CODE, 1.0).requests == CODE.requests


def test_time_scale_stretches_and_compresses() -> None:
    slow, fast = time_scale(CONV, 2.0), time_scale(CONV, 0.5)
    assert slow.duration_s == pytest.approx(2 * CONV.duration_s)
    assert fast.duration_s == pytest.approx(0.5 * CONV.duration_s)
    assert len(slow) == len(fast) == len(CONV)
    assert [r.input_tokens for r in fast.requests] == [r.input_tokens for r in CONV.requests]


def test_window_cuts_and_rebases() -> None:
    cut = window(CONV, 600.0, 300.0)
    expected = [r for r in CONV.requests if 600.0 <= r.arrival_s < 900.0]
    assert len(cut) == len(expected) > 0
    assert [r.arrival_s + 600.0 for r in cut.requests] == pytest.approx([r.arrival_s for r in expected])
    assert all(0 <= r.arrival_s < 300 for r in cut.requests)
    assert len(window(CONV, 3000.0)) == sum(1 for r in CONV.requests if r.arrival_s >= 3000.0)
    assert len(window(CONV, 10**6, 60)) == 0


def test_splice_spike_is_a_step_with_untouched_surroundings() -> None:
    base = poisson(5.0, 1800.0, fixed_tokens(10, 10), seed=6)
    spiked = splice_spike(base, 600.0, 4.0, 300.0, seed=7)
    inside = lambda t: [r for r in t.requests if 600 <= r.arrival_s < 900]  # noqa: E731
    outside = lambda t: [r for r in t.requests if not 600 <= r.arrival_s < 900]  # noqa: E731
    assert outside(spiked) == outside(base)
    assert len(inside(spiked)) == pytest.approx(4 * len(inside(base)), rel=0.02)
    assert_sorted(spiked)
    # sharp edges: the first and last 30 s of the spike are as busy as its middle
    first = sum(1 for r in spiked.requests if 600 <= r.arrival_s < 630)
    assert first / 30 == pytest.approx(20.0, rel=0.3)


def test_splice_spike_below_one_is_a_dip() -> None:
    spiked = splice_spike(CONV, 600.0, 0.5, 600.0, seed=8)
    before = sum(1 for r in CONV.requests if 600 <= r.arrival_s < 1200)
    after = sum(1 for r in spiked.requests if 600 <= r.arrival_s < 1200)
    assert after == pytest.approx(before / 2, rel=0.08)


@pytest.mark.parametrize(
    "build",
    [
        lambda: rate_scale(CONV, 0),
        lambda: rate_scale(CONV, float("nan")),
        lambda: rate_scale(CONV, 2, jitter_s=-1),
        lambda: time_scale(CONV, -1),
        lambda: window(CONV, -5, 10),
        lambda: window(CONV, 0, 0),
        lambda: splice_spike(CONV, 0, 2, 0),
    ],
)
def test_bad_parameters_are_config_errors(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError):
        build()
