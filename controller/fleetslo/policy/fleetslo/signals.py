"""What the ``fleetslo`` policy reads off one observation: usable or not, load, pressure.

Pure functions of an ``Observation`` (and, for the arrival rate and service time, the previous
value). A signal that is missing stays ``None`` here; the policy decides what that means.
"""

from __future__ import annotations

import math

from fleetslo.core.model import Observation, Reason
from fleetslo.core.spec import FleetSLOSpec

#: Smoothing of the service-time estimate, per decision: ``running`` is an instant gauge that
#: swings ±50 % between scrapes while the completion rate is a one-minute average.
_SERVICE_SMOOTHING = 0.1


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
    values = {
        "request_rate": obs.request_rate, "running": obs.running, "waiting": obs.waiting,
        "ttft p90": obs.ttft.p90, "tpot p90": obs.tpot.p90,
    }  # fmt: skip
    for name, value in values.items():
        if value is not None and (value < 0 or math.isnan(value)):
            return f"{name} is {value}"
    for name, q in (("ttft", obs.ttft), ("tpot", obs.tpot)):
        if q.p50 is not None and q.p99 is not None and q.p50 > q.p99:
            return f"{name} p50 {q.p50} above its p99 {q.p99}"
    if obs.replicas_reporting > obs.replicas.ready + obs.replicas.draining:
        return f"{obs.replicas_reporting} replicas reporting but only {obs.replicas.ready} ready"
    return None


def arrival_rate(obs: Observation, last_waiting: tuple[float, float] | None, now: float) -> float | None:
    """Completions per second plus the growth of the queue: what arrives, not just what is served."""
    if obs.request_rate is None:
        return None
    growth = 0.0
    if last_waiting is not None and obs.waiting is not None and now > last_waiting[0]:
        growth = max(0.0, (obs.waiting - last_waiting[1]) / (now - last_waiting[0]))
    return obs.request_rate + growth


def service_time(obs: Observation, previous: float | None) -> float | None:
    sample = obs.running / obs.request_rate if obs.request_rate and obs.running else None
    return smooth(sample, previous, _SERVICE_SMOOTHING)


def smooth(sample: float | None, previous: float | None, weight: float) -> float | None:
    """Exponential smoothing: ``weight`` of the new sample; the first sample as is; without a
    sample, the previous value."""
    if sample is None or previous is None:
        return previous if sample is None else sample
    return weight * sample + (1 - weight) * previous


def tokens_per_replica(obs: Observation) -> float | None:
    """Prompt + generated tokens per second per reporting replica: the load axis of the latency
    model (the work a replica does, whatever the request mix)."""
    tokens = tokens_rate(obs)
    if not tokens or obs.replicas_reporting <= 0:
        return None
    return tokens / obs.replicas_reporting


def tokens_per_request(obs: Observation) -> float | None:
    """The current request mix: prompt + generated tokens per completed request."""
    tokens = tokens_rate(obs)
    if not tokens or not obs.request_rate:
        return None
    return tokens / obs.request_rate


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
    return obs.tpot.p90 if obs.tpot.p90 is not None else obs.itl.p90


def pressure(obs: Observation, spec: FleetSLOSpec) -> float | None:
    ratios = []
    if obs.ttft.p90 is not None:
        ratios.append(obs.ttft.p90 / spec.objectives.ttft.threshold)
    tpot = tpot_p90(obs)
    if tpot is not None:
        ratios.append(tpot / spec.objectives.tpot.threshold)
    return max(ratios) if ratios else None


def predicted_ttft(obs: Observation, replicas: int) -> float | None:
    if obs.ttft.p90 is None or replicas <= 0:
        return None
    return obs.ttft.p90 * max(obs.replicas.ready, 1) / replicas
