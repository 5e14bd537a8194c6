"""Synthetic generators: mean rates, burstiness, spike shape, determinism, ordering."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import pytest
from fleetslo.core.errors import ConfigError
from fleetslo.sim.traces import (
    bursty,
    diurnal,
    fixed_tokens,
    load_trace,
    lognormal_tokens,
    poisson,
    resampled_tokens,
    step_spike,
)
from fleetslo.sim.traces.synthetic import weibull_shape
from fleetslo.sim.workload import Trace

TOKENS = fixed_tokens(100, 10)
CONV = Path(__file__).resolve().parents[3] / "traces/azure2023/AzureLLMInferenceTrace_conv.csv"


def gaps(trace: Trace) -> list[float]:
    times = [r.arrival_s for r in trace.requests]
    return [b - a for a, b in itertools.pairwise(times)]


def cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.fmean(values)


def count_in(trace: Trace, start: float, end: float) -> int:
    return sum(1 for r in trace.requests if start <= r.arrival_s < end)


def assert_sorted_within(trace: Trace, duration: float) -> None:
    times = [r.arrival_s for r in trace.requests]
    assert times == sorted(times)
    assert all(0 <= t < duration for t in times)


def test_poisson_rate_and_exponential_gaps() -> None:
    trace = poisson(5.0, 2000.0, TOKENS, seed=1)
    assert len(trace) / 2000 == pytest.approx(5.0, rel=0.05)
    assert cv(gaps(trace)) == pytest.approx(1.0, abs=0.05)
    assert_sorted_within(trace, 2000)


@pytest.mark.parametrize("distribution", ["gamma", "weibull"])
@pytest.mark.parametrize("target_cv", [0.5, 2.0, 4.0])
def test_bursty_matches_rate_and_cv(distribution: str, target_cv: float) -> None:
    trace = bursty(10.0, 3000.0, target_cv, TOKENS, seed=3, distribution=distribution)
    assert len(trace) / 3000 == pytest.approx(10.0, rel=0.1)
    assert cv(gaps(trace)) == pytest.approx(target_cv, rel=0.15)
    assert_sorted_within(trace, 3000)


@pytest.mark.parametrize("target_cv", [0.1, 1.0, 3.0, 10.0])
def test_weibull_shape_inverts_cv(target_cv: float) -> None:
    from fleetslo.sim.traces.synthetic import _weibull_cv

    assert _weibull_cv(weibull_shape(target_cv)) == pytest.approx(target_cv, rel=1e-6)
    assert weibull_shape(1.0) == pytest.approx(1.0, rel=1e-6)  # Weibull k=1 is exponential


def test_step_spike_is_a_sharp_step() -> None:
    trace = step_spike(4.0, 1800.0, TOKENS, spike_at_s=600.0, spike_duration_s=300.0, factor=5.0, seed=2)
    assert count_in(trace, 0, 600) / 600 == pytest.approx(4.0, rel=0.1)
    assert count_in(trace, 600, 900) / 300 == pytest.approx(20.0, rel=0.1)
    assert count_in(trace, 900, 1800) / 900 == pytest.approx(4.0, rel=0.1)
    assert_sorted_within(trace, 1800)


def test_diurnal_peaks_and_troughs_where_asked() -> None:
    trace = diurnal(2.0, 86_400.0, TOKENS, seed=4, amplitude=0.8, peak_at_s=50_400.0)
    assert len(trace) / 86_400 == pytest.approx(2.0, rel=0.03)
    peak = count_in(trace, 48_600, 52_200) / 3600  # the hour around 14:00
    trough = count_in(trace, 7_200, 10_800) / 3600  # the hour around 02:30
    assert peak == pytest.approx(3.6, rel=0.1)
    assert trough == pytest.approx(0.4, rel=0.25)


def test_same_seed_same_trace_different_seed_different_trace() -> None:
    make = lambda seed: bursty(3.0, 600.0, 2.0, lognormal_tokens(500, 100), seed=seed)  # noqa: E731
    assert make(7) == make(7)
    assert make(7).requests != make(8).requests


def test_token_stream_is_independent_of_the_arrival_stream() -> None:
    a = poisson(3.0, 300.0, fixed_tokens(1, 1), seed=5)
    b = poisson(3.0, 300.0, lognormal_tokens(800, 200), seed=5)
    assert [r.arrival_s for r in a.requests] == [r.arrival_s for r in b.requests]


def test_lognormal_tokens_median_and_bounds() -> None:
    trace = poisson(50.0, 200.0, lognormal_tokens(1000, 200, sigma=0.8, max_tokens=4000), seed=6)
    assert statistics.median(r.input_tokens for r in trace.requests) == pytest.approx(1000, rel=0.1)
    assert statistics.median(r.output_tokens for r in trace.requests) == pytest.approx(200, rel=0.1)
    assert all(1 <= r.input_tokens <= 4000 for r in trace.requests)


def test_resampled_tokens_come_from_the_trace() -> None:
    real = load_trace(CONV)
    pairs = {(r.input_tokens, r.output_tokens) for r in real.requests}
    trace = poisson(5.0, 200.0, resampled_tokens(real), seed=7)
    assert all((r.input_tokens, r.output_tokens) in pairs for r in trace.requests)
    assert len({(r.input_tokens, r.output_tokens) for r in trace.requests}) > len(trace) // 2


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: poisson(0, 10, TOKENS), "rate: must be a positive number"),
        (lambda: poisson(1, float("inf"), TOKENS), "duration_s"),
        (lambda: bursty(1, 10, 0.0, TOKENS), "cv: must be between"),
        (lambda: bursty(1, 10, 2.0, TOKENS, distribution="pareto"), "gamma or weibull"),
        (lambda: step_spike(1, 10, TOKENS, spike_at_s=-1, spike_duration_s=1, factor=2), "spike"),
        (lambda: diurnal(1, 10, TOKENS, amplitude=1.5), "amplitude"),
        (lambda: fixed_tokens(0, 1), "input_tokens"),
        (lambda: resampled_tokens(Trace(())), "empty trace"),
    ],
)
def test_bad_parameters_are_config_errors(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=message):
        build()
