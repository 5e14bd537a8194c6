"""Fresh shapes (issue 13): eight workloads written on 2026-12-05 to look for what no set had shown.

The suite, the held-out set, its variants and the probes were all used to choose or check a
default by now. These change what those keep: traffic that comes and goes (on 8 minutes, off 4),
a steady Poisson stream of short API calls under a 1 s TTFT target, answers twelve times longer,
a load that swings x4 every 20 minutes, a dip to 0.3x for 20 minutes, code traffic with short
prompts and long answers, six other hours of the ServeGen reasoning model, and gamma-distributed
gaps of CV 3. They were run against the defaults as they stood (results in the README's policy
section); one change was kept from them (``FleetSLOPolicy._plan``: loads sized on windows
overlapping a lull are not checked), so those eight no longer count as unseen.
``BENCH_POLICY_SET=fresh``; not in ``make bench``.
"""

from __future__ import annotations

from fleetslo.sim.traces import (
    bursty,
    diurnal,
    load_trace,
    lognormal_tokens,
    poisson,
    rate_scale,
    resampled_tokens,
    splice_spike,
)
from fleetslo.sim.traces.synthetic import TokenSampler
from fleetslo.sim.workload import Trace

from benchmarks.heldout import servegen_span
from benchmarks.workloads import CODE, CONV, TRACES, Workload, lengths

_HOUR = 3600.0


def _conv(scale: float) -> Trace:
    return rate_scale(load_trace(TRACES / CONV), scale, seed=5)


def on_off(trace: Trace, on_s: float, off_s: float) -> Trace:
    """Only the requests of ``trace`` arriving in the first ``on_s`` of every ``on_s + off_s``."""
    period = on_s + off_s
    kept = tuple(r for r in trace.requests if r.arrival_s % period < on_s)
    return Trace(kept, f"{trace.source}, on {on_s:g} s / off {off_s:g} s")


def _conv_mix() -> TokenSampler:
    return resampled_tokens(load_trace(TRACES / CONV))


FRESH: tuple[Workload, ...] = (
    Workload("on 8 min / off 4 (azure-conv x8)", lambda: on_off(_conv(8), 480.0, 240.0), "bursty"),
    Workload(
        "short API calls (Poisson 180/s, prompt ~300, output ~40; 1s / 50ms)",
        lambda: poisson(180.0, _HOUR, lognormal_tokens(300, 40, 0.8, max_tokens=4000), seed=2),
        "smooth", ttft_s=1.0,
    ),
    Workload(
        "long answers (outputs x12, azure-conv x4)",
        lambda: rate_scale(lengths(load_trace(TRACES / CONV), output=12), 4, seed=5), "smooth",
    ),
    Workload(
        "x4 swing every 20 min (30/s mean, conv mix)",
        lambda: diurnal(30.0, _HOUR, _conv_mix(), seed=4, amplitude=0.6, period_s=1200.0, peak_at_s=600.0),
        "bursty",
    ),
    Workload(
        "dip to 0.3x from 15 to 35 min (azure-conv x10)",
        lambda: splice_spike(_conv(10), 900.0, 0.3, 1200.0, seed=1), "step", step_at_s=2100.0,
    ),
    Workload(
        "code, prompts x0.5 and outputs x4 (azure-code x4)",
        lambda: rate_scale(lengths(load_trace(TRACES / CODE), prompt=0.5, output=4), 4, seed=5), "bursty",
    ),
    Workload(
        "reasoning model 08:00-14:00 in 1 h (ServeGen deepseek-r1 x2)",
        lambda: servegen_span("reason/deepseek-r1", 8 * _HOUR, 6 * _HOUR, 2.0, compress=6.0), "smooth",
    ),
    Workload(
        "gamma gaps CV 3 (40/s, conv mix)",
        lambda: bursty(40.0, _HOUR, 3.0, _conv_mix(), seed=6), "bursty",
    ),
)  # fmt: skip
