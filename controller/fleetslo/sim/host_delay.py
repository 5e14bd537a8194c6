"""The host's delay on a request's path, measured as the client's TTFT beyond vLLM's own.

At low concurrency nothing queues in the engine or the API server, so what a client waits for its
first token beyond what vLLM's clock says is the host: the client, the API server and the engine
core each waiting for a core. The simulator adds it as a lognormal per request (``FrontendServer``)
on top of the engine's own TTFT, which it simulates, spread and all.

So the fit must not count the engine's spread as the host's. Subtracting each phase's *mean* vLLM
TTFT from every request's client TTFT does: a request the engine served faster than its mean comes
out with a negative "delay" (clipped to nothing), one it served slower with a large one, and the
lognormal fitted to that is far wider than the host's (on a quiet host the simulator's p90 TTFT at
30 % load was 2.3× the client's). Instead, the fit **deconvolves**: each phase's engine TTFTs are
read from vLLM's own histogram (the bucket counts over the phase, spread within their buckets and
scaled to the phase's exact mean), and the lognormal chosen is the one whose sum with them comes
nearest the client's median and 90th percentile of every phase (squared log errors, summed over
the phases): the quantities a check of the simulator compares, phase by phase, because the engine
explains the spread *between* phases (their prompt lengths) and must not lend it to the host.
Without the histogram the phase's mean stands for all its requests.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence

from fleetslo.engine.bench import TTFT_HISTOGRAM, PhaseResult, buckets

#: Phases with at most this many clients measure the host's delay (nothing queues in them).
HOST_DELAY_CLIENTS = 2
#: The smallest delay fitted (a client cannot be ahead of the engine; timer granularity can).
MIN_DELAY_S = 1e-4
#: The widest lognormal fitted (``FrontendQueue.host_delay_sigma``'s bound).
MAX_SIGMA = 3.0
#: Draws per phase that judge a candidate delay (common to all candidates).
DRAWS = 400


def engine_ttfts(engine: Mapping[str, float | None]) -> list[float] | None:
    """The phase's vLLM TTFTs, one per request vLLM counted: its histogram's bucket counts spread
    evenly inside each bucket (the top one at its lower bound), scaled so that their mean is the
    phase's exact mean (sum / count). ``None`` without vLLM's sums; the exact mean for every
    request without the buckets. ``engine`` is a phase's counter differences (``counter_deltas``)."""
    count, total = (
        engine.get("vllm:time_to_first_token_seconds_count"),
        engine.get("vllm:time_to_first_token_seconds_sum"),
    )
    if not count or total is None or count < 1:
        return None
    mean, n = total / count, round(count)
    points: list[float] = []
    below, lower = 0.0, 0.0
    for bound, cumulative in buckets(engine, TTFT_HISTOGRAM):
        k = round(cumulative - below)
        top = lower if math.isinf(bound) else bound
        points += [lower + (j + 0.5) / k * (top - lower) for j in range(k)] if k > 0 else []
        below, lower = cumulative, lower if math.isinf(bound) else bound
    if len(points) != n or sum(points) <= 0:
        return [mean] * n  # no histogram, or one that does not add up to the count
    scale = mean / statistics.fmean(points)
    return [p * scale for p in points]


def _quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[int(0.9 * (len(ordered) - 1))]


class _Phase:
    """One phase's client quantiles and a fixed sample of its engine TTFTs and standard normals
    (common random numbers: every candidate lognormal is judged on the same draws)."""

    def __init__(self, clients: list[float], engine: list[float], rng: random.Random) -> None:
        self.p50, self.p90 = (math.log(q) for q in _quantiles(clients))
        self.engine = [engine[i * len(engine) // DRAWS] for i in range(DRAWS)]
        rng.shuffle(self.engine)
        self.normals = [rng.gauss(0.0, 1.0) for _ in range(DRAWS)]

    def error(self, mu: float, sigma: float) -> float:
        """Squared log errors of the phase's median and p90 with this host delay added."""
        p50, p90 = _quantiles(
            [e + math.exp(mu + sigma * z) for e, z in zip(self.engine, self.normals, strict=True)]
        )
        return (math.log(p50) - self.p50) ** 2 + (math.log(p90) - self.p90) ** 2


def host_delay(results: Sequence[PhaseResult]) -> tuple[float, float]:
    """Median and lognormal sigma of the host's delay over the low-concurrency phases (see the
    module docstring); ``(0, 0)`` when fewer than four of their requests have vLLM's sums."""
    rng = random.Random(0)
    phases: list[_Phase] = []
    requests = 0
    for r in results:
        ttfts = [s.ttft_s for s in r.ok if s.ttft_s is not None and s.ttft_s > 0]
        points = engine_ttfts(r.engine) if r.phase.concurrency <= HOST_DELAY_CLIENTS else None
        if points and len(ttfts) >= 2:
            phases.append(_Phase(ttfts, sorted(points), rng))
            requests += len(ttfts)
    if requests < 4:
        return 0.0, 0.0

    def error(mu: float, sigma: float) -> float:
        return sum(p.error(mu, sigma) for p in phases)

    # A coarse grid, then finer ones around the best point: the error is smooth but not convex
    # (a narrow and a wide delay can both match one quantile).
    grid = [
        (mu, sigma)
        for mu in _steps(math.log(MIN_DELAY_S), 0.0, 0.5)
        for sigma in _steps(0.0, MAX_SIGMA, 0.25)
    ]
    best = min(grid, key=lambda point: error(*point))
    for step in (0.1, 0.02):
        mu0, sigma0 = best
        near = [
            (mu0 + i * step, min(MAX_SIGMA, max(0.0, sigma0 + j * step)))
            for i in range(-5, 6)
            for j in range(-5, 6)
        ]
        best = min(near, key=lambda point: error(*point))
    mu, sigma = best
    return max(MIN_DELAY_S, math.exp(mu)), sigma


def _steps(lo: float, hi: float, step: float) -> list[float]:
    return [lo + i * step for i in range(round((hi - lo) / step) + 1)]
