"""Fit an engine profile to a real engine: step-time coefficients from what each benchmark phase's
steps held and took, and the API server's cost from the client's latency minus the engine's.

**Step time.** The simulator's step is ``overhead + per_seq·seqs + per_prefill_token·P +
per_kv_token·KV`` (``fleetslo.sim.profile.StepTime``; the quadratic attention term is left at 0:
short prompts cannot separate it from the linear one). The model is linear, so it holds for means
over a phase too: with the fleetslo engine plugin each phase gives the mean step time and the mean
batch composition exactly (differences of its running totals over the step count). Without the
plugin a phase is estimated from the client's side (steps ≈ output tokens / concurrency, KV ≈
concurrency × (prompt + output/2)) and the provenance says so. The fit is non-negative least squares
over the phases, relative (each phase weighted by 1/its mean step time), so short and long steps count alike.

**Front end.** Per phase, mean client TTFT − mean vLLM TTFT (vLLM's own histogram sums) is the time
outside the engine's clock; regressed on the prompt length it gives ``per_request_s`` and
``per_prompt_token_s``; client TPOT − vLLM TPOT gives ``per_output_token_s``. Without vLLM's sums
the front end is not fitted (``None``), never assumed to be 0.

**Step jitter.** A busy host stalls the engine now and then: the step time spreads around its
mean far more than its composition explains. From the plugin's step histogram over each phase of
the concurrency sweep (short prompts, one composition), the lognormal with the phase's exact mean
step that best explains the bucket counts (maximum likelihood: the buckets double, too coarse to
read quantiles from) gives a cv; ``noise_cv`` is their median (at most 1). Without the histogram
it stays 0 and the provenance says so.

**Front end as a queue.** With the API server process's CPU seconds over each phase (``procstat``),
``cpu = idle·wall + a·requests + b·prompt tokens + c·output tokens`` (non-negative least squares,
each phase weighted by 1/its CPU time; ``idle`` is what the server spends per wall second anyway:
health checks, metrics, its loops, measured with no traffic when given, else fitted too) gives
``FrontendQueue``'s work per request and per token, and the phases' (CPU + run-queue wait) / CPU
the ``cpu_stretch`` this host imposed. Without the process times, ``None``. The host's wake-up
delays on the request's path are what remains of the client's TTFT beyond vLLM's own at low load
(phases of at most two clients, where nothing queues), with the engine's own TTFT spread taken out
(``fleetslo.sim.host_delay``: a lognormal deconvolved from vLLM's TTFT histogram per phase).

Pure arithmetic over measurements: no I/O, no clock.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from fleetslo.engine.bench import PhaseResult, bucket_key
from fleetslo.engine.book import STEP_BUCKETS
from fleetslo.sim.host_delay import host_delay
from fleetslo.sim.profile import Frontend, FrontendQueue, StepTime


@dataclass(frozen=True, slots=True)
class StepMeans:
    """A phase's mean step: its composition and time, and whether the engine measured it."""

    seqs: float
    prefill_tokens: float
    kv_tokens: float
    seconds: float
    measured: bool


@dataclass(frozen=True, slots=True)
class Fit:
    step_time: StepTime
    frontend: Frontend | None
    frontend_queue: FrontendQueue | None
    #: Relative error of the fitted step time on each phase's mean step, by phase name.
    residuals: dict[str, float]
    steps_measured: bool
    #: The step-time spread (lognormal cv) of each phase it was measured on; empty: not measured.
    step_spread: dict[str, float] = field(default_factory=dict)


def step_means(result: PhaseResult) -> StepMeans | None:
    """The phase's mean step, from the plugin's totals if present, else estimated from the client."""
    engine, phase = result.engine, result.phase
    steps = engine.get("fleetslo_engine_steps")
    if steps:
        sums = [engine.get(f"fleetslo_engine_step_{k}") for k in ("prefill_seqs", "decode_seqs")]
        tokens, kv = (
            engine.get("fleetslo_engine_step_prefill_tokens"),
            engine.get("fleetslo_engine_step_kv_tokens"),
        )
        seconds = engine.get("fleetslo_engine_step_seconds")
        if None not in (*sums, tokens, kv, seconds):
            return StepMeans(
                seqs=sum(s or 0.0 for s in sums) / steps,
                prefill_tokens=(tokens or 0.0) / steps,
                kv_tokens=(kv or 0.0) / steps,
                seconds=(seconds or 0.0) / steps,
                measured=True,
            )
    ok = result.ok
    output = sum(s.output_tokens for s in ok)
    if not ok or output == 0:
        return None
    est_steps = output / phase.concurrency
    return StepMeans(
        seqs=float(phase.concurrency),
        prefill_tokens=phase.prompt_tokens * len(ok) / est_steps,
        kv_tokens=phase.concurrency * (phase.prompt_tokens + phase.output_tokens / 2),
        seconds=result.wall_s / est_steps,
        measured=False,
    )


def nnls(rows: Sequence[Sequence[float]], targets: Sequence[float]) -> list[float]:
    """Least squares with every coefficient >= 0, by trying each set of free coefficients (a few
    columns only) and keeping the best solution whose coefficients are all non-negative."""
    width = len(rows[0])
    best: tuple[float, list[float]] | None = None
    for size in range(width, 0, -1):
        for free in itertools.combinations(range(width), size):
            solved = _least_squares([[row[j] for j in free] for row in rows], targets)
            if solved is None or min(solved) < 0:
                continue
            coef = [0.0] * width
            for j, value in zip(free, solved, strict=True):
                coef[j] = value
            error = sum(
                (sum(c * x for c, x in zip(coef, row, strict=True)) - t) ** 2
                for row, t in zip(rows, targets, strict=True)
            )
            if best is None or error < best[0]:
                best = (error, coef)
    return best[1] if best is not None else [0.0] * width


def _least_squares(rows: Sequence[Sequence[float]], targets: Sequence[float]) -> list[float] | None:
    """Normal equations solved by Gaussian elimination; ``None`` when they are singular."""
    n = len(rows[0])
    a = [
        [sum(r[i] * r[j] for r in rows) for j in range(n)]
        + [sum(r[i] * t for r, t in zip(rows, targets, strict=True))]
        for i in range(n)
    ]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-18 * max(1.0, *(abs(v) for row in a for v in row)):
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col], strict=True)]
    return [a[i][n] / a[i][i] for i in range(n)]


def fit_step_time(results: Sequence[PhaseResult]) -> tuple[StepTime, dict[str, float], bool]:
    means = [(r.phase.name, m) for r in results if (m := step_means(r)) is not None and m.seconds > 0]
    if len(means) < 2:
        raise ValueError("need at least two phases with finished requests to fit step time")
    # Columns scaled to comparable magnitudes so the elimination stays well conditioned.
    scale = [1.0, 1.0, 1e-3, 1e-3]
    rows = [
        [
            1.0 / m.seconds,
            m.seqs / m.seconds,
            m.prefill_tokens * 1e-3 / m.seconds,
            m.kv_tokens * 1e-3 / m.seconds,
        ]
        for _, m in means
    ]
    coef = [c * s for c, s in zip(nnls(rows, [1.0] * len(rows)), scale, strict=True)]
    overhead = coef[0] if coef[0] > 0 else min(m.seconds for _, m in means) * 0.5
    step = StepTime(
        overhead_s=overhead, per_seq_s=coef[1], per_prefill_token_s=max(coef[2], 1e-9), per_kv_token_s=coef[3]
    )
    residuals = {name: _predict(step, m) / m.seconds - 1 for name, m in means}
    return step, residuals, all(m.measured for _, m in means)


def _predict(step: StepTime, m: StepMeans) -> float:
    return (
        step.overhead_s
        + step.per_seq_s * m.seqs
        + step.per_prefill_token_s * m.prefill_tokens
        + step.per_kv_token_s * m.kv_tokens
    )


def fit_frontend(results: Sequence[PhaseResult]) -> Frontend | None:
    """The API server's cost, or ``None`` when no phase has vLLM's own latency sums."""
    ttft_rows, ttft_gaps, tpot_gaps = [], [], []
    for r in results:
        ok, e = r.ok, r.engine
        ttft_n, tpot_n = (
            e.get("vllm:time_to_first_token_seconds_count"),
            e.get("vllm:request_time_per_output_token_seconds_count"),
        )
        ttfts = [s.ttft_s for s in ok if s.ttft_s is not None]
        if ttft_n and ttfts and e.get("vllm:time_to_first_token_seconds_sum") is not None:
            engine_ttft = (e["vllm:time_to_first_token_seconds_sum"] or 0.0) / ttft_n
            ttft_rows.append([1.0, r.phase.prompt_tokens / 1000.0])
            ttft_gaps.append(statistics.fmean(ttfts) - engine_ttft)
        tpots = [s.tpot_s for s in ok if s.tpot_s is not None]
        if tpot_n and tpots and e.get("vllm:request_time_per_output_token_seconds_sum") is not None:
            engine_tpot = (e["vllm:request_time_per_output_token_seconds_sum"] or 0.0) / tpot_n
            tpot_gaps.append(statistics.fmean(tpots) - engine_tpot)
    if not ttft_rows:
        return None
    per_request, per_kilo_token = nnls(ttft_rows, ttft_gaps)
    per_output = max(0.0, statistics.median(tpot_gaps)) if tpot_gaps else 0.0
    return Frontend(
        per_request_s=per_request, per_prompt_token_s=per_kilo_token / 1000.0, per_output_token_s=per_output
    )


def fit_frontend_queue(
    results: Sequence[PhaseResult], idle_cpu_per_s: float | None = None
) -> FrontendQueue | None:
    """The API server's CPU work per request and token and the host's stretch, or ``None`` when
    fewer than four phases have the server's process times (four coefficients). ``idle_cpu_per_s``,
    measured with no traffic, takes the idle term out of the fit: in closed-loop phases wall time
    grows with the requests, and the fit could otherwise put the work there."""
    measured = [r for r in results if r.server is not None and r.server.cpu_s > 0 and r.ok]
    if len(measured) < 4:
        return None
    rows, targets = [], []
    for r in measured:
        assert r.server is not None
        ok, weight = r.ok, 1.0 / r.server.cpu_s
        prompt, output = sum(s.prompt_tokens for s in ok), sum(s.output_tokens for s in ok)
        work = [len(ok) * weight, prompt * 1e-3 * weight, output * 1e-3 * weight]
        if idle_cpu_per_s is None:
            rows.append([r.wall_s * weight, *work])
            targets.append(1.0)
        else:
            rows.append(work)
            targets.append(1.0 - idle_cpu_per_s * r.wall_s * weight)
    coefficients = nnls(rows, targets)
    per_request, per_kilo_prompt, per_kilo_output = coefficients[-3:]
    cpu = sum(r.server.cpu_s for r in measured if r.server is not None)
    wait = sum(r.server.wait_s for r in measured if r.server is not None)
    median, sigma = host_delay(results)
    return FrontendQueue(
        per_request_cpu_s=per_request,
        per_prompt_token_cpu_s=per_kilo_prompt * 1e-3,
        per_output_token_cpu_s=per_kilo_output * 1e-3,
        cpu_stretch=(cpu + wait) / cpu,
        host_delay_median_s=median,
        host_delay_sigma=sigma,
    )


#: Fewest timed steps in a phase for its histogram to say anything about the spread.
MIN_STEPS_FOR_SPREAD = 50
#: The lognormal sigmas tried (the buckets double, too coarse to read quantiles from directly).
_SIGMAS = tuple(0.01 * i for i in range(1, 151))


def step_spread(result: PhaseResult) -> float | None:
    """The cv of the lognormal with the phase's exact mean step that best explains its histogram
    (maximum likelihood over the bucket counts), or ``None`` without enough of them."""
    engine = result.engine
    counts = [engine.get(bucket_key(b)) for b in STEP_BUCKETS]
    total, seconds = engine.get("fleetslo_engine_steps"), engine.get("fleetslo_engine_step_seconds")
    if not total or not seconds or total < MIN_STEPS_FOR_SPREAD or any(c is None for c in counts):
        return None
    cumulative = [float(c or 0.0) for c in counts] + [total]
    per_bucket = [c - b for c, b in zip(cumulative, [0.0, *cumulative[:-1]], strict=True)]
    log_mean = math.log(seconds / total)
    sigma = max(_SIGMAS, key=lambda sg: _log_likelihood(per_bucket, log_mean - sg * sg / 2, sg))
    return math.sqrt(math.expm1(sigma * sigma))


def _log_likelihood(per_bucket: list[float], mu: float, sigma: float) -> float:
    edges = [0.0] + [_normal_cdf((math.log(b) - mu) / sigma) for b in STEP_BUCKETS] + [1.0]
    return sum(
        n * math.log(max(hi - lo, 1e-300))
        for n, lo, hi in zip(per_bucket, edges[:-1], edges[1:], strict=True)
        if n > 0
    )


def _normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def fit_noise(results: Sequence[PhaseResult]) -> dict[str, float]:
    """Each concurrency-sweep phase's step spread (phases ``c<N>`` and the repeats ``s<N>-<i>``)."""
    out = {}
    for r in results:
        if r.phase.name[:1] in ("c", "s") and (cv := step_spread(r)) is not None:
            out[r.phase.name] = cv
    return out


def fit(results: Sequence[PhaseResult], idle_cpu_per_s: float | None = None) -> Fit:
    step, residuals, measured = fit_step_time(results)
    spread = fit_noise(results)
    if spread:
        step = step.model_copy(update={"noise_cv": min(1.0, statistics.median(spread.values()))})
    queue = fit_frontend_queue(results, idle_cpu_per_s)
    return Fit(step, fit_frontend(results), queue, residuals, measured, spread)
