"""The policy benchmark's workload suite (issue 13): real traces reshaped into the traffic a fleet of
4-60 replicas meets — chat, bursty code, prefill-heavy, decode-heavy, long-context, a drifting
mix, a 3x step, a 3x ramp, a compressed diurnal day from ServeGen, a small and a large fleet, and
a tight and a loose SLO pair.

Each ``Workload`` builds its trace deterministically (seeded); nothing here runs a policy. The
length and rate reshaping helpers are small and local to the benchmark on purpose: the simulator's
trace package (``fleetslo.sim.traces``) owns the general transforms and the ServeGen reader.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fleetslo.sim.traces import load_trace, rate_scale, splice_spike
from fleetslo.sim.workload import Request, Trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
#: Where the shared folder (ServeGen's per-client data) sits: beside the checkout, as for a clone
#: in CI, or one level further up (the places ``bench_days`` looks too).
SHARED = (ROOT.parent / "shared", ROOT.parents[1] / "shared")
CONV = "azure2023/AzureLLMInferenceTrace_conv.csv"
CODE = "azure2023/AzureLLMInferenceTrace_code.csv"
MAX_CONTEXT = 120_000


@dataclass(frozen=True)
class Workload:
    name: str
    build: Callable[[], Trace]
    #: "smooth": judged against the oracle; "step": a sudden step or a fast ramp (judged against
    #: the no-foresight frontier and on its recovery); "bursty": judged on dominance.
    kind: str
    ttft_s: float = 2.0
    tpot_s: float = 0.05
    #: When a step or ramp begins (seconds), for the post-step verdicts.
    step_at_s: float | None = None
    max_replicas: int = 96
    #: The engine profile and cold start (None: ``bench_policy.PROFILE`` and its own cold start).
    profile: str | None = None
    cold_start_s: float | None = None


def shared_traces(relative: str) -> Path:
    """The folder ``traces/<relative>`` of the shared folder (``SHARED``)."""
    for root in SHARED:
        folder = root / "traces" / relative
        if folder.is_dir():
            return folder
    raise FileNotFoundError(f"traces/{relative}: not found under {', '.join(map(str, SHARED))}")


def _trace(path: str) -> Trace:
    return load_trace(TRACES / path)


def lengths(trace: Trace, prompt: float = 1.0, output: float = 1.0) -> Trace:
    """Every prompt × ``prompt`` and output × ``output`` (capped at the context), arrivals unchanged."""
    return Trace(
        tuple(
            Request(
                r.arrival_s,
                min(MAX_CONTEXT, max(1, round(r.input_tokens * prompt))),
                min(MAX_CONTEXT // 4, max(1, round(r.output_tokens * output))),
            )
            for r in trace.requests
        ),
        f"{trace.source} prompts x{prompt:g} outputs x{output:g}",
    )


def drifting(trace: Trace, until_s: float, factor: float) -> Trace:
    """Prompt lengths growing linearly from ×1 at 0 to ×``factor`` at ``until_s``, then held."""

    def scale(t: float) -> float:
        return 1 + (factor - 1) * min(1.0, t / until_s)

    return Trace(
        tuple(
            Request(
                r.arrival_s,
                min(MAX_CONTEXT, max(1, round(r.input_tokens * scale(r.arrival_s)))),
                r.output_tokens,
            )
            for r in trace.requests
        ),
        f"{trace.source} prompts drifting to x{factor:g} by {until_s:g}s",
    )


def shaped(trace: Trace, curve: Callable[[float], float], top: float, *, seed: int = 0) -> Trace:
    """The trace with its rate × ``curve(t)`` (at most ``top``): rate-scaled by ``top``, then each
    arrival kept with probability ``curve(t) / top``."""
    scaled = rate_scale(trace, top, seed=seed) if top != 1.0 else trace
    rng = random.Random(seed + 1)
    return Trace(tuple(r for r in scaled.requests if rng.random() < curve(r.arrival_s) / top), trace.source)


def ramp(trace: Trace, start_s: float, duration_s: float, factor: float, *, seed: int = 0) -> Trace:
    """The rate ×1 before ``start_s``, rising linearly to ×``factor`` over ``duration_s``, then held."""

    def curve(t: float) -> float:
        return 1 + (factor - 1) * min(1.0, max(0.0, (t - start_s) / duration_s))

    kept = shaped(trace, curve, factor, seed=seed).requests
    return Trace(kept, f"{trace.source} ramp x{factor:g} from {start_s:g}s over {duration_s:g}s")


def servegen_day(day_s: float, rate: float, tokens: Trace, *, seed: int = 0) -> Trace:
    """ServeGen m-small's first day of aggregate request rate (sum of its clients, 10-minute
    windows), compressed into ``day_s`` seconds and scaled to a mean of ``rate`` requests/s,
    Poisson within each window; lengths resampled from ``tokens``."""
    windows: dict[float, float] = {}
    for path in sorted(shared_traces("servegen/language/m-small").glob("chunk-*-trace.csv")):
        with path.open(newline="") as handle:
            for row in csv.reader(handle):
                start, value = float(row[0]), float(row[1] or 0.0)
                if start < 86_400:
                    windows[start] = windows.get(start, 0.0) + value
    curve = [windows[k] for k in sorted(windows)]
    mean = sum(curve) / len(curve)
    rng = random.Random(seed)
    width = day_s / len(curve)
    pool = tokens.requests
    requests: list[Request] = []
    for i, level in enumerate(curve):
        lam = rate * level / mean
        t = i * width
        while lam > 0:
            t += rng.expovariate(lam)
            if t >= (i + 1) * width:
                break
            sample = pool[rng.randrange(len(pool))]
            requests.append(Request(t, sample.input_tokens, sample.output_tokens))
    return Trace(tuple(requests), f"ServeGen m-small day 1 in {day_s:g}s, mean {rate:g}/s")


def _conv(rate: float) -> Callable[[], Trace]:
    return lambda: rate_scale(_trace(CONV), rate, seed=0)


WORKLOADS: tuple[Workload, ...] = (
    Workload("chat (azure-conv x15)", _conv(15), "smooth"),
    Workload("bursty code (azure-code x4)", lambda: rate_scale(_trace(CODE), 4, seed=0), "bursty"),
    Workload(
        "prefill-heavy (prompts x8, x2, TTFT 8s)",
        lambda: rate_scale(lengths(_trace(CONV), prompt=8), 2, seed=0),
        "smooth",
        ttft_s=8.0,
    ),
    Workload(
        "decode-heavy (outputs x6, x3)",
        lambda: rate_scale(lengths(_trace(CONV), output=6), 3, seed=0),
        "smooth",
    ),
    Workload(
        "long-context (prompts x16, p50 16k, TTFT 10s)",
        lambda: rate_scale(lengths(_trace(CONV), prompt=16), 1, seed=0),
        "smooth",
        ttft_s=10.0,
    ),
    Workload(
        "drifting mix (prompts x1->x2 in 30 min, x10)",
        lambda: drifting(rate_scale(_trace(CONV), 10, seed=0), 1800.0, 2.0),
        "smooth",
    ),
    Workload(
        "3x step at 10 min (azure-conv x6)",
        lambda: splice_spike(rate_scale(_trace(CONV), 6, seed=0), 600.0, 3.0, 3000.0, seed=0),
        "step",
        step_at_s=600.0,
    ),
    Workload(
        "x3 ramp over 20 min (azure-conv x1 -> x3)",
        lambda: ramp(_trace(CONV), 600.0, 1200.0, 3.0),
        "step",
        step_at_s=600.0,
    ),
    Workload(
        "diurnal (ServeGen day in 2 h, conv mix)",
        lambda: servegen_day(7200.0, 8.0, _trace(CONV)),
        "smooth",
    ),
    Workload("small fleet (azure-conv x2)", _conv(2), "smooth"),
    Workload("large fleet (azure-conv x40)", _conv(40), "smooth", max_replicas=200),
    Workload("tight SLO (1s / 40ms, x15)", _conv(15), "smooth", ttft_s=1.0, tpot_s=0.04),
    Workload("loose SLO (5s / 100ms, x15)", _conv(15), "smooth", ttft_s=5.0, tpot_s=0.1),
)

#: The quick subset (``BENCH_POLICY_QUICK=1`` and the scenario tests): the issue's two failures.
QUICK = (
    "prefill-heavy (prompts x8, x2, TTFT 8s)",
    "3x step at 10 min (azure-conv x6)",
    "chat (azure-conv x15)",
)


def by_name(name: str) -> Workload:
    for workload in WORKLOADS:
        if workload.name == name:
            return workload
    raise KeyError(name)


def duration(trace: Trace) -> float:
    return trace.requests[-1].arrival_s if trace.requests else 0.0


__all__ = [
    "QUICK", "WORKLOADS", "Workload", "by_name", "drifting", "lengths", "ramp", "servegen_day",
    "shared_traces",
]  # fmt: skip
