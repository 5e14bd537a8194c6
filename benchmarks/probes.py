"""Probes (issue 13): the policy on engines, cold starts and target pairs the suite never uses.

Every workload of the suite and of ``heldout.py`` runs on one engine (``bench_policy.PROFILE``, the
MI325X TP4 profile, 5-minute cold start). A default that only holds there would go unseen; these
eight change what the suite keeps fixed: the engine (a small model on one GPU, TP8 replicas, the
MI300X), the cold start (1, 2 and 10 minutes), the targets (0.5 s / 20 ms, 1 s / 35 ms,
3 s / 70 ms), and the data (ServeGen days and hours the other sets never read, and code traffic with
both lengths changed). They were written down and run once against the defaults as they stood on
2026-12-05; no default was chosen on them (``BENCH_POLICY_SET=probes``, not in ``make bench``).
"""

from __future__ import annotations

from collections.abc import Callable

from fleetslo.sim.traces import load_trace, rate_scale, splice_spike
from fleetslo.sim.workload import Trace

from benchmarks.heldout import servegen_span
from benchmarks.workloads import CODE, CONV, TRACES, Workload, lengths

_DAY = 86_400.0
_MI300X = "mi300x-qwen3-235b-fp8-tp4"


def _conv(scale: float) -> Callable[[], Trace]:
    return lambda: rate_scale(load_trace(TRACES / CONV), scale, seed=3)


PROBES: tuple[Workload, ...] = (
    Workload(
        "Llama 8B on one MI300X, 1-min cold start (azure-conv x20, 0.5s / 20ms)",
        _conv(20), "smooth", ttft_s=0.5, tpot_s=0.02, profile="mi300x-llama3.1-8b-fp8-tp1",
    ),
    Workload("TP8 replicas (azure-conv x10)", _conv(10), "smooth", profile="mi325x-qwen3-235b-fp8-tp8"),
    Workload(
        "MI300X TP4, 10-min cold start (azure-code x3)",
        lambda: rate_scale(load_trace(TRACES / CODE), 3, seed=3),
        "bursty", profile=_MI300X, cold_start_s=600.0,
    ),
    Workload(
        "2.5x step at 15 min, 2-min cold start (azure-conv x5)",
        lambda: splice_spike(_conv(5)(), 900.0, 2.5, 1e9, seed=3),
        "step", step_at_s=900.0, cold_start_s=120.0,
    ),
    Workload(
        "m-mid day 6 in 2 h, 1s / 35ms (ServeGen x0.024)",
        lambda: servegen_span("language/m-mid", 5 * _DAY, _DAY, 0.024, compress=12.0),
        "smooth", ttft_s=1.0, tpot_s=0.035,
    ),
    Workload(
        "m-small day 12 08:00-10:00 real time (ServeGen x0.05)",
        lambda: servegen_span("language/m-small", 11 * _DAY + 8 * 3600.0, 7200.0, 0.05), "bursty",
    ),
    Workload(
        "code, prompts x2 and outputs x3 (azure-code x6)",
        lambda: rate_scale(lengths(load_trace(TRACES / CODE), prompt=2, output=3), 6, seed=3), "bursty",
    ),
    Workload("conversation at 3s / 70ms (azure-conv x12)", _conv(12), "smooth", ttft_s=3.0, tpot_s=0.07),
)  # fmt: skip
