"""``ttft.step_chain``'s gamma against a simulation of the chain it summarises.

A prompt arriving during step ``k`` waits the rest of it (``R``) and rides step ``k + 1`` with the
prompts that arrived during step ``k`` (``X``, their prefill time). Steps follow ``T' = τ_d + Σ s``
over a Poisson ``λ·T`` prompts. Simulating that chain and sampling arrivals uniformly in time gives
the exact distribution of ``R + X``; the closed form must match its mean and variance (both exact,
from the chain's first three cumulants) and its p90 (a gamma's, moment-matched).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random

import pytest
from fleetslo.policy.fleetslo.ttft import FirstToken, step_chain


def simulated_waits(rate: float, tau_d: float, prefills: list[float], rng: random.Random) -> list[float]:
    """``R + X`` for arrivals spread uniformly in time over a long run of the chain."""

    def arrivals_during(t: float) -> int:
        k, acc = 0, rng.expovariate(rate)
        while acc < t:
            k, acc = k + 1, acc + rng.expovariate(rate)
        return k

    steps = [tau_d]
    for _ in range(200_000):
        steps.append(tau_d + sum(rng.choice(prefills) for _ in range(arrivals_during(steps[-1]))))
    ends = list(itertools.accumulate(steps[1000:]))  # the chain forgets its start
    waits = []
    for _ in range(20_000):
        # an arrival lands in a step with probability proportional to its length
        t = steps[1000 + bisect.bisect_left(ends, rng.random() * ends[-1])]
        waits.append(rng.random() * t + sum(rng.choice(prefills) for _ in range(arrivals_during(t))))
    return waits


@pytest.mark.parametrize(
    ("rate", "tau_d", "prefills", "far_apart"),
    [
        (4.0, 0.03, [0.01, 0.02, 0.04, 0.08], False),  # light: ρ 0.15
        (12.0, 0.03, [0.01, 0.02, 0.04, 0.08], False),  # ρ 0.45
        (20.0, 0.03, [0.01, 0.02, 0.04, 0.08], False),  # ρ 0.75, near the knee
        (0.3, 0.04, [0.3, 0.6, 1.2, 2.4], True),  # long prompts, few and large
    ],
)
def test_the_gamma_has_the_chains_moments_and_p90(
    rate: float, tau_d: float, prefills: list[float], far_apart: bool
) -> None:
    rng = random.Random(47)
    s_mean = sum(prefills) / len(prefills)
    s2 = sum(s * s for s in prefills) / len(prefills)
    s3 = sum(s**3 for s in prefills) / len(prefills)
    tau = tau_d / (1 - rate * s_mean)  # the chain's mean step
    shape, scale = step_chain(rate, tau, s_mean, s2, s3)
    waits = sorted(simulated_waits(rate, tau_d, prefills, rng))
    mean = sum(waits) / len(waits)
    var = sum((w - mean) ** 2 for w in waits) / len(waits)
    assert shape * scale == pytest.approx(mean, rel=0.05)  # exact but for sampling
    assert shape * scale * scale == pytest.approx(var, rel=0.05)
    p90 = waits[int(0.9 * len(waits))]
    model = FirstToken(rate, (0.0,), (0.0,), (shape, scale)).quantile(0.9)
    # a gamma's p90 where a step is τ_d and, rarely, a prefill 10-60 times it: the mixture's p90 sits
    # at its jump, which two moments cannot place (0.77x; the prompt's own prefill dominates there)
    assert p90 * (0.7 if far_apart else 0.95) <= model <= p90 * 1.05


def test_no_chain_where_the_prefills_fill_every_second() -> None:
    assert step_chain(10.0, 0.05, 0.1, 0.02, 0.005) == (math.inf, math.inf)
    assert FirstToken(10.0, (0.1,), (0.1,), (math.inf, math.inf)).quantile(0.9) == math.inf
