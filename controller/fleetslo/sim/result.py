"""The judge: a finished run turned into the result every report and comparison reads.

Latencies here are exact, per request, measured from the client's arrival at the router: TTFT =
first token − arrival, TPOT = (finish − first token) / (output tokens − 1). Window p90s use the
nearest-rank quantile of those exact values, so they never inherit the bucket quantization the
policy had to live with. A request that never produced a token (rejected, or still queued at the
end) counts as an infinite TTFT; TPOT is judged on finished requests with at least two tokens.

The result is a ``result_types.SimResult``; the keys of its ``to_dict`` are a contract (the JSON
output and saved ``results.json`` files).
This module reads a run; it must not simulate anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fleetslo.core.spec import FleetSLOSpec
from fleetslo.sim.profile import EngineProfile
from fleetslo.sim.records import SimRequest
from fleetslo.sim.result_types import SimResult, SLOTarget, WindowResult, replica_changes
from fleetslo.sim.runner import FleetSample, Run

JUDGE_WINDOW_S = 60.0


def exact_quantile(q: float, values: Sequence[float]) -> float | None:
    """Nearest-rank quantile: the smallest value with at least ``q`` of the values at or under it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def build_result(
    run: Run,
    *,
    policy: str,
    trace: str,
    profile: EngineProfile,
    spec: FleetSLOSpec,
) -> SimResult:
    """The judged result of one run (see the module docstring for the judging rules)."""
    ttft_s, tpot_s = spec.objectives.ttft.threshold, spec.objectives.tpot.threshold
    q = spec.objectives.ttft.quantile
    reqs = run.requests
    ttfts, tpots = _latencies(reqs)
    windows = _windows(run, ttfts, tpots, (ttft_s, tpot_s, q))
    judged = [w.met for w in windows if w.met is not None]
    completed = [r for r in reqs if r.finish is not None]
    tokens = sum(r.input_tokens + r.output_tokens for r in completed)
    replica_hours = run.replica_seconds / 3600
    cost = replica_hours * spec.cost.per_replica_hour
    met = sum(
        1
        for r, ttft, tpot in zip(reqs, ttfts, tpots, strict=True)
        if r.finish is not None and ttft <= ttft_s and (tpot is None or tpot <= tpot_s)
    )
    return SimResult(
        policy=policy,
        trace=trace,
        profile=profile.name,
        slo=SLOTarget(ttft_s=ttft_s, tpot_s=tpot_s, quantile=q),
        requests=len(reqs),
        completed=len(completed),
        rejected=run.rejected,
        in_flight_at_end=run.in_flight,
        window_attainment=sum(judged) / len(judged) if judged else None,
        request_attainment=met / len(reqs) if reqs else None,
        p90_ttft_s=_finite(exact_quantile(q, ttfts)),
        p90_tpot_s=exact_quantile(q, [t for t in tpots if t is not None]),
        replica_hours=replica_hours,
        gpu_hours=replica_hours * spec.cost.gpus_per_replica,
        cost_usd=cost,
        tokens=tokens,
        cost_per_million_tokens=cost / tokens * 1e6 if tokens else None,
        mean_replicas=run.replica_seconds / run.end if run.end > 0 else None,
        scale_events=replica_changes(run.events),
        preemptions=run.preemptions,
        sim_seconds=run.end,
        wall_seconds=run.wall_seconds,
        windows=tuple(windows),
        decisions=tuple(run.decisions),
        events=tuple(run.events),
    )


def _latencies(reqs: Sequence[SimRequest]) -> tuple[list[float], list[float | None]]:
    """Each request's exact TTFT (infinite without a first token) and TPOT (None if not judged)."""
    ttfts: list[float] = []
    tpots: list[float | None] = []
    inf = math.inf
    for r in reqs:
        first, finish = r.first_token, r.finish
        ttfts.append(inf if first is None else first - r.arrival)
        n = r.output_tokens - 1
        tpots.append(None if finish is None or first is None or n < 1 else (finish - first) / n)
    return ttfts, tpots


def _finite(value: float | None) -> float | None:
    """JSON has no infinity: an infinite p90 (most requests never served) is reported as null."""
    return None if value is None or math.isinf(value) else value


def _windows(
    run: Run, ttfts: list[float], tpots: list[float | None], slo: tuple[float, float, float]
) -> list[WindowResult]:
    count = max(1, math.ceil(run.end / JUDGE_WINDOW_S))
    by_window: list[list[int]] = [[] for _ in range(count)]
    for i, r in enumerate(run.requests):
        by_window[min(count - 1, int(r.arrival // JUDGE_WINDOW_S))].append(i)
    samples = _samples_by_window(run.samples, count)
    return [
        judge_window(
            k,
            [ttfts[i] for i in members],
            [t for i in members if (t := tpots[i]) is not None],
            samples[k],
            slo,
        )
        for k, members in enumerate(by_window)
    ]


def _samples_by_window(samples: Sequence[FleetSample], count: int) -> list[list[FleetSample]]:
    out: list[list[FleetSample]] = [[] for _ in range(count)]
    for s in samples:
        k = int(s.t // JUDGE_WINDOW_S)
        if k < count:
            out[k].append(s)
    return out


def judge_window(
    k: int,
    ttfts: list[float],
    tpots: list[float],
    samples: list[FleetSample],
    slo: tuple[float, float, float],
) -> WindowResult:
    ttft_s, tpot_s, q = slo
    p90_ttft = exact_quantile(q, ttfts)
    p90_tpot = exact_quantile(q, tpots)
    met = None
    if ttfts:
        met = p90_ttft is not None and p90_ttft <= ttft_s and (p90_tpot is None or p90_tpot <= tpot_s)
    last = samples[-1] if samples else None
    return WindowResult(
        start_s=k * JUDGE_WINDOW_S,
        requests=len(ttfts),
        arrival_rate=len(ttfts) / JUDGE_WINDOW_S,
        p90_ttft_s=_finite(p90_ttft),
        p90_tpot_s=p90_tpot,
        met=met,
        ready_replicas=last.ready if last else None,
        starting_replicas=last.starting if last else None,
        batch_limit=last.batch_limit if last else None,
        queue_length=sum(s.queue_length for s in samples) / len(samples) if samples else None,
    )
