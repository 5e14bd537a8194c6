"""Efficiency over a window, joining GPU telemetry with vLLM's generated tokens: the numbers
behind "cost per token".

* ``tokens_per_joule``: generated tokens per joule of GPU energy (token rate / power).
* GPU-seconds per 1,000 generated tokens, on two bases: ``allocated`` (GPUs x wall time, what
  is paid for whether busy or not) and ``busy`` (the integral of utilization, what was used).

Energy comes only from a real hardware counter (amdsmi, amd-smi, rocm-smi, NVML); sysfs has none
and power is deliberately not integrated into a fake one, so there the efficiency is absent.
A counter that went down (driver reload) counts from zero, as ``increase()`` does. Anything
missing or incomplete gives ``None``, never 0; a true zero (no tokens while GPUs drew power)
stays 0 tokens per joule.

Pure functions and value types; the sampler keeps the history, the collector publishes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fleetslo.core.model import GpuSample

#: A window whose GPUs had a readable utilization for less than this share of the time has no
#: busy GPU-seconds: a gap would read as idle time.
MIN_COVERAGE = 0.9


@dataclass(frozen=True, slots=True)
class GpuTotals:
    """Cumulative per-GPU quantities at one sample, keyed by ``GpuSample.key``."""

    gpus: int
    energy_joules: Mapping[str, float] = field(default_factory=dict)
    busy_seconds: Mapping[str, float] = field(default_factory=dict)
    observed_seconds: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuWindow:
    """What the selected GPUs did over ``seconds``; ``None`` fields could not be measured."""

    seconds: float
    gpus: int
    energy_joules: float | None
    busy_gpu_seconds: float | None


@dataclass(frozen=True, slots=True)
class Efficiency:
    tokens_per_joule: float | None = None
    busy_gpu_seconds_per_1k_tokens: float | None = None
    allocated_gpu_seconds_per_1k_tokens: float | None = None


@dataclass(frozen=True, slots=True)
class TokenWindow:
    """Generated tokens of one model over one of the exporter's windows (from the vLLM side)."""

    model_name: str
    #: The nominal window, as in the ``window`` label (e.g. 300 for ``5m``).
    window: float
    #: Increase of ``vllm:generation_tokens_total`` over the window; ``None`` if unknown.
    tokens: float | None
    #: The real span the increase covers (scrapes jitter); the nominal window if not known.
    seconds: float | None = None


def advance(previous: tuple[float, GpuTotals] | None, at: float, samples: Sequence[GpuSample],
            max_gap: float) -> GpuTotals:  # fmt: skip
    """The totals after ``samples`` taken at ``at``.

    Utilization is integrated over the time since the previous sample, but only across gaps up
    to ``max_gap``: after a hung read the current utilization says nothing about the gap.
    """
    dt = 0.0
    if previous is not None and 0 < at - previous[0] <= max_gap:
        dt = at - previous[0]
    before = previous[1] if previous is not None else GpuTotals(0)
    busy, observed = dict(before.busy_seconds), dict(before.observed_seconds)
    for s in samples:
        if s.utilization is not None:
            busy[s.key] = busy.get(s.key, 0.0) + s.utilization * dt
            observed[s.key] = observed.get(s.key, 0.0) + dt
    energy = {s.key: s.energy_joules for s in samples if s.energy_joules is not None}
    return GpuTotals(len(samples), energy, busy, observed)


def gpu_window(start: tuple[float, GpuTotals], end: tuple[float, GpuTotals]) -> GpuWindow | None:
    """The window between two totals; ``None`` if it is empty."""
    seconds = end[0] - start[0]
    if seconds <= 0 or end[1].gpus == 0:
        return None
    return GpuWindow(seconds, end[1].gpus, _energy(start[1], end[1]), _busy(start[1], end[1], seconds))


def _energy(start: GpuTotals, end: GpuTotals) -> float | None:
    """Summed per GPU; ``None`` unless every GPU has a counter at both ends."""
    if len(end.energy_joules) != end.gpus or start.energy_joules.keys() != end.energy_joules.keys():
        return None
    total = 0.0
    for key, value in end.energy_joules.items():
        old = start.energy_joules[key]
        total += value - old if value >= old else value
    return total


def _busy(start: GpuTotals, end: GpuTotals, seconds: float) -> float | None:
    observed = sum(v - start.observed_seconds.get(k, 0.0) for k, v in end.observed_seconds.items())
    if observed < MIN_COVERAGE * end.gpus * seconds:
        return None
    return sum(v - start.busy_seconds.get(k, 0.0) for k, v in end.busy_seconds.items())


def efficiency(tokens: float | None, tokens_seconds: float | None, gpu: GpuWindow | None) -> Efficiency:
    """Join a model's generated tokens with what its GPUs did, as rates, so the two windows need
    not cover exactly the same span. ``tokens_seconds`` ``None`` means the GPU window's span."""
    if tokens is None or gpu is None or tokens < 0:
        return Efficiency()
    token_rate = tokens / (tokens_seconds or gpu.seconds)
    per_joule = None
    if gpu.energy_joules is not None and gpu.energy_joules > 0:
        per_joule = token_rate / (gpu.energy_joules / gpu.seconds)
    if token_rate <= 0:
        return Efficiency(tokens_per_joule=per_joule)
    busy = None if gpu.busy_gpu_seconds is None else gpu.busy_gpu_seconds / gpu.seconds / token_rate * 1000
    return Efficiency(per_joule, busy, gpu.gpus / token_rate * 1000)
