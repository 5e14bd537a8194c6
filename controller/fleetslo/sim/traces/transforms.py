"""Pure transformations of a trace: scale its rate or its time axis, cut a window, splice in a spike.

Each takes a ``Trace`` and returns a new one, sorted by arrival; randomised ones take an explicit seed
and are deterministic. ``source`` records what was done, so a report can say which traffic it replayed.

**How ``rate_scale`` changes the rate** (× k requests per second, same duration and time structure):

* k < 1 — independent thinning: each request is kept with probability k.
* k > 1 — superposition: the original trace, plus ⌊k⌋ − 1 full copies, plus one copy thinned to the
  fractional part. Each copy keeps every request's token counts (so the joint length distribution is
  the trace's own) and moves each arrival forward by an independent uniform jitter in ``[0, jitter_s)``
  (default 1 s): far below the 15 s decision interval and the 1-minute SLO window, so the rate curve at
  those scales is k × the original (bursts stay where they were, k times taller) while no two copies of
  a request arrive at the same instant. The trace end grows by less than ``jitter_s``.

This module must not read files or know about the engine model.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections.abc import Iterable

from fleetslo.core.errors import ConfigError
from fleetslo.sim.workload import Request, Trace

DEFAULT_JITTER_S = 1.0


def rate_scale(trace: Trace, factor: float, *, seed: int = 0, jitter_s: float = DEFAULT_JITTER_S) -> Trace:
    """The trace with ``factor`` × its arrival rate (see the module docstring for the method)."""
    _check_positive("rate scale", factor)
    _check_non_negative("jitter_s", jitter_s)
    scaled = _scaled(trace.requests, factor, random.Random(seed), jitter_s)
    return _sorted(scaled, f"{trace.source} ×{factor:g} rate (seed {seed})")


def time_scale(trace: Trace, factor: float) -> Trace:
    """Stretch time by ``factor``: arrival × factor. 2 plays the trace over twice as long (half the rate);
    0.5 compresses it into half the time (twice the rate). Token counts are unchanged."""
    _check_positive("time scale", factor)
    requests = tuple(Request(r.arrival_s * factor, r.input_tokens, r.output_tokens) for r in trace.requests)
    return Trace(requests, f"{trace.source} ×{factor:g} time")


def window(trace: Trace, start_s: float, duration_s: float | None = None) -> Trace:
    """Requests arriving in ``[start_s, start_s + duration_s)``, re-based so ``start_s`` becomes 0.

    ``duration_s`` None means to the end of the trace.
    """
    _check_non_negative("start", start_s)
    if duration_s is not None:
        _check_positive("duration", duration_s)
    end = math.inf if duration_s is None else start_s + duration_s
    times = [r.arrival_s for r in trace.requests]
    lo, hi = bisect_left(times, start_s), bisect_left(times, end)
    requests = tuple(_moved(r, r.arrival_s - start_s) for r in trace.requests[lo:hi])
    span = "end" if duration_s is None else f"{end:g}s"
    return Trace(requests, f"{trace.source} [{start_s:g}s, {span})")


def splice_spike(
    trace: Trace,
    at_s: float,
    factor: float,
    duration_s: float,
    *,
    seed: int = 0,
    jitter_s: float = DEFAULT_JITTER_S,
) -> Trace:
    """The trace with its rate multiplied by ``factor`` in ``[at_s, at_s + duration_s)``: a sudden step.

    Inside the interval the requests are rate-scaled exactly as ``rate_scale`` does; jittered copies
    that would leave the interval wrap around to its start, so the step has sharp edges and the
    traffic outside it is untouched.
    """
    _check_non_negative("spike start", at_s)
    _check_positive("spike duration", duration_s)
    _check_positive("spike factor", factor)
    _check_non_negative("jitter_s", jitter_s)
    end = at_s + duration_s
    inside = [r for r in trace.requests if at_s <= r.arrival_s < end]
    outside = [r for r in trace.requests if not at_s <= r.arrival_s < end]
    spiked = [
        _moved(r, at_s + (r.arrival_s - at_s) % duration_s)
        for r in _scaled(inside, factor, random.Random(seed), jitter_s)
    ]
    desc = f"{trace.source} + spike ×{factor:g} at {at_s:g}s for {duration_s:g}s (seed {seed})"
    return _sorted([*outside, *spiked], desc)


# --- plumbing ---------------------------------------------------------------------------------


def _scaled(requests: Iterable[Request], factor: float, rng: random.Random, jitter_s: float) -> list[Request]:
    """Thinning and jittered superposition (module docstring); copy 0 is never moved."""
    source = list(requests)
    out: list[Request] = []
    for copy in range(math.ceil(factor)):
        keep = min(1.0, factor - copy)
        for r in source:
            if keep < 1.0 and rng.random() >= keep:
                continue
            out.append(r if copy == 0 else _moved(r, r.arrival_s + rng.random() * jitter_s))
    return out


def _moved(r: Request, arrival_s: float) -> Request:
    return Request(arrival_s, r.input_tokens, r.output_tokens)


def _sorted(requests: list[Request], source: str) -> Trace:
    requests.sort(key=lambda r: r.arrival_s)
    return Trace(tuple(requests), source)


def _check_positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{name}: must be a positive number (got {value!r})")


def _check_non_negative(name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{name}: must be a number >= 0 (got {value!r})")
