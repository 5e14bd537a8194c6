"""What a prompt waits before its first token: the step it joins, a batch slot, its own prefill.

``perf_model`` asks this module for the p90 TTFT of a replica's operating point, and whether a
target meets it. Three parts, independent, added:

* **The step chain** (``step_chain``): the rest of the step in progress and the other prompts that
  join the next one, a gamma moment-matched from the chain of step lengths.
* **A slot** of the batch limit (``slot_wait``): none while the cap has room; else Erlang C's
  probability of waiting, then an exponential wait.
* **Its own service**: its prefill and the decode steps its chunks ride in, one value per length
  of the mix's prompt band (``RequestMix.prompt_band``: lengths between the points).

The prompts' demand on the steps' token budget (``occupancy``) says only whether a queue grows.

Pure: values in, values out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

INF = math.inf
SQRT2 = math.sqrt(2.0)
#: Bisection steps of the model's inverse searches (2^-24 of the bracket: far below a replica's noise).
BISECTIONS = 24


def step_chain(rate: float, tau: float, s_mean: float, s2: float, s3: float) -> tuple[float, float]:
    """(shape, scale) of a gamma for ``R + X``: what a prompt waits for the step in progress to end
    (``R``) and for the other prompts that join its step (``X``), beside its own prefill.

    A prompt that arrives during step ``k`` is prefilled in step ``k + 1`` with every prompt that
    arrived during step ``k``: vLLM packs them into the token budget. So step lengths form a chain,
    ``T' = τ_d + Σ s`` over a Poisson ``λ·T`` prompts (``s`` the prefills, moments ``E[s^j]``),
    whose stationary cumulants follow from the law of total cumulance: mean ``τ``, variance
    ``v = λ·τ·E[s²]/(1 − ρ²)`` and third cumulant ``(λ·τ·E[s³] + 3·λ²·E[s]·E[s²]·v)/(1 − ρ³)``
    (``ρ = λ·E[s]``): near saturation steps grow long *and* uneven. The step an arrival lands in
    is length-biased (``E[Tʲ⁺¹]/E[T]``); given its length ``t``, ``R`` is uniform on ``[0, t]``
    and ``X`` compound Poisson with mean ``λ·t·E[s]`` and variance ``λ·t·E[s²]``. Mean and
    variance of ``R + X`` are exact; the sum is moment-matched to a gamma
    (``tests/unit/policy/fleetslo/test_step_chain.py``: p90 0.96-1.00x a simulation of the chain,
    0.77x where rare prefills are 10-60x the step). Against the simulator's engine (short, chat and
    long prompts on three profiles up to where the queue grows, ``benchmarks model``) the p90
    TTFT reads 0.91-1.09x, 16k-token prompts at 75-85 % of the load that fills every second up
    to 1.33x (a prompt of several chunks counts as one long step); serving one prompt per step,
    as the model did before, read infinite at 60-80 % of the rate the engine carries."""
    rho = rate * s_mean
    if rho >= 1 or tau >= INF:
        return INF, INF
    v = rate * tau * s2 / (1 - rho * rho)
    k3 = (rate * tau * s3 + 3 * rate * rate * s_mean * s2 * v) / (1 - rho**3)
    biased = tau + v / tau  # E[T²]/E[T]: the mean of the step an arrival lands in
    biased2 = (k3 + 3 * tau * v + tau**3) / tau  # E[T³]/E[T]: its second moment
    a = 0.5 + rho
    mean = a * biased
    var = biased2 / 12 + rate * s2 * biased + a * a * (biased2 - biased * biased)
    if var <= 0:
        return INF, mean  # no spread: the shape's limit
    return mean * mean / var, var / mean


def hold_spread(service: Sequence[float], outputs: Sequence[float], tau: float, hold: float) -> float:
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


@dataclass(frozen=True, slots=True)
class FirstToken:
    """What decides a replica's TTFT at one operating point: its rate, each prompt length's own
    service (over the prompt band), each prompt point's occupancy of the token budget, the step
    chain's gamma and the slot wait."""

    rate: float
    #: Equally likely values: the quantile reads them as the prompts' distribution.
    service: tuple[float, ...]
    occupancy: tuple[float, ...]
    #: (shape, scale) of ``step_chain``'s gamma; ``(inf, m)`` is the point ``m``.
    ahead: tuple[float, float]
    #: (probability of waiting, decay rate) of ``slot_wait``.
    slot: tuple[float, float] = (0.0, INF)

    def mean_wait(self) -> float:
        """The mean of the step chain's wait (the slot's is the batch limit's business)."""
        shape, scale = self.ahead
        return scale if shape == INF else shape * scale

    def quantile(self, q: float) -> float:
        """The q-quantile of slot wait + the step chain's wait + own service (``_above``)."""
        solved = self._above(q)
        if solved is None:
            return INF
        above, hi = solved
        lo = 0.0
        while above(hi) > 1 - q:  # the tails' sum can reach past the sum of their quantiles
            hi *= 2
        for _ in range(BISECTIONS):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if above(mid) > 1 - q else (lo, mid)
        return hi

    def within(self, target: float, q: float) -> bool:
        """``quantile(q) <= target``, read off the tail at the target (the quantile is above 0)."""
        solved = self._above(q)
        if solved is None:
            return target >= INF
        return target > 0 and solved[0](target) <= 1 - q

    def _above(self, q: float) -> tuple[Callable[[float], float], float] | None:
        """The share of requests whose slot wait + step-chain wait + own service passes ``t``, and
        a first bracket for its q-quantile; ``None`` where a queue grows: the prompts need more of
        the steps' token budget than there is, or the steps themselves grow without bound. The slot
        wait is 0 with probability 1 − P, else exponential."""
        rate, service, occupancy = self.rate, self.service, self.occupancy
        rho = rate * sum(occupancy) / len(occupancy)
        shape, scale = self.ahead
        if rho >= 1 or scale == INF:
            return None
        p_slot, theta = self.slot
        slotted = p_slot > 0 and theta < INF

        def waits_above(u: float) -> float:
            free = gamma_above(u, shape, scale)
            if not slotted or u <= 0:
                return free
            # P(G + W > u) = P(W > u) + ∫₀ᵘ θ·e^(−θw)·P(G > u − w) dw, the integral by Gauss–Legendre
            waited = math.exp(-theta * u) + sum(
                u * w * theta * math.exp(-theta * u * x) * gamma_above(u * (1 - x), shape, scale)
                for x, w in _LEGENDRE
            )
            return (1 - p_slot) * free + p_slot * waited

        def above(t: float) -> float:
            return sum(waits_above(t - s) for s in service) / len(service)

        spread = shape * scale * (1 + 8 / math.sqrt(shape)) if shape < INF else scale
        tail = math.log(max(p_slot, 1e-12) / (1 - q)) / theta if slotted else 0.0
        return above, max(service) + spread + max(tail, 0.0)


#: Gauss–Legendre's eight nodes and weights on [0, 1]: ∫₀¹ f ≈ Σ wᵢ·f(xᵢ).
_LEGENDRE = tuple(
    pair
    for x, w in ((0.1834346424956498, 0.3626837833783620), (0.5255324099163290, 0.3137066458778873),
                 (0.7966664774136267, 0.2223810344533745), (0.9602898564975363, 0.1012285362903763))
    for pair in (((1 - x) / 2, w / 2), ((1 + x) / 2, w / 2))
)  # fmt: skip


def gamma_above(u: float, shape: float, scale: float) -> float:
    """P(G > u) for G ~ Gamma(shape, scale): Wilson–Hilferty's cube-root normal approximation."""
    if u <= 0:
        return 1.0
    if shape == INF:
        return 1.0 if u < scale else 0.0  # no spread: all of it at the mean (``scale`` holds it)
    z = ((u / (shape * scale)) ** (1 / 3) - (1 - 1 / (9 * shape))) * 3 * math.sqrt(shape)
    return 0.5 * math.erfc(z / SQRT2)
