"""The performance model for one replica of a fleet behind the simulator's least-outstanding
router, against that fleet (``python -m benchmarks routed``).

``benchmarks model`` checks the model against one engine offered Poisson arrivals, where it is
exact in form. A fleet's router changes what each replica sees: it sends a request to the
replica holding the fewest, so where replicas are often idle (long prompts, short answers) a
prompt rarely waits behind another's prefill and a short answer rarely decodes beside one. The
model keeps a lone replica's Poisson arrivals on purpose: router-aware forms were measured three
times (stops 37, 40 and 51 of ``docs/policy-log.md``) and each lost windows on bursty traffic,
where that safe-side error is margin. This reports how large the error is, so nobody has to take
it on trust.

Grid: the MI325X TP4 profile; chat, long prompts (4-32k) with answers of 50-500 tokens and the
same prompts with the short answers of a retrieval or agent workload (2-463 tokens); 2, 8 and 24
replicas; 15, 30, 50 and 70 % of the load that fills a replica (``bench_model.full_load``).
Each point runs a static fleet on Poisson arrivals for ``BENCH_ROUTED_S`` (default 900) seconds
and takes the median over its minutes (the first two left out) of each minute's exact p90 TTFT
and TPOT; each prompt is drawn from the continuous distribution whose mid-quantiles the mix's
points are (``sim_support.poisson_requests(continuous=True)``), as real prompts are. Reported per
point: the model's p90s over the fleet's; per mix, the range. Last run (stop 52, the p90 TTFT read
between the prompt points): chat TTFT 1.06-1.44x (the router's gain grows with load), TPOT
0.93-1.03x; long prompts TTFT 1.07-2.33x, TPOT 0.64-1.49x; with short answers TTFT 1.07-2.78x and
TPOT 1.3-1.9x at 15-30 % load on 8-24 replicas, but 0.36-0.77x from 30 % on 2 replicas and
0.18-0.70x at 70 %: a short answer's few decode steps ride the chunks of the prefills queued ahead
of it, a busy period the model leaves out (stop 47), at p90s of 0.2-0.7 s that no TPOT target
lets a fleet reach.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from fleetslo.policy.fleetslo.perf_model import predict
from fleetslo.policy.registry import make_policy
from fleetslo.sim.compare import SimulateOptions, build_scenario, step_cost
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.scenario import run_policy
from fleetslo.sim.workload import Trace

from benchmarks.bench_model import full_load
from tests.unit.sim.sim_support import CHAT, LONG, SHORT_ANSWERS, Lengths, mix_of, poisson_requests

PROFILE = "mi325x-qwen3-235b-fp8-tp4"
ROUTED_MIXES: dict[str, Lengths] = {"chat": CHAT, "long": LONG, "long, short answers": SHORT_ANSWERS}
FLEETS = (2, 8, 24)
LOADS = (0.15, 0.3, 0.5, 0.7)
SECONDS = float(os.environ.get("BENCH_ROUTED_S", "900"))
#: Minutes left out at the start: the fleet fills.
WARMUP_S = 120.0


def fleet_p90s(
    lengths: Lengths,
    replicas: int,
    rate: float,
    seconds: float = SECONDS,
    *,
    warmup_s: float = WARMUP_S,
    seed: int = 7,
) -> tuple[float, float]:
    """The median over the fleet's minutes of each minute's exact p90 TTFT and TPOT: ``replicas``
    engines behind the router, Poisson arrivals at ``rate`` per replica for ``seconds``, the
    first ``warmup_s`` left out."""
    total = rate * replicas
    requests = poisson_requests(lengths, total, max(int(total * seconds), 1), seed=seed, continuous=True)
    options = SimulateOptions(initial_replicas=replicas, min_replicas=replicas, max_replicas=replicas)
    scenario = build_scenario(Trace(tuple(requests), "poisson"), "routed", builtin_profile(PROFILE), options)
    result = run_policy(scenario, make_policy("static", scenario.spec, replicas=replicas), label="static")
    windows = [w for w in result.windows if w.start_s >= warmup_s and w.p90_tpot_s and w.p90_ttft_s]
    return statistics.median(w.p90_ttft_s for w in windows), statistics.median(w.p90_tpot_s for w in windows)


def run(seconds: float = SECONDS) -> dict[str, Any]:
    started = time.perf_counter()
    cost = step_cost(builtin_profile(PROFILE))
    points: list[dict[str, Any]] = []
    for name, lengths in ROUTED_MIXES.items():
        mix = mix_of(lengths)
        top = full_load(cost, mix)
        for replicas in FLEETS:
            for load in LOADS:
                rate = top * load
                ttft, tpot = fleet_p90s(lengths, replicas, rate, seconds)
                model = predict(cost, rate, mix, None)
                points.append({
                    "mix": name, "replicas": replicas, "load": load, "rate": rate,
                    "fleet_ttft": ttft, "model_ttft": model.ttft_p90,
                    "fleet_tpot": tpot, "model_tpot": model.tpot_p90,
                })  # fmt: skip
    return {"points": points, "wall_s": time.perf_counter() - started}


def main() -> None:
    result = run()
    print("mix | replicas | load | req/s per replica | p90 TTFT fleet / model | p90 TPOT fleet / model")
    for p in result["points"]:
        ttft = f"{p['fleet_ttft']:.3f} / {p['model_ttft']:.3f} s ({p['model_ttft'] / p['fleet_ttft']:.2f}x)"
        fleet_ms, model_ms = p["fleet_tpot"] * 1000, p["model_tpot"] * 1000
        tpot = f"{fleet_ms:.1f} / {model_ms:.1f} ms ({model_ms / fleet_ms:.2f}x)"
        print(f"{p['mix']} | {p['replicas']} | {p['load']:.0%} | {p['rate']:.3f} | {ttft} | {tpot}")
    for name in ROUTED_MIXES:
        rows = [p for p in result["points"] if p["mix"] == name]
        ttft = [p["model_ttft"] / p["fleet_ttft"] for p in rows]
        tpot = [p["model_tpot"] / p["fleet_tpot"] for p in rows]
        print(
            f"{name}: model / fleet, TTFT {min(ttft):.2f}-{max(ttft):.2f}x, "
            f"TPOT {min(tpot):.2f}-{max(tpot):.2f}x"
        )
    print(f"{result['wall_s']:.0f} s")
