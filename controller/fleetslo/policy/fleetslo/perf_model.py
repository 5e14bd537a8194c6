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

**TTFT** (``ttft``). vLLM packs every waiting prompt into the next step while its token budget
lasts, so a prompt waits for the step in progress to end, then rides the next one with the prompts
that arrived alongside it: the step lengths form a chain whose spread grows with the prefill
load, and the wait is a gamma moment-matched to it. On top: its own prefill and the decode steps
its chunks ride in, and under a batch limit the wait for a slot. A queue grows only where the
prompts need more of the steps' token budget than there is (``occupancy``) or the steps grow
without bound. The p90 is solved over the prompt lengths read between the mix's points
(``RequestMix.prompt_band``, lognormal from point to point): read off the ten points it sat on the
one standing for the top tenth, the 95th percentile (stop 52). (Until stop 47 each prompt took a
whole step in an M/G/1 queue, which read infinite at 60-80 % of the rate a replica carries.)

**Stay.** A request stays in the replica for its wait, its prefill and its decode:
``W = E[wait] + T̄``; Little's law turns it into the requests a steady state holds, ``λ·W``, so
what the fleet holds beyond that is a queue (``backlog``), and a mix with longer outputs is held
longer without being one.

**The batch limit** ``L`` caps the running sequences, and a request holds a slot from its prefill
to its last token (``T̄ = E[service] + (D̄ − 1)·τ``, ``λ·T̄`` slots held). Below ``L`` the cap
costs TTFT the wait for a free slot (Erlang C for the probability of waiting, the M/M/c
exponential tail with Allen–Cunneen's ``(1 + c²)/2`` for its decay, added to the step chain's
wait), and it buys TPOT:
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
from fleetslo.policy.fleetslo.ttft import (
    BISECTIONS,
    INF,
    FirstToken,
    gamma_above,
    hold_spread,
    slot_wait,
    step_chain,
)


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
    at = _operating_point(cost, rate, mix, limit, interference, q=q)
    tpot = _tpot_quantile(q, at.tpot_tail(q, mix.output), at.tau_d)
    if at.limited:
        return Prediction(INF, tpot, at.w, min(at.n, at.cap), True, at.served, INF)
    # The wait for a step to join (the step chain) and a batch slot, then the prompt's own service.
    first = at.first_token(rate)
    return Prediction(first.quantile(q), tpot, at.w, at.n, False, rate, first.mean_wait() + at.hold)


def meets(
    cost: StepCost,
    rate: float,
    mix: RequestMix,
    limit: int | None,
    q: float,
    *,
    ttft: float,
    tpot: float,
    interference: float = 1.0,
    ttft_scale: float = 1.0,
) -> bool:
    """Whether ``predict(...)`` meets p90 ``ttft`` (its TTFT times ``ttft_scale``) and ``tpot``,
    without solving for either quantile: each is at most its target where the share of requests
    above the target is at most ``1 - q``. The sizing's search asks only this, about 25 times a
    decision; one evaluation of each tail instead of a bisection's 24 makes the search 4.7x cheaper
    (``benchmarks decide``) and a decision 2.4x. The answer differs from comparing the solved p90s
    only where a target lies within the bisection's last step (2^-24 of its bracket) of the p90."""
    if math.isnan(ttft) or math.isnan(tpot):
        return False  # met by nothing, as in ``Prediction.meets``
    rate = max(rate, 1e-9)  # as ``predict`` clamps it
    at = _operating_point(cost, rate, mix, limit, interference, q=q)
    if at.limited and ttft < INF:
        return False  # the queue grows: TTFT is unbounded
    if not _tpot_within(tpot, at.tpot_tail(q, mix.output), at.tau_d):
        return False
    if at.limited:
        return True
    # TTFT (the waits and the prompt's own service) x scale <= target
    return at.first_token(rate).within(ttft / ttft_scale, q)


@dataclass(frozen=True, slots=True)
class _OperatingPoint:
    """One replica's steady state at a rate: what both the p90s and the test against targets read."""

    limited: bool
    w: float
    n: float
    cap: int
    tau: float
    tau_d: float
    #: Prefills a second that a decoding request sees.
    seen: float
    s_mean: float
    s2: float
    s3: float
    served: float
    #: The own prefill, and the decode steps its chunks ride in, of each length of the prompt band.
    service: tuple[float, ...]
    #: What each prompt point takes of the steps' token budget, in seconds of steps.
    occupancy: tuple[float, ...]
    hold: float
    slot: tuple[float, float]

    def first_token(self, rate: float) -> FirstToken:
        ahead = step_chain(rate, self.tau, self.s_mean, self.s2, self.s3)
        return FirstToken(rate, self.service, self.occupancy, ahead, self.slot)

    def tpot_tail(self, q: float, outputs: Sequence[float]) -> _TpotTail | None:
        return _TpotTail.of(q, tau=self.tau, rate=self.seen, s_mean=self.s_mean, s2=self.s2, outputs=outputs)


def _operating_point(
    cost: StepCost, rate: float, mix: RequestMix, limit: int | None, interference: float, *, q: float
) -> _OperatingPoint:
    per_token = cost.per_seq_s + cost.per_kv_token_s * mix.decode_context()
    work = [_own_work(cost, p) for p in mix.prompt]
    prefill, chunks = [s for s, _ in work], [c for _, c in work]
    s_mean = sum(prefill) / len(prefill)
    s2 = sum(s * s for s in prefill) / len(prefill)
    s3 = sum(s**3 for s in prefill) / len(prefill)
    out = mix.mean_output
    w_p, w_d = rate * s_mean, rate * out * per_token
    cap = min(limit or cost.max_num_seqs, cost.max_num_seqs)
    w = w_p + w_d
    n = rate * out * cost.overhead_s / (1 - w) if w < 1 else INF
    tau = cost.overhead_s / (1 - w) if w < 1 else INF
    tau_d = cost.overhead_s + n * per_token
    service = tuple(s + tau_d * c for s, c in zip(prefill, chunks, strict=True))
    # The p90 TTFT is read between the prompt points (``RequestMix.prompt_band``), not off them.
    band = tuple(s + tau_d * c for s, c in _band_prefills(cost, mix, q))
    budget = max(cost.max_batched_tokens - n, 1.0) if n < INF else 1.0
    occupancy = tuple(s + tau_d * p / budget for s, p in zip(prefill, mix.prompt, strict=True))
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
            return _OperatingPoint(
                limited=True, w=w, n=n, cap=cap, tau=tau, tau_d=tau_d, seen=seen, s_mean=s_mean, s2=s2, s3=s3,
                served=served, service=band, occupancy=occupancy, hold=hold, slot=(0.0, INF),
            )  # fmt: skip
        held = rate * hold
    # The prompts that land during a request's decode are the other slots' admissions: all
    # arrivals while the cap has room, at most the turnover of cap - 1 slots when it has not.
    seen = rate * interference * min(1.0, (cap - 1) / held) if held > 0 else 0.0
    slot = slot_wait(cap, held, hold, hold_spread(service, mix.output, tau, hold))
    return _OperatingPoint(
        limited=False, w=w, n=n, cap=cap, tau=tau, tau_d=tau_d, seen=seen, s_mean=s_mean, s2=s2, s3=s3,
        served=rate, service=band, occupancy=occupancy, hold=hold, slot=slot,
    )  # fmt: skip


@functools.lru_cache(maxsize=64)
def _band_prefills(cost: StepCost, mix: RequestMix, q: float) -> tuple[tuple[float, int], ...]:
    """(own prefill, chunks) of each length of the mix's prompt band: the same for every rate the
    sizing tries, so computed once per mix (the sizing asks ``meets`` about 25 times a decision)."""
    return tuple(_own_work(cost, p) for p in mix.prompt_band(q))


def _own_work(cost: StepCost, prompt: float) -> tuple[float, int]:
    """A prompt's own prefill work (its tokens, their attention, its sequence's share per chunk)
    and the chunks the token budget cuts it into: one computation for the points and the band."""
    chunks = math.ceil(prompt / cost.max_batched_tokens)
    attention = cost.per_attention_token2_s * prompt * prompt / 2
    return cost.per_prefill_token_s * prompt + attention + cost.per_seq_s * chunks, chunks


@dataclass(frozen=True, slots=True)
class _TpotTail:
    """The share of requests whose TPOT passes ``τ_d + x``: ``τ_d + K·h/(D − 1)`` over the output
    points, ``K`` Poisson (moment-matched), against the share ``tail`` the quantile allows."""

    h: float
    lives: tuple[tuple[float, float], ...]
    tail: float

    @classmethod
    def of(
        cls, q: float, *, tau: float, rate: float, s_mean: float, s2: float, outputs: Sequence[float]
    ) -> _TpotTail | None:
        """``None`` where the quantile is ``τ_d`` itself: most requests have one token (TPOT 0) or
        nothing prefills (decode steps only)."""
        h = s2 / s_mean if s_mean > 0 else 0.0
        lives = tuple((d - 1, rate * (d - 1) * tau * s_mean / h if h > 0 else 0.0) for d in outputs if d >= 2)
        share = len(lives) / len(outputs)
        if share <= 1 - q or h <= 0:
            return None
        return cls(h, lives, (1 - q) / share)  # the share of multi-token requests above the quantile

    def above(self, x: float) -> float:
        h = self.h
        return sum(1 - _poisson_cdf(math.floor(x * m / h), mu) for m, mu in self.lives) / len(self.lives)

    def reach(self) -> float:
        """A TPOT beyond ``τ_d`` that (up to the approximation's tail) no request passes."""
        return max(self.h * (mu + 8 * math.sqrt(mu) + 8) / m for m, mu in self.lives)


def _tpot_quantile(q: float, tail: _TpotTail | None, tau_d: float) -> float:
    """The q-quantile over requests of ``τ_d + K·h/(D − 1)``."""
    if tail is None:
        return tau_d
    lo, hi = tau_d, tau_d + tail.reach()
    if tail.above(lo - tau_d) <= tail.tail:
        return lo
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail.above(mid - tau_d) > tail.tail else (lo, mid)
    return hi


def _tpot_within(target: float, tail: _TpotTail | None, tau_d: float) -> bool:
    """``_tpot_quantile(...) <= target``, read off the tail at the target."""
    if tail is None or target < tau_d:
        return tau_d <= target
    return target >= tau_d + tail.reach() or tail.above(target - tau_d) <= tail.tail


def _poisson_cdf(k: int, mu: float) -> float:
    """P(K ≤ k) for K ~ Poisson(mu): exact up to k = 2, Wilson–Hilferty beyond (O(1) per call)."""
    if k < 0:
        return 0.0
    if mu <= 0:
        return 1.0
    if k <= 2:
        e = math.exp(-mu)
        return e * (1 + (mu if k >= 1 else 0.0) + (mu * mu / 2 if k >= 2 else 0.0))
    return gamma_above(mu, k + 1, 1.0)  # P(K ≤ k) = P(Gamma(k + 1) > mu)
