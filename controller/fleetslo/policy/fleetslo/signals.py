"""What the ``fleetslo`` policy reads off one observation: usable or not, load, pressure.

Pure functions of an ``Observation`` (and, for the arrival rate, the previous value). A signal
that is missing stays ``None`` here; the policy decides what that means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fleetslo.core.model import Observation, Quantiles, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.fleetslo.mix import RequestMix, measured


def data_problem(obs: Observation, stale_after_s: float) -> tuple[Reason, str] | None:
    """Why this observation cannot be acted on, or ``None`` if it can."""
    if obs.replicas.ready == 0:
        return Reason.HOLD_REPLICAS_STARTING, f"no replica ready yet ({obs.replicas.starting} starting)"
    if obs.replicas_reporting == 0 or obs.data_age is None:
        return Reason.HOLD_NO_DATA, "no replica reported metrics"
    if obs.data_age > stale_after_s:
        return Reason.HOLD_STALE_DATA, f"newest data is {obs.data_age:.0f}s old (limit {stale_after_s:.0f}s)"
    if obs.request_rate is None and obs.running is None:
        return Reason.HOLD_NO_DATA, "neither request rate nor running requests are known"
    why = contradiction(obs)
    if why:
        return Reason.HOLD_CONTRADICTORY_DATA, why
    return None


def contradiction(obs: Observation) -> str | None:
    """Why the numbers cannot all be true: a negative or non-finite value in *any* signal the
    policy may read (a NaN ITL or token rate is as unusable as a NaN TPOT), p50 above p99, more
    replicas reporting than exist."""
    values = {
        "request_rate": obs.request_rate, "running": obs.running, "waiting": obs.waiting,
        "prompt_tokens_rate": obs.prompt_tokens_rate, "generation_tokens_rate": obs.generation_tokens_rate,
        "preemption_rate": obs.preemption_rate, "kv_cache_usage": obs.kv_cache_usage,
        "gpu_utilization": obs.gpu_utilization,
        "ttft_attainment": obs.ttft_attainment, "tpot_attainment": obs.tpot_attainment,
    }  # fmt: skip
    for name, q in (("ttft", obs.ttft), ("tpot", obs.tpot), ("itl", obs.itl)):
        values.update({f"{name} p50": q.p50, f"{name} p90": q.p90, f"{name} p99": q.p99})
    for name, value in values.items():
        if value is not None and (value < 0 or not math.isfinite(value)):
            return f"{name} is {value}"
    for name, q in (("ttft", obs.ttft), ("tpot", obs.tpot)):
        if q.p50 is not None and q.p99 is not None and q.p50 > q.p99:
            return f"{name} p50 {q.p50} above its p99 {q.p99}"
    if obs.replicas_reporting > obs.replicas.ready + obs.replicas.draining:
        return f"{obs.replicas_reporting} replicas reporting but only {obs.replicas.ready} ready"
    return None


def outstanding(obs: Observation) -> float | None:
    """Requests in the fleet: running plus waiting (``None`` when neither gauge is known)."""
    if obs.running is None and obs.waiting is None:
        return None
    return (obs.running or 0.0) + (obs.waiting or 0.0)


def arrival_rate(
    obs: Observation, held: Sequence[tuple[float, float]], now: float, *, drain_share: float
) -> float | None:
    """Completions per second plus the growth of the requests in the fleet (conservation: what
    arrives is what finishes plus what stays), so a step shows before it fills the completion
    rate; never below zero. ``held``: earlier (time, requests in the fleet) samples, oldest first.

    The growth is taken since the last sample, so a queue building shows at once. But the
    completions cover the whole window: once a backlog drains within it (new replicas serving a
    spike's queue), they hold the drain for a window after the growth since the last sample no
    longer does, and the drain would read as arrivals (drawn 94: 160 requests/s read as 225 for
    a minute). So where the fleet drained over the window more than ``drain_share`` of what it
    completed, the growth is taken over the window itself, as the completions are."""
    if obs.request_rate is None:
        return None
    current = outstanding(obs)
    if not held or current is None:
        return max(0.0, obs.request_rate)
    recent = _growth(held[-1], current, now)
    start = held[0]
    for sample in held:
        if sample[0] <= now - obs.window + 1e-6:
            start = sample
    whole = _growth(start, current, now)
    drained = whole is not None and -whole > drain_share * obs.request_rate
    growth = whole if drained else recent
    return max(0.0, obs.request_rate + (growth or 0.0))


def remember(
    history: tuple[tuple[float, float], ...], now: float, value: float | None, keep_s: float
) -> tuple[tuple[float, float], ...]:
    """The (time, value) samples of the last ``keep_s`` seconds with ``(now, value)`` added
    (unchanged without a reading): a window and a little more, so that a change over the window
    has a sample at or before its start."""
    if value is None:
        return history
    return (*(h for h in history if h[0] >= now - keep_s), (now, value))


def _growth(sample: tuple[float, float], current: float, now: float) -> float | None:
    """Requests in the fleet gained per second since ``sample``."""
    return (current - sample[1]) / (now - sample[0]) if now > sample[0] else None


def smooth(sample: float | None, previous: float | None, weight: float) -> float | None:
    """Exponential smoothing: ``weight`` of the new sample; the first sample as is; without a
    sample, the previous value."""
    if sample is None or previous is None:
        return previous if sample is None else sample
    return weight * sample + (1 - weight) * previous


def request_mix(obs: Observation) -> RequestMix | None:
    """This window's request mix: mean lengths from the token counters, shapes from the length
    histograms (``None`` without the token counters: nothing to size by)."""
    if not obs.request_rate or obs.prompt_tokens_rate is None or obs.generation_tokens_rate is None:
        return None
    return measured(
        obs.prompt_tokens_rate / obs.request_rate,
        obs.generation_tokens_rate / obs.request_rate,
        obs.prompt_lengths,
        obs.output_lengths,
    )


def decode_life(obs: Observation, mix: RequestMix) -> float:
    """Seconds the longest answers of ``mix`` (its top point) spend in a replica at this window's
    p90 TTFT and TPOT: how long before the window the requests behind its p90 TPOT began, since
    vLLM observes a request's TPOT when it finishes (its TTFT at the first token). 0 without TPOT."""
    if obs.tpot.p90 is None:
        return 0.0
    return (obs.ttft.p90 or 0.0) + max(mix.output) * obs.tpot.p90


def tokens_rate(obs: Observation) -> float | None:
    if obs.prompt_tokens_rate is None or obs.generation_tokens_rate is None:
        return None
    return obs.prompt_tokens_rate + obs.generation_tokens_rate


def running_per_replica(obs: Observation) -> float | None:
    if obs.running is None or obs.replicas_reporting <= 0:
        return None
    return obs.running / obs.replicas_reporting


def reporting_scale(obs: Observation) -> float:
    """Sums over the reporting replicas, scaled up to all ready ones."""
    if obs.replicas_reporting <= 0:
        return 1.0
    return max(obs.replicas.ready, obs.replicas_reporting) / obs.replicas_reporting


def tpot_p90(obs: Observation) -> float | None:
    return tpot_quantiles(obs).p90


def tpot_quantiles(obs: Observation) -> Quantiles:
    """Per-request TPOT, or inter-token latency where the engine has no TPOT histogram."""
    return obs.tpot if obs.tpot.p90 is not None else obs.itl


def pressure(obs: Observation, spec: FleetSLOSpec) -> float | None:
    ratios = []
    if obs.ttft.p90 is not None:
        ratios.append(obs.ttft.p90 / spec.objectives.ttft.threshold)
    tpot = tpot_p90(obs)
    if tpot is not None:
        ratios.append(tpot / spec.objectives.tpot.threshold)
    return max(ratios) if ratios else None


def breach(obs: Observation, spec: FleetSLOSpec, band: float) -> float | None:
    """The worst p90 over its target when one is above ``band`` × its target, else ``None``.

    A p90 read off buckets is interpolated; where the exact share of requests within the target
    is known (``*_attainment``, exact behind the fleetslo gate) and meets the quantile, the
    target held whatever the interpolation says.
    """
    ratios = [r for r in (ttft_breach(obs, spec, band), tpot_breach(obs, spec, band)) if r is not None]
    return max(ratios, default=None)


def ttft_breach(obs: Observation, spec: FleetSLOSpec, band: float) -> float | None:
    """p90 TTFT over its target, when beyond ``band`` (see ``breach``)."""
    o = spec.objectives.ttft
    return _over(obs.ttft.p90, o.threshold, obs.ttft_attainment, o.quantile, band)


def tpot_breach(obs: Observation, spec: FleetSLOSpec, band: float) -> float | None:
    """p90 TPOT (ITL without it) over its target, when beyond ``band`` (see ``breach``)."""
    o = spec.objectives.tpot
    return _over(tpot_p90(obs), o.threshold, obs.tpot_attainment, o.quantile, band)


def _over(
    p90: float | None, target: float, attained: float | None, quantile: float, band: float
) -> float | None:
    if p90 is None or p90 <= target * band or (attained is not None and attained >= quantile):
        return None
    return p90 / target
