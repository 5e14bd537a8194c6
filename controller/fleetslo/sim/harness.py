"""Single-replica load generators: the simulated equivalent of ``vllm bench serve``.

``replay_open`` pushes requests at their arrival times through one engine (open loop; used by the
queueing-theory tests and the step-by-step equivalence check). ``closed_loop`` keeps ``concurrency``
requests in flight as ``vllm bench serve --max-concurrency`` does, and reports the figures the
published charts show (mean TTFT, mean TPOT, output tokens/s), for calibration and for the
oracle's capacity model.

Drivers only: the engine decides how steps go; nothing here models hardware.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from fleetslo.sim.engine import Engine
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.records import SimRequest
from fleetslo.sim.vllm_metrics import EngineMetrics
from fleetslo.sim.workload import Request


def make_engine(
    profile: EngineProfile, *, limit: int | None = None, seed: int = 0, max_run_steps: int | None = None
) -> Engine:
    return Engine(
        profile,
        EngineMetrics("sim"),
        limit=limit,
        rng=random.Random(seed),
        max_run_steps=max_run_steps,
    )


def deliver(engine: Engine, req: SimRequest, now: float) -> None:
    """Submit at ``now``; cut a planned run short if the newcomer could join the next step."""
    engine.submit(req, now)
    if engine.run_left == 0:
        engine.start(now)
    elif engine.run_left > 1 and engine.can_admit():
        engine.sync(now)
        engine.truncate()


def replay_open(engine: Engine, requests: Sequence[Request]) -> list[SimRequest]:
    """Every request through one engine at its arrival time; returns the finished records."""
    reqs = [SimRequest.of(i, r) for i, r in enumerate(requests)]
    i, n = 0, len(reqs)
    while True:
        t_event = engine.run_end if engine.run_left else float("inf")
        t_arrival = reqs[i].arrival if i < n else float("inf")
        if t_event == t_arrival == float("inf"):
            return reqs
        if t_event <= t_arrival:
            engine.complete()
        else:
            deliver(engine, reqs[i], t_arrival)
            i += 1


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """What a closed-loop benchmark reports (means over all requests, as ``vllm bench`` does)."""

    concurrency: int
    mean_ttft_s: float
    mean_tpot_s: float
    output_tokens_per_s: float
    requests_per_s: float
    duration_s: float


def closed_loop(
    profile: EngineProfile,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    num_prompts: int,
    *,
    seed: int = 0,
) -> LoadPoint:
    """``num_prompts`` identical requests with at most ``concurrency`` in flight, all sent at t=0."""
    engine = make_engine(profile, seed=seed)
    engine.finished = []
    sent = 0
    reqs: list[SimRequest] = []

    def send(now: float) -> None:
        nonlocal sent
        req = SimRequest(sent, now, input_tokens, output_tokens)
        reqs.append(req)
        sent += 1
        deliver(engine, req, now)

    for _ in range(min(concurrency, num_prompts)):
        send(0.0)
    while engine.run_left:
        engine.complete()
        for done in engine.finished:
            if sent < num_prompts:
                send(done.finish or engine.clock)
        engine.finished.clear()
    return _load_point(concurrency, reqs)


def _load_point(concurrency: int, reqs: Sequence[SimRequest]) -> LoadPoint:
    ttfts = [r.ttft for r in reqs if r.ttft is not None]
    tpots = [t for r in reqs if (t := r.tpot) is not None]
    duration = max(r.finish or 0.0 for r in reqs)
    tokens = sum(r.output_tokens for r in reqs)
    return LoadPoint(
        concurrency=concurrency,
        mean_ttft_s=sum(ttfts) / len(ttfts),
        mean_tpot_s=sum(tpots) / len(tpots) if tpots else 0.0,
        output_tokens_per_s=tokens / duration,
        requests_per_s=len(reqs) / duration,
        duration_s=duration,
    )
