"""The sizing search's cost: each candidate tested off the p90s' tails against solving them, side by side.

fleetslo's sizing asks, for about 25 candidate replica counts a decision (the doubling and
bisection of ``sizing.smallest``, for the load, the backlog's carry and the scale-down's peak),
whether one replica at ``load / n`` meets both margined targets. Until stop 46 each answer solved
the p90 TTFT and TPOT by a 24-step bisection over the request mix and compared them;
``perf_model.meets`` reads each tail once, at the target. This runs the same searches both ways
in alternating rounds of one run (the machine's noise hits both alike): the searches per second
of CPU time and their ratio (target: ≥ 3x), and whether every search found the same count
(target: all).

The searches: four mixes shaped like the suite's (chat, prefill-heavy, long-context,
decode-heavy; 64 lognormal prompt and output points, seeded) on the MI325X TP4 profile, at fleet
loads that need 2-90 replicas, against p90 TTFT 2-10 s and TPOT 50 ms. The solved predictions are
memoised in the policy (``perf_model._predict``); the memo is cleared before every search, since a
decision's candidates are new operating points. ``BENCH_DECIDE_ROUNDS`` (default 5).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from collections.abc import Callable

from fleetslo.policy.fleetslo import perf_model
from fleetslo.policy.fleetslo.mix import RequestMix
from fleetslo.policy.fleetslo.sizing import smallest
from fleetslo.sim.compare import step_cost
from fleetslo.sim.profile import builtin_profile

ROUNDS = int(os.environ.get("BENCH_DECIDE_ROUNDS", "5"))
MI325X = step_cost(builtin_profile("mi325x-qwen3-235b-fp8-tp4"))
#: (name, prompt median, output median, p90 TTFT target)
SHAPES = (("chat", 1_000, 250, 2.0), ("prefill-heavy", 8_000, 250, 8.0),
          ("long-context", 16_000, 250, 10.0), ("decode-heavy", 1_000, 1_500, 2.0))  # fmt: skip
TPOT = 0.05
HIGH = 192
Search = tuple[RequestMix, float, float]


def searches() -> list[tuple[str, Search]]:
    rng = random.Random(46)
    out = []
    for name, prompt, output, ttft in SHAPES:
        mix = RequestMix(
            tuple(rng.lognormvariate(math.log(prompt), 0.8) for _ in range(64)),
            tuple(max(1.0, round(rng.lognormvariate(math.log(output), 1.0))) for _ in range(64)),
        )
        one = _capacity(mix, ttft)
        out += [(name, (mix, one * n, ttft)) for n in (2, 5, 12, 30, 90)]
    return out


def _capacity(mix: RequestMix, ttft: float) -> float:
    """Requests/s one replica carries within both targets (a bisection on the solved p90s)."""
    lo, hi = 0.0, 50.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if solved(mid, mix, ttft) else (lo, mid)
    return lo


def solved(rate: float, mix: RequestMix, ttft: float) -> bool:
    """Until stop 46: both p90s solved, then compared."""
    return perf_model.predict(MI325X, rate, mix, None).meets(ttft, TPOT)


def tails(rate: float, mix: RequestMix, ttft: float) -> bool:
    """``perf_model.meets``: each tail read once, at its target."""
    return perf_model.meets(MI325X, rate, mix, None, 0.9, ttft=ttft, tpot=TPOT)


def search(
    test: Callable[[float, RequestMix, float], bool], mix: RequestMix, load: float, ttft: float
) -> int:
    """The fewest replicas for ``load`` by ``sizing.smallest``, each candidate judged by ``test``."""
    perf_model._predict.cache_clear()
    found, _ = smallest(
        lambda n: test(load / n, mix, ttft), lambda n: perf_model.predict(MI325X, load / n, mix, None), HIGH
    )
    return found


def run() -> dict[str, object]:
    cases = searches()
    cpu: dict[str, list[float]] = {"solved": [], "tails": []}
    answers: dict[str, list[int]] = {"solved": [], "tails": []}
    for _ in range(ROUNDS):
        for label, test in (("solved", solved), ("tails", tails)):
            started = time.process_time()
            found = [search(test, *case) for _, case in cases]
            cpu[label].append(time.process_time() - started)
            answers[label] = found
    per_s = {label: len(cases) / statistics.median(times) for label, times in cpu.items()}
    same = sum(a == b for a, b in zip(answers["solved"], answers["tails"], strict=True))
    return {
        "searches": len(cases), "rounds": ROUNDS, "per_cpu_s": per_s,
        "ratio": per_s["tails"] / per_s["solved"], "same": same, "counts": answers["tails"],
    }  # fmt: skip


def main() -> dict[str, object]:
    r = run()
    per_s = r["per_cpu_s"]
    assert isinstance(per_s, dict)
    print(
        f"sizing searches ({r['searches']}, counts {r['counts']}), median of {r['rounds']} rounds:\n"
        f"  p90s solved and compared  {per_s['solved']:8.1f} searches per CPU-second\n"
        f"  tails read at the targets {per_s['tails']:8.1f} searches per CPU-second\n"
        f"  ratio {r['ratio']:.2f}x (target >= 3x); "
        f"the same count in {r['same']} of {r['searches']} (target: all)"
    )
    return r


if __name__ == "__main__":
    main()
