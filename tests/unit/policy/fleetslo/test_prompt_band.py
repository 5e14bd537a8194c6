"""A p90 TTFT is read between the mix's prompt points, not off them (``RequestMix.prompt_band``).

Each point stands for a tenth of the requests, so a quantile read off the points jumps from one to
the next: over heavy-tailed prompts the model's p90 TTFT sat on the top point, their 95th
percentile, and the queue's wait hardly moved it. Drawn 248 (lognormal prompts of median 1,589
tokens, MI300X): 1.17 s at any load where the engine's fleet gives 0.76 s idle and 0.95 s at 1.1
requests/s a replica; the learned TTFT bias (x0.76) then made the model flat in the fleet's size.
"""

from __future__ import annotations

import itertools
import math
import random
from statistics import NormalDist

import pytest
from fleetslo.policy.fleetslo.mix import RequestMix, band_size, banded, from_lengths
from fleetslo.policy.fleetslo.perf_model import predict
from fleetslo.sim.compare import step_cost
from fleetslo.sim.harness import make_engine, replay_open
from fleetslo.sim.profile import builtin_profile
from fleetslo.sim.workload import Request
from hypothesis import given, settings
from hypothesis import strategies as st

Z = NormalDist()
MI300X = builtin_profile("mi300x-qwen3-235b-fp8-tp4")


def lognormal_points(median: float, sigma: float, n: int = 10) -> tuple[float, ...]:
    return tuple(median * math.exp(sigma * Z.inv_cdf((i + 0.5) / n)) for i in range(n))


@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99])
def test_a_band_puts_a_length_exactly_at_the_quantile_it_is_read_at(q: float) -> None:
    size = band_size(q)
    assert size >= 40
    assert any(abs((j + 0.5) / size - q) < 1e-9 for j in range(size))


def test_the_band_of_a_lognormal_is_the_lognormal_between_the_outer_points() -> None:
    median, sigma = 1589.0, 1.32
    band = banded(lognormal_points(median, sigma), band_size(0.9))
    size = len(band)
    for j, length in enumerate(band):
        p = (j + 0.5) / size
        if 0.05 <= p <= 0.95:
            assert length == pytest.approx(median * math.exp(sigma * Z.inv_cdf(p)), rel=1e-9)
    p90 = band[round(0.9 * size - 0.5)]
    assert p90 == pytest.approx(median * math.exp(sigma * Z.inv_cdf(0.9)), rel=1e-9)  # 8,600 tokens


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1.0, 200_000.0), min_size=1, max_size=24), st.sampled_from([0.5, 0.8, 0.9, 0.99]))
def test_a_band_is_monotone_and_stays_within_the_points(points: list[float], q: float) -> None:
    ordered = sorted(points)
    band = banded(ordered, band_size(q))
    assert all(a <= b * (1 + 1e-12) for a, b in itertools.pairwise(band))
    assert min(band) >= max(ordered[0], 1.0) * (1 - 1e-12)
    assert max(band) <= max(ordered[-1], 1.0) * (1 + 1e-12)


def test_an_idle_replicas_p90_ttft_is_the_prefill_of_the_90th_percentile_prompt_not_the_95th() -> None:
    """At light load the engine's p90 TTFT is the 90th-percentile prompt's prefill; the model read
    the top point's (the 95th percentile's), 1.6x too long for drawn 248's prompts."""
    rng = random.Random(3)
    prompts = [max(1, round(1589 * math.exp(rng.gauss(0, 1.32)))) for _ in range(20_000)]
    outputs = [max(2, round(219 * math.exp(rng.gauss(0, 1.0)))) for _ in range(20_000)]
    mix = from_lengths(prompts, outputs)
    assert mix is not None
    rate, n, t = 0.02, 3_000, 0.0  # one request every 50 s: nobody waits for anybody
    requests = []
    for p, d in zip(prompts[:n], outputs[:n], strict=True):
        t += rng.expovariate(rate)
        requests.append(Request(t, p, d))
    done = replay_open(make_engine(MI300X, limit=None), requests)
    ttft = sorted(r.ttft for r in done if r.ttft is not None)
    engine = ttft[int(0.9 * len(ttft))]
    model = predict(step_cost(MI300X), rate, mix, None).ttft_p90
    assert model == pytest.approx(engine, rel=0.08)
    top_point = predict(step_cost(MI300X), rate, RequestMix(mix.prompt[-1:], mix.output), None).ttft_p90
    assert top_point > 1.4 * engine  # what the model read before the band


def test_the_models_p90_ttft_rises_with_the_load_on_heavy_tailed_prompts() -> None:
    """Drawn 248's replica from 96 to 29 replicas' share of 32 requests/s: the engine's fleet went
    0.76 -> 0.87 -> 0.95 s; read off the points the model moved by under 1 % over that range."""
    cost = step_cost(MI300X)
    mix = RequestMix(lognormal_points(1589.0, 1.32), lognormal_points(219.0, 1.0))
    light, busy = (predict(cost, 32.0 / n, mix, None).ttft_p90 for n in (96, 29))
    assert busy > 1.2 * light


def test_a_heavy_tails_quantiles_are_read_before_the_points_were_scaled_to_the_mean() -> None:
    """The mid-quantiles of a heavy tail average below its mean, so the points are scaled up to it
    (drawn 248: x1.18); the band reads the quantiles as they were measured."""
    rng = random.Random(5)
    prompts = [max(1, round(1589 * math.exp(rng.gauss(0, 1.32)))) for _ in range(50_000)]
    mix = from_lengths(prompts, [100] * len(prompts))
    assert mix is not None and mix.prompt_scale > 1.1
    assert mix.mean_prompt == pytest.approx(sum(prompts) / len(prompts))
    size = band_size(0.9)
    p90 = mix.prompt_band(0.9)[round(0.9 * size - 0.5)]
    assert p90 == pytest.approx(sorted(prompts)[int(0.9 * len(prompts))], rel=0.05)


def test_the_scale_is_kept_blended_and_read_back_and_an_older_record_reads_one() -> None:
    a = RequestMix((100.0, 1000.0), (10.0, 20.0), prompt_scale=1.2)
    b = RequestMix((200.0, 2000.0), (10.0, 20.0), prompt_scale=1.0)
    assert a.blend(b, 0.25).prompt_scale == pytest.approx(1.15)
    assert RequestMix.from_dict(a.to_dict()) == a
    record = {"prompt": [100.0, 1000.0], "output": [10.0, 20.0]}
    assert RequestMix.from_dict(record).prompt_scale == 1.0
    for bad in (float("nan"), -1.0, 0.0, float("inf")):
        assert RequestMix.from_dict({**record, "prompt_scale": bad}).prompt_scale == 1.0
