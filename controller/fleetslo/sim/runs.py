"""Closed forms of a run of decode steps, and the step-time noise.

A run of pure decode steps keeps its batch, so its step ``i`` lasts ``a + b·i`` seconds (the KV read
grows by one token per sequence per step). ``run_time`` is how long ``n`` such steps take and
``steps_within`` how many fit in a span, both computed as the engine computes them (the same float
expression, so a run split by a scrape ends at the same instant as the whole). Pure functions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable


def run_time(a: float, b: float, n: int) -> float:
    """Seconds taken by ``n`` steps lasting ``a, a+b, a+2b, …``."""
    return n * a + b * n * (n - 1) / 2


def steps_within(a: float, b: float, dt: float) -> int:
    """The largest ``n`` with ``run_time(a, b, n) <= dt``."""
    if dt < a:
        return 0
    if b <= 0:
        n = int(dt / a)
    else:
        h = a - b / 2
        n = int((-h + math.sqrt(h * h + 2 * b * dt)) / b)
    while n > 0 and run_time(a, b, n) > dt:
        n -= 1
    while run_time(a, b, n + 1) <= dt:
        n += 1
    return n


def noise_sampler(cv: float, rng: random.Random | None) -> Callable[[int], float]:
    """The factor on the time of ``steps`` consecutive steps, each jittered independently by a
    lognormal of mean 1 and coefficient of variation ``cv`` (the profile's ``noise_cv``, fitted
    per step from the plugin's step histogram). Their sum is drawn at once, as a lognormal with
    the sum's mean and variance (cv / sqrt(steps)), so a run of 30 decode steps spreads as 30
    jittered steps do, not as one step stretched 30 times: drawn once for the whole run, a
    request alone on the replica had its TPOT spread like a single step's (p90 1.6x the mean at
    cv 0.5, where the real engine showed 1.1x)."""
    if cv <= 0:
        return _one
    source = rng or random.Random(0)
    var = cv * cv
    one = math.sqrt(math.log(1 + var))

    def draw(steps: int) -> float:
        sigma = one if steps <= 1 else math.sqrt(math.log(1 + var / steps))
        return source.lognormvariate(-sigma * sigma / 2, sigma)  # mean factor 1

    return draw


def _one(steps: int = 1) -> float:
    return 1.0
