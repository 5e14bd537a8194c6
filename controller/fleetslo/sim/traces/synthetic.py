"""Seeded synthetic traces: Poisson, bursty renewal (Gamma / Weibull), a step spike, a diurnal wave.

Every generator is a pure function of its arguments: the same seed gives the same trace, byte for byte,
on every platform (stdlib ``random`` only). Arrival times and token counts come from two independent
streams derived from the seed, so swapping the token sampler never moves an arrival. Parameters a user
types (rates, durations, CV) are checked here and fail with ``ConfigError``.

This module generates; it does not read files or run the engine model.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator

from fleetslo.core.errors import ConfigError
from fleetslo.sim.workload import Request, Trace

#: Draws one request's (input tokens, output tokens) from the token stream.
TokenSampler = Callable[[random.Random], tuple[int, int]]

#: Weibull shapes searched when matching a CV: CV(0.1) ≈ 430, CV(60) ≈ 0.02.
_WEIBULL_SHAPES = (0.1, 60.0)
CV_RANGE = (0.05, 20.0)


# --- token samplers ---------------------------------------------------------------------------


def fixed_tokens(input_tokens: int, output_tokens: int) -> TokenSampler:
    """Every request has the same lengths."""
    _positive("input_tokens", input_tokens)
    _positive("output_tokens", output_tokens)
    return lambda _rng: (input_tokens, output_tokens)


def lognormal_tokens(
    input_median: float, output_median: float, sigma: float = 1.0, max_tokens: int = 131_072
) -> TokenSampler:
    """Log-normal lengths (the usual fit for prompt and reply lengths), rounded, in [1, max_tokens]."""
    _positive("input_median", input_median)
    _positive("output_median", output_median)
    _positive("sigma", sigma)
    mu_in, mu_out = math.log(input_median), math.log(output_median)

    def draw(rng: random.Random) -> tuple[int, int]:
        n_in = round(rng.lognormvariate(mu_in, sigma))
        n_out = round(rng.lognormvariate(mu_out, sigma))
        return min(max(n_in, 1), max_tokens), min(max(n_out, 1), max_tokens)

    return draw


def resampled_tokens(trace: Trace) -> TokenSampler:
    """(input, output) pairs drawn uniformly with replacement from a real trace (keeps their correlation)."""
    pairs = [(r.input_tokens, r.output_tokens) for r in trace.requests]
    if not pairs:
        raise ConfigError(f"cannot resample token lengths from an empty trace ({trace.source or 'unnamed'})")
    return lambda rng: pairs[rng.randrange(len(pairs))]


# --- generators -------------------------------------------------------------------------------


def poisson(rate: float, duration_s: float, tokens: TokenSampler, *, seed: int = 0) -> Trace:
    """Poisson arrivals at ``rate`` requests/s over ``duration_s``."""
    _positive("rate", rate)
    _positive("duration_s", duration_s)
    arrival = random.Random(seed)
    times = _poisson_times(arrival, rate, duration_s)
    return _trace(times, tokens, seed, f"poisson(rate={rate:g}/s, duration={duration_s:g}s, seed={seed})")


def bursty(
    rate: float,
    duration_s: float,
    cv: float,
    tokens: TokenSampler,
    *,
    seed: int = 0,
    distribution: str = "gamma",
) -> Trace:
    """A renewal process at mean rate ``rate`` whose inter-arrival gaps have coefficient of variation ``cv``.

    ``cv`` = 1 with Gamma is Poisson; larger values give clumps of arrivals separated by long gaps.
    Gamma: shape 1/cv², scale cv²/rate. Weibull: the shape whose CV is ``cv`` (found by bisection),
    scale chosen so the mean gap is 1/rate.
    """
    _positive("rate", rate)
    _positive("duration_s", duration_s)
    if not CV_RANGE[0] <= cv <= CV_RANGE[1]:
        raise ConfigError(f"cv: must be between {CV_RANGE[0]} and {CV_RANGE[1]} (got {cv!r})")
    arrival = random.Random(seed)
    mean = 1.0 / rate
    if distribution == "gamma":
        shape, scale = 1.0 / cv**2, mean * cv**2
        times = _renewal(lambda: arrival.gammavariate(shape, scale), duration_s)
    elif distribution == "weibull":
        k = weibull_shape(cv)
        lam = mean / math.gamma(1.0 + 1.0 / k)
        times = _renewal(lambda: arrival.weibullvariate(lam, k), duration_s)
    else:
        raise ConfigError(f"distribution: must be gamma or weibull (got {distribution!r})")
    desc = f"bursty({distribution}, rate={rate:g}/s, cv={cv:g}, duration={duration_s:g}s, seed={seed})"
    return _trace(times, tokens, seed, desc)


def step_spike(
    base_rate: float,
    duration_s: float,
    tokens: TokenSampler,
    *,
    spike_at_s: float,
    spike_duration_s: float,
    factor: float,
    seed: int = 0,
) -> Trace:
    """Poisson at ``base_rate`` with a sudden step to ``base_rate × factor`` over the spike interval.

    Built from independent Poisson segments, which is exact because Poisson arrivals are memoryless.
    """
    _positive("base_rate", base_rate)
    _positive("duration_s", duration_s)
    _positive("factor", factor)
    if spike_at_s < 0 or spike_duration_s <= 0:
        raise ConfigError(
            f"spike: needs spike_at_s >= 0 and spike_duration_s > 0 (got {spike_at_s}, {spike_duration_s})"
        )
    end = min(spike_at_s + spike_duration_s, duration_s)
    segments = (
        (0.0, spike_at_s, base_rate),
        (spike_at_s, end, base_rate * factor),
        (end, duration_s, base_rate),
    )
    arrival = random.Random(seed)
    times = [start + t for start, stop, rate in segments for t in _poisson_times(arrival, rate, stop - start)]
    desc = (
        f"step_spike(rate={base_rate:g}/s, ×{factor:g} at {spike_at_s:g}s for {spike_duration_s:g}s, "
        f"duration={duration_s:g}s, seed={seed})"
    )
    return _trace(times, tokens, seed, desc)


def diurnal(
    mean_rate: float,
    duration_s: float,
    tokens: TokenSampler,
    *,
    seed: int = 0,
    amplitude: float = 0.5,
    period_s: float = 86_400.0,
    peak_at_s: float = 50_400.0,
) -> Trace:
    """A day-shaped Poisson process: rate(t) = mean × (1 + amplitude × cos(2π(t − peak_at_s)/period_s)).

    Generated by thinning (Lewis–Shedler): candidates at the peak rate, each kept with probability
    rate(t)/peak. Defaults put the peak at 14:00 of a 24 h period.
    """
    _positive("mean_rate", mean_rate)
    _positive("duration_s", duration_s)
    _positive("period_s", period_s)
    if not 0 <= amplitude <= 1:
        raise ConfigError(f"amplitude: must be between 0 and 1 (got {amplitude!r})")
    arrival = random.Random(seed)
    peak = mean_rate * (1 + amplitude)

    def rate(t: float) -> float:
        return mean_rate * (1 + amplitude * math.cos(2 * math.pi * (t - peak_at_s) / period_s))

    candidates = _poisson_times(arrival, peak, duration_s)
    times = [t for t in candidates if arrival.random() * peak < rate(t)]
    desc = f"diurnal(mean={mean_rate:g}/s, amplitude={amplitude:g}, period={period_s:g}s, seed={seed})"
    return _trace(times, tokens, seed, desc)


def weibull_shape(cv: float) -> float:
    """The Weibull shape k whose coefficient of variation is ``cv`` (CV falls monotonically with k)."""
    lo, hi = _WEIBULL_SHAPES
    for _ in range(100):
        mid = math.sqrt(lo * hi)  # bisect in log space: k spans three decades
        if _weibull_cv(mid) > cv:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def _weibull_cv(k: float) -> float:
    log_ratio = math.lgamma(1 + 2 / k) - 2 * math.lgamma(1 + 1 / k)
    return math.sqrt(math.expm1(log_ratio))


# --- plumbing ---------------------------------------------------------------------------------


def _renewal(gap: Callable[[], float], duration_s: float) -> Iterator[float]:
    """Arrival times in [0, duration_s) of a process whose successive gaps ``gap()`` draws."""
    t = gap()
    while t < duration_s:
        yield t
        t += gap()


def _poisson_times(rng: random.Random, rate: float, span_s: float) -> Iterator[float]:
    return _renewal(lambda: rng.expovariate(rate), span_s) if span_s > 0 else iter(())


def _trace(times: Iterator[float] | list[float], tokens: TokenSampler, seed: int, source: str) -> Trace:
    token_stream = random.Random(f"tokens:{seed}")  # str seeds hash with SHA-512: stable across runs
    requests = tuple(Request(t, *tokens(token_stream)) for t in sorted(times))
    return Trace(requests, source)


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{name}: must be a positive number (got {value!r})")
