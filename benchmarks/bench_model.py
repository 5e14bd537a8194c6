"""The performance model against the simulator's engine, one replica, from light load to its knee.

``perf_model.predict`` gives p90 TTFT and TPOT for a replica offered a Poisson rate of a request
mix. This offers the same rate to the engine the simulator runs (vLLM V1's scheduler: chunked
prefill, a token budget, ``max_num_seqs``) and compares, over three profiles (MI325X TP4 and TP8
Qwen3-235B, the MI300X 8B), three mixes (short prompts and answers, chat, 4-32k-token prompts)
and six loads each: 20, 40, 60, 75, 85 and 105 % of the rate at which the step physics leaves no
time for the fixed cost of a step (``w = 1``). A point where the engine's p90 TTFT runs past 20 times
its lightest point's is past the knee: its queue grows over the run, and the model should say
so (``limited`` or an infinite TTFT), not a number.

Reported: each point's p90s and their ratios, the share of points below the knee where TTFT is
within 20 % (target: ≥ 90 %) and TPOT within 20 % (reported: the model's TPOT reads low near the
knee on a lone Poisson replica, see ``tests/unit/sim/test_model_near_saturation.py``), and the
points past the knee the model calls unbounded (target: all). ``BENCH_MODEL_REQUESTS`` (default
5000) requests per point.
"""

from __future__ import annotations

import math
import os
import random
import time
from typing import Any

from fleetslo.policy.fleetslo.mix import RequestMix
from fleetslo.policy.fleetslo.perf_model import predict
from fleetslo.policy.fleetslo.physics import StepCost
from fleetslo.sim.compare import step_cost
from fleetslo.sim.harness import make_engine, replay_open
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.workload import Request

Lengths = tuple[tuple[int, ...], tuple[int, ...]]
REQUESTS = int(os.environ.get("BENCH_MODEL_REQUESTS", "5000"))
PROFILES = ("mi325x-qwen3-235b-fp8-tp4", "mi325x-qwen3-235b-fp8-tp8", "mi300x-llama3.1-8b-fp8-tp1")
#: (prompt points, output points): requests draw each length uniformly from its points.
MIXES: dict[str, Lengths] = {
    "short": ((100, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500),
              (20, 40, 50, 60, 70, 80, 90, 100, 120, 150)),
    "chat": ((200, 400, 600, 800, 1000, 1200, 1500, 2000, 3000, 300),
             (50, 100, 150, 200, 250, 300, 400, 500, 600, 150)),
    "long": ((4000, 8000, 12000, 16000, 20000, 24000, 28000, 32000, 12000, 16000),
             (50, 100, 150, 200, 250, 300, 400, 500, 150, 200)),
}  # fmt: skip
LOADS = (0.2, 0.4, 0.6, 0.75, 0.85, 1.05)
BAND = 0.2
#: The engine's p90 TTFT beyond this many times its lightest point's: a queue that grows.
PAST_KNEE = 20.0


def full_load(cost: StepCost, mix: RequestMix) -> float:
    """Requests/s at which prefill and per-token work fill every second (``w = 1``): an upper
    bound on what the replica carries. ``w`` grows linearly with the rate, so it is the
    reciprocal of the model's utilization at 1 request/s."""
    return 1.0 / predict(cost, 1.0, mix, None).utilization


def engine_p90s(profile: str, lengths: Lengths, rate: float, n: int | None = None) -> tuple[float, float]:
    """(p90 TTFT, p90 TPOT) of the engine offered ``n`` (``REQUESTS``) Poisson arrivals at
    ``rate``, each length drawn from the points (the first tenth left out: warm-up)."""
    n = REQUESTS if n is None else n
    rng, t, requests = random.Random(1), 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        requests.append(Request(t, rng.choice(lengths[0]), rng.choice(lengths[1])))
    done = replay_open(make_engine(builtin_profile(profile), limit=None), requests)[n // 10 :]
    ttft = sorted(r.ttft for r in done if r.ttft is not None)
    tpot = sorted(r.tpot for r in done if r.tpot is not None)
    return ttft[int(0.9 * len(ttft))], tpot[int(0.9 * len(tpot))]


def run() -> dict[str, Any]:
    started = time.perf_counter()
    points: list[dict[str, Any]] = []
    for profile in PROFILES:
        cost = step_cost(builtin_profile(profile))
        for name, lengths in MIXES.items():
            mix = RequestMix(tuple(map(float, lengths[0])), tuple(map(float, lengths[1])))
            top = full_load(cost, mix)
            lightest = math.inf
            for load in LOADS:
                rate = top * load
                e_ttft, e_tpot = engine_p90s(profile, lengths, rate)
                lightest = min(lightest, e_ttft)
                model = predict(cost, rate, mix, None)
                points.append({
                    "profile": profile, "mix": name, "load": load, "rate": rate,
                    "engine_ttft": e_ttft, "model_ttft": model.ttft_p90,
                    "engine_tpot": e_tpot, "model_tpot": model.tpot_p90,
                    "past_knee": e_ttft > PAST_KNEE * lightest,
                    "unbounded": model.limited or model.ttft_p90 == math.inf,
                })  # fmt: skip
    below = [p for p in points if not p["past_knee"]]
    past = [p for p in points if p["past_knee"]]

    def within(p: dict[str, Any], what: str) -> bool:
        return abs(p[f"model_{what}"] / p[f"engine_{what}"] - 1) <= BAND

    return {
        "points": points,
        "below_knee": len(below),
        "ttft_within": sum(within(p, "ttft") for p in below),
        "tpot_within": sum(within(p, "tpot") for p in below),
        "past_knee": len(past),
        "past_knee_called": sum(p["unbounded"] for p in past),
        "wall_s": time.perf_counter() - started,
    }


def main() -> None:
    result = run()
    print("profile | mix | load | req/s | p90 TTFT engine / model | p90 TPOT engine / model")
    for p in result["points"]:
        knee = " (past the knee)" if p["past_knee"] else ""
        ttft = f"{p['engine_ttft']:.3f} / {p['model_ttft']:.3f} s ({p['model_ttft'] / p['engine_ttft']:.2f}x)"
        tpot_ms = (p["engine_tpot"] * 1000, p["model_tpot"] * 1000)
        tpot = f"{tpot_ms[0]:.1f} / {tpot_ms[1]:.1f} ms ({tpot_ms[1] / tpot_ms[0]:.2f}x)"
        print(f"{p['profile']} | {p['mix']} | {p['load']:.0%}{knee} | {p['rate']:.2f} | {ttft} | {tpot}")
    n = result["below_knee"]
    print(
        f"below the knee: TTFT within {BAND:.0%} on {result['ttft_within']} of {n} "
        f"({result['ttft_within'] / n:.0%}; target >= 90 %), TPOT on {result['tpot_within']} of {n}; "
        f"past the knee, called unbounded: {result['past_knee_called']} of {result['past_knee']} "
        f"(target: all); {result['wall_s']:.0f} s"
    )
