"""What one replica carries: p90 TTFT and p90 TPOT predicted from step physics and the request mix.

**Steps.** Over one second a busy replica runs ``S`` steps. Each costs the fixed ``c0``; on top, every
generated token costs ``c_seq + c_kv·C̄`` (its sequence's share of the step and the KV it reads, with
``C̄`` the mean context of a decoding sequence) and every prompt its prefill ``s(P) = c_pf·P +
c_attn·P²/2``. At ``λ`` requests/s per replica the non-fixed work fills ``w = λ·(D̄·(c_seq + c_kv·C̄)
+ E[s(P)])`` of each second, so ``S = (1 − w)/c0`` and the mean step lasts ``τ = c0/(1 − w)``: flat at
light load, exploding as ``w → 1``. Prompt and generated tokens sit on separate axes: a long-prompt,
short-output mix spends its time on prefill, not on a batch of decoders.

**TPOT.** A request's TPOT is its mean step time over its ``D − 1`` decode steps. Those steps last
``τ_d = c0 + n·(c_seq + c_kv·C̄)`` (``n = λ·D̄·τ`` decoders, Little's law) plus the prefills that
land during its life, a Poisson number of them (rate ``λ``, sizes moment-matched to ``E[s²]/E[s]``):
short outputs that catch one long prefill make the p90, so it is computed over the output-length
points, not from the mean.

**TTFT.** The rest of the step in progress (half a mean step), queue wait, own prefill. Prefill
is served first come first served, one prompt after another, each taking ``s(P)`` plus the steps
it spans: an M/G/1 queue per replica with Pollaczek–Khinchine mean wait ``λ·E[S²]/(2(1 − ρ))``
and the usual exponential tail beyond the probability ``ρ`` of waiting at all; the p90 of wait +
own service is solved over the prompt points.

**Stay.** A request stays in the replica for its prefill queue wait, its prefill and its decode:
``W = E[wait] + T̄``; Little's law turns it into the requests a steady state holds, ``λ·W``, so
what the fleet holds beyond that is a queue (``backlog``), and a mix with longer outputs is held
longer without being one.

**The batch limit** ``L`` caps the running sequences, and a request holds a slot from its prefill
to its last token (``T̄ = E[service] + (D̄ − 1)·τ``, ``λ·T̄`` slots held). Below ``L`` the cap
costs TTFT the wait for a free slot (Erlang C for the probability of waiting, the M/M/c
exponential tail with Allen–Cunneen's ``(1 + c²)/2`` for its decay; the p90 of slot wait +
prefill wait + own prefill is solved with the two waits' hypoexponential sum), and it buys TPOT:
another prompt starts only when one of the other ``L − 1`` slots frees, so a decode sees at most
``(L − 1)/T̄`` prefills a second (none at ``L = 1``). When the load would hold ``L`` slots or
more, steps carry ``L`` sequences, ``τ_L = c0 + L·(c_seq + c_kv·C̄ + E[s]/D̄)``, the replica serves
``L/(D̄·τ_L)`` requests/s and the queue grows (TTFT unbounded) while TPOT stays at what ``L``
decoders give. Checked against the simulator's engine in ``tests/unit/sim/test_model_under_a_limit.py``.

What is learned online from the fleet lives in ``learning.PerformanceModel``.

Pure: values in, values out.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from fleetslo.policy.fleetslo.mix import RequestMix
from fleetslo.policy.fleetslo.physics import StepCost

INF = math.inf
_SQRT2 = math.sqrt(2.0)
_BISECTIONS = 24


@dataclass(frozen=True, slots=True)
class Prediction:
    """p90s (``inf``: the queue grows without bound) and the operating point behind them."""

    ttft_p90: float
    tpot_p90: float
    #: Share of each second spent on per-token work (the rest is the fixed cost of steps).
    utilization: float
    #: Mean sequences decoding per replica.
    batch: float
    #: The batch limit caps the decode batch: the replica cannot serve the offered rate.
    limited: bool
    #: Requests/s the replica serves: the offered rate, or less when the limit caps it.
    served: float
    #: Mean seconds a request stays in the replica, arrival to last token (prefill queue, prefill,
    #: decode): by Little's law ``rate × stay_s`` requests are running or waiting in the steady
    #: state. ``inf`` where there is none (the queue grows).
    stay_s: float = INF

    def meets(self, ttft: float, tpot: float) -> bool:
        return self.ttft_p90 <= ttft and self.tpot_p90 <= tpot


def predict(
    cost: StepCost,
    rate: float,
    mix: RequestMix,
    limit: int | None,
    q: float = 0.9,
    *,
    interference: float = 1.0,
) -> Prediction:
    """p90 TTFT and TPOT of one replica offered ``rate`` requests/s of ``mix`` under batch ``limit``.

    ``interference`` scales the rate of prefills a decoding request sees beyond the mean-field
    Poisson rate (1): routing imbalance, chunk boundaries; learned, not assumed.
    """
    return _predict(cost, max(rate, 1e-9), mix, limit, q, interference=interference)


# Memoised: one decision asks for the same operating point several times (the sizing's search, the
# model check, the expected p90s): a quarter of the calls on a replay. Pure, so the cache changes
# nothing but time; its keys are small (a frozen StepCost and RequestMix, numbers).
@functools.lru_cache(maxsize=512)
def _predict(
    cost: StepCost, rate: float, mix: RequestMix, limit: int | None, q: float, *, interference: float
) -> Prediction:
    per_token = cost.per_seq_s + cost.per_kv_token_s * mix.decode_context()
    chunks = [math.ceil(p / cost.max_batched_tokens) for p in mix.prompt]
    prefill = [
        cost.per_prefill_token_s * p + cost.per_attention_token2_s * p * p / 2 + cost.per_seq_s * c
        for p, c in zip(mix.prompt, chunks, strict=True)
    ]
    s_mean = sum(prefill) / len(prefill)
    s2 = sum(s * s for s in prefill) / len(prefill)
    out = mix.mean_output
    w_p, w_d = rate * s_mean, rate * out * per_token
    cap = min(limit or cost.max_num_seqs, cost.max_num_seqs)
    w = w_p + w_d
    n = rate * out * cost.overhead_s / (1 - w) if w < 1 else INF
    tau = cost.overhead_s / (1 - w) if w < 1 else INF
    tau_d = cost.overhead_s + n * per_token
    service = [s + tau_d * c for s, c in zip(prefill, chunks, strict=True)]
    # A request holds a slot of the cap from admission (its prefill) to its last token.
    hold = sum(service) / len(service) + max(out - 1, 0.0) * tau
    held = rate * hold
    if held >= cap:
        # The slots are full: steps carry at most ``cap`` sequences and their prefills.
        tau = cost.overhead_s + cap * (per_token + s_mean / out)
        hold = out * tau
        if rate * hold >= cap or n > cap:
            served = cap / hold
            tau_d = cost.overhead_s + cap * per_token
            # Another prompt starts only when one of the other cap - 1 slots frees.
            seen = served * interference * (cap - 1) / cap
            tpot = _tpot_quantile(
                q, tau=tau, tau_d=tau_d, rate=seen, s_mean=s_mean, s2=s2, outputs=mix.output
            )
            return Prediction(INF, tpot, w, min(n, cap), True, served, INF)
        held = rate * hold
    # The prompts that land during a request's decode are the other slots' admissions: all
    # arrivals while the cap has room, at most the turnover of cap - 1 slots when it has not.
    seen = rate * interference * min(1.0, (cap - 1) / held) if held > 0 else 0.0
    tpot = _tpot_quantile(q, tau=tau, tau_d=tau_d, rate=seen, s_mean=s_mean, s2=s2, outputs=mix.output)
    spread = _hold_spread(service, mix.output, tau, hold)
    slot = slot_wait(cap, held, hold, spread)
    # An arrival first waits for the step in progress to end: half a mean step on average.
    ttft = _ttft_quantile(q, rate, service, slot) + tau / 2
    return Prediction(ttft, tpot, w, n, False, rate, _prefill_wait(rate, service) + hold)


def _tpot_quantile(
    q: float, *, tau: float, tau_d: float, rate: float, s_mean: float, s2: float, outputs: Sequence[float]
) -> float:
    """The q-quantile over requests of ``τ_d + K·h/(D − 1)``, ``K`` Poisson (moment-matched)."""
    h = s2 / s_mean if s_mean > 0 else 0.0
    lives = [(d - 1, rate * (d - 1) * tau * s_mean / h if h > 0 else 0.0) for d in outputs if d >= 2]
    share = len(lives) / len(outputs)
    if share <= 1 - q or h <= 0:
        return tau_d  # most requests have one token (TPOT 0) or nothing prefills: decode steps only
    tail = (1 - q) / share  # the share of multi-token requests above the quantile

    def above(t: float) -> float:
        return sum(1 - _poisson_cdf(math.floor((t - tau_d) * m / h), mu) for m, mu in lives) / len(lives)

    lo = tau_d
    hi = tau_d + max(h * (mu + 8 * math.sqrt(mu) + 8) / m for m, mu in lives)
    if above(lo) <= tail:
        return lo
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if above(mid) > tail else (lo, mid)
    return hi


def _poisson_cdf(k: int, mu: float) -> float:
    """P(K ≤ k) for K ~ Poisson(mu): exact up to k = 2, Wilson–Hilferty beyond (O(1) per call)."""
    if k < 0:
        return 0.0
    if mu <= 0:
        return 1.0
    if k <= 2:
        e = math.exp(-mu)
        return e * (1 + (mu if k >= 1 else 0.0) + (mu * mu / 2 if k >= 2 else 0.0))
    # P(K ≤ k) = P(Gamma(k + 1) > mu), and the Wilson–Hilferty cube-root normal approximation.
    a = k + 1
    z = ((mu / a) ** (1 / 3) - (1 - 1 / (9 * a))) / math.sqrt(1 / (9 * a))
    return 1 - 0.5 * (1.0 + math.erf(z / _SQRT2))  # the standard normal's cdf, as statistics.NormalDist's


def _hold_spread(service: Sequence[float], outputs: Sequence[float], tau: float, hold: float) -> float:
    """Squared coefficient of variation of the slot holding time (prompt and output independent)."""

    def var(xs: Sequence[float]) -> float:
        m = sum(xs) / len(xs)
        return sum((x - m) ** 2 for x in xs) / len(xs)

    return (var(service) + tau * tau * var(outputs)) / (hold * hold) if hold > 0 else 0.0


def slot_wait(cap: int, held: float, hold: float, spread: float) -> tuple[float, float]:
    """(probability of waiting, decay rate of the wait) for a slot of ``cap``, ``held`` of them busy
    on average, each for ``hold`` seconds with squared coefficient of variation ``spread``: Erlang C
    for the probability, the M/M/c exponential tail with Allen–Cunneen's ``(1 + c²)/2`` for the
    decay. ``(0, inf)`` when the cap is far above what the load holds (the engine's maximum)."""
    if held <= 0 or cap - held > 6 * math.sqrt(held) + 6:
        return 0.0, INF
    erlang_b = 1.0
    for k in range(1, cap + 1):
        erlang_b = held * erlang_b / (k + held * erlang_b)
    waiting = cap * erlang_b / (cap - held * (1 - erlang_b))
    return min(1.0, waiting), (cap - held) / hold * 2 / (1 + spread)


def _prefill_wait(rate: float, service: Sequence[float]) -> float:
    """Mean wait in the M/G/1 prefill queue (Pollaczek–Khinchine); ``inf`` when it grows."""
    mean = sum(service) / len(service)
    rho = rate * mean
    if rho >= 1:
        return INF
    return rate * sum(s * s for s in service) / len(service) / (2 * (1 - rho))


def _ttft_quantile(
    q: float, rate: float, service: Sequence[float], slot: tuple[float, float] = (0.0, INF)
) -> float:
    """The q-quantile of slot wait + M/G/1 prefill wait + own service. Each wait is 0 with some
    probability (1 − P for the slot, 1 − ρ for the prefill queue), else exponential; the sum of
    the two exponentials is hypoexponential."""
    mean = sum(service) / len(service)
    rho = rate * mean
    if rho >= 1:
        return INF
    wait = rate * sum(s * s for s in service) / len(service) / (2 * (1 - rho))
    decay = rho / wait if wait > 0 else INF
    p_slot, theta = slot

    def waits_above(u: float) -> float:
        if u < 0:
            return 1.0
        a = rho * math.exp(-u * decay) if decay < INF else 0.0
        if p_slot <= 0 or theta == INF:
            return a
        b = math.exp(-u * theta)
        if decay == INF:
            both = b
        elif abs(theta - decay) < 1e-9 * theta:
            both = (1 + theta * u) * b
        else:
            both = (theta * math.exp(-u * decay) - decay * b) / (theta - decay)
        return (1 - p_slot) * a + p_slot * ((1 - rho) * b + rho * both)

    def above(t: float) -> float:
        return sum(1.0 if s > t else waits_above(t - s) for s in service) / len(service)

    tail = math.log(max(rho, 1e-12) / (1 - q)) / decay if decay < INF else 0.0
    if p_slot > 0 and theta < INF:
        tail = max(tail, 0.0) + math.log(max(p_slot, 1e-12) / (1 - q)) / theta
    lo, hi = 0.0, max(service) + max(tail, 0.0)
    while above(hi) > 1 - q:  # the two tails' sum can reach past the sum of their quantiles
        hi *= 2
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if above(mid) > 1 - q else (lo, mid)
    return hi
