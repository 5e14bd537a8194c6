"""Where fleetslo's replicas go: its fleet against what its own model says each minute needs, and
against what the engine needs (the oracle's per-minute need).

For every judged minute of a replay this puts four counts side by side:

* **fleetslo**: the replicas ready in that minute;
* **bare model**: the fewest replicas whose p90s, by the model fleetslo had learned by that minute,
  meet both targets at the minute's *exact* arrival rate and request mix (read off the trace, so
  neither the forecast nor the mix's smoothing is in it), with no margin, peak memory or dead band;
* **Poisson need**: the minute's arrivals at the per-replica capacity the oracle calibrates on
  Poisson arrivals of the trace's mix, on a routed fleet (``sim.oracle.minute_need``): the engine;
* **oracle**: the oracle's need after its repairs (every minute that missed on the real arrivals
  given more replicas until it met).

Their ratios split fleetslo's cost over the engine's need in three: *policy* = fleetslo / bare
(what the sizing adds on top of its model: the load margin, the scale-down's peak memory and dead
band, the latency margins, the cold start's lag), *model* = bare / Poisson need (the capacity model
against the engine and the router on Poisson arrivals of the trace's mix: the oracle's need before
its repairs) and *bursts* = oracle / Poisson need (what the trace's arrivals, burstier within a
minute than Poisson, need on top, as the oracle's repairs found): fleetslo / oracle = policy ×
model ÷ bursts. Each ratio is of replica-minutes summed. Minutes are *steady* where the arrival
rate sits within 20 % of its mean over the cold start before, else *changing*. A model factor near
1 with a large policy factor says the replicas go to margins and memory, not to a wrong model.

``BENCH_CAPACITY_SET`` names the workloads as ``benchmarks ab`` reads ``AB_SETS`` (``suite``, the
default, ``heldout``, ``fresh``, ``drawn200-239``…, comma-separated); ``BENCH_CAPACITY_CASES`` keeps
those whose name contains one of its comma-separated words. About 20-90 s a workload here (the
replay and the oracle's plan).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleetslo.policy.fleetslo.learning import PerformanceModel
from fleetslo.policy.fleetslo.mix import RequestMix, from_lengths
from fleetslo.policy.fleetslo.sizing import smallest
from fleetslo.sim import oracle
from fleetslo.sim.compare import SimulateOptions, make_named_policy
from fleetslo.sim.result import JUDGE_WINDOW_S
from fleetslo.sim.scenario import Scenario, run_policy
from fleetslo.sim.workload import Request

from benchmarks.bench_ab import parse_sets
from benchmarks.bench_policy import scenario
from benchmarks.workloads import Workload

#: A minute is steady where its arrival rate is within this share of the mean over the cold start before.
STEADY_BAND = 0.2
#: The first minutes are the warm fleet's, not the policy's.
SKIP_MINUTES = 5


@dataclass(frozen=True, slots=True)
class Minute:
    start_s: float
    rate: float
    fleetslo: int
    bare: int
    #: The oracle's need before its repairs: the minute's arrivals at the per-replica capacity
    #: calibrated on Poisson traffic with the trace's mix (``sim.oracle.minute_need``).
    poisson: int
    oracle: int
    steady: bool


def exact_mix(requests: Sequence[Request]) -> RequestMix | None:
    """The minute's request mix as the policy would read it off exact length histograms."""
    return from_lengths([r.input_tokens for r in requests], [r.output_tokens for r in requests])


def bare_need(model: PerformanceModel, rate: float, mix: RequestMix, sc: Scenario, high: int) -> int:
    """The fewest replicas (up to ``high``) whose predicted p90s meet both targets at ``rate``."""
    o = sc.spec.objectives
    limit, q = sc.spec.batch_limit.max, o.tpot.quantile
    # The policy's own search (``_cheapest``), without its margins.
    return smallest(
        lambda n: model.meets(rate / n, mix, limit, q, ttft=o.ttft.threshold, tpot=o.tpot.threshold),
        lambda n: model.predict(rate / n, mix, limit, q),
        high,
    )[0]


def minutes(w: Workload) -> tuple[list[Minute], dict[str, Any]]:
    """Replay ``w`` with fleetslo, recording its model after each decision, and count each minute."""
    sc = scenario(w)
    policy = make_named_policy("fleetslo", sc, SimulateOptions(policies=("fleetslo",)))
    models: dict[int, PerformanceModel] = {}
    decide = policy.decide

    # A recording shim on this one instance (the replay calls ``decide``; nothing else changes).
    def recorded(obs: Any, state: Any, spec: Any, now: float) -> Any:
        decision, after = decide(obs, state, spec, now)
        models[int(now // JUDGE_WINDOW_S)] = after.model
        return decision, after

    policy.decide = recorded  # type: ignore[method-assign]
    result = run_policy(sc, policy, label="fleetslo")
    plan = oracle.plan(sc)
    poisson = oracle.minute_need(sc, plan.capacity)
    by_minute: dict[int, list[Request]] = {}
    for r in sc.trace.requests:
        by_minute.setdefault(int(r.arrival_s // JUDGE_WINDOW_S), []).append(r)
    ready = {
        int(x.start_s // JUDGE_WINDOW_S): x.ready_replicas
        for x in result.windows
        if x.ready_replicas is not None
    }
    horizon = max(1, math.ceil(sc.spec.replicas.cold_start / JUDGE_WINDOW_S))
    high = 2 * sc.spec.replicas.max
    rows: list[Minute] = []
    model: PerformanceModel | None = None
    for m in range(len(plan.need)):
        model = models.get(m - 1, model)  # the model as the minute began
        mix = exact_mix(by_minute.get(m, ()))
        if m < SKIP_MINUTES or model is None or mix is None or m not in ready:
            continue
        rate = len(by_minute[m]) / JUDGE_WINDOW_S
        before = [len(by_minute.get(k, ())) / JUDGE_WINDOW_S for k in range(max(0, m - horizon), m)]
        level = statistics.mean(before) if before else rate
        steady = level > 0 and abs(rate - level) <= STEADY_BAND * level
        need = bare_need(model, rate, mix, sc, high)
        rows.append(Minute(m * JUDGE_WINDOW_S, rate, ready[m], need, poisson[m], plan.need[m], steady))
    info = {"attainment": result.window_attainment, "replica_hours": result.replica_hours}
    return rows, info


def summary(rows: Sequence[Minute]) -> dict[str, Any]:
    """Replica-minutes of each count and the three factors: all minutes, the steady, the changing."""

    def of(part: Sequence[Minute]) -> dict[str, Any] | None:
        if not part:
            return None
        f, b, p, o = (sum(getattr(x, k) for x in part) for k in ("fleetslo", "bare", "poisson", "oracle"))
        return {
            "minutes": len(part), "fleetslo": f, "bare": b, "poisson": p, "oracle": o,
            "policy": f / b, "model": b / p, "bursts": o / p, "total": f / o,
        }  # fmt: skip

    return {
        "all": of(rows),
        "steady": of([x for x in rows if x.steady]),
        "changing": of([x for x in rows if not x.steady]),
    }


def _chosen() -> list[Workload]:
    sets = parse_sets(os.environ.get("BENCH_CAPACITY_SET", "suite"))
    words = [c for c in os.environ.get("BENCH_CAPACITY_CASES", "").split(",") if c]
    return [w for _, chosen in sets for w in chosen if not words or any(c in w.name for c in words)]


def _fmt(part: dict[str, Any] | None) -> str:
    if part is None:
        return "–"
    factors = f"policy {part['policy']:.2f} × model {part['model']:.2f} ÷ bursts {part['bursts']:.2f}"
    return f"{part['total']:.2f}x = {factors} ({part['minutes']} min)"


def main() -> None:
    print(
        "| workload | fleetslo attain / replica-h | all minutes: fleetslo / oracle "
        "| steady minutes | changing minutes |"
    )
    print("|---|---|---|---|---|")
    totals: list[Minute] = []
    for w in _chosen():
        t0 = time.perf_counter()
        rows, info = minutes(w)
        totals += rows
        s = summary(rows)
        attain = info["attainment"]
        print(
            f"| {w.name} | {attain if attain is None else round(attain, 3)} / {info['replica_hours']:.1f} "
            f"| {_fmt(s['all'])} | {_fmt(s['steady'])} | {_fmt(s['changing'])} |"
            f"  ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    s = summary(totals)
    print(f"| all workloads | | {_fmt(s['all'])} | {_fmt(s['steady'])} | {_fmt(s['changing'])} |")
