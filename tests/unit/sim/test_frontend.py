"""The API server as a queue: its waiting follows queueing theory, streaming load slows it, and in
the engine it moves only the client's timestamps (vLLM's own page and TPOT stay the engine's)."""

from __future__ import annotations

import math
import random

import pytest
from fleetslo.sim.engine import Engine
from fleetslo.sim.frontend import RATE_WINDOW_S, FrontendServer
from fleetslo.sim.harness import make_engine, replay_open
from fleetslo.sim.profile import FrontendQueue
from fleetslo.sim.vllm_metrics import EngineMetrics
from fleetslo.sim.workload import Request

from tests.unit.sim.sim_support import tiny_profile

QUEUE = {"per_request_cpu_s": 0.004, "per_prompt_token_cpu_s": 1e-5, "per_output_token_cpu_s": 0.0}


def _arrivals(rate: float, n: int, seed: int = 3) -> list[float]:
    rng, t, out = random.Random(seed), 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


def test_pre_processing_waits_as_an_md1_queue() -> None:
    # Constant work (4 ms + 100 tokens x 10 us = 5 ms) x stretch 2 = 10 ms, no streaming load.
    server = FrontendServer(FrontendQueue(**QUEUE, cpu_stretch=2.0))
    service, rho = 0.010, 0.7
    delays = [server.admit(i, t, 100, 1) for i, t in enumerate(_arrivals(rho / service, 100_000))]
    waits = [d - service for d in delays]  # the first token's streaming costs 0 here
    theory = rho * service / (2 * (1 - rho))  # Pollaczek-Khinchine, deterministic service
    assert sum(waits) / len(waits) == pytest.approx(theory, rel=0.05)
    assert min(waits) == pytest.approx(0.0, abs=1e-12)


def test_waiting_grows_with_utilisation() -> None:
    means = []
    for rho in (0.2, 0.5, 0.8):
        server = FrontendServer(FrontendQueue(**QUEUE, cpu_stretch=2.0))
        delays = [server.admit(i, t, 100, 1) for i, t in enumerate(_arrivals(rho / 0.010, 20_000))]
        means.append(sum(delays) / len(delays))
    assert means[0] < means[1] < means[2]
    assert means[2] > 2 * means[0]


def test_streaming_takes_its_share_of_the_server() -> None:
    # 2000 output tokens/s at 0.2 ms each (x stretch 1) is 40 % of the server: 1 ms of
    # pre-processing then takes 1 / 0.6 ms, and the first streamed token 0.2 / 0.6 ms.
    queue = FrontendQueue(per_request_cpu_s=0.001, per_output_token_cpu_s=0.0002, cpu_stretch=1.0)
    server = FrontendServer(queue)
    t, delay = 0.0, 0.0
    for i in range(20_000):  # one request of 200 tokens every 0.1 s: steady 2000 tokens/s
        t += 0.1
        delay = server.admit(i, t, 0, 200)
    assert server.token_rate == pytest.approx(2000, rel=0.01)
    assert server.streaming_share() == pytest.approx(0.4, rel=0.01)
    assert delay == pytest.approx((0.001 + 0.0002) / 0.6, rel=0.01)


def test_the_token_rate_forgets_old_arrivals() -> None:
    server = FrontendServer(FrontendQueue(**QUEUE))
    server.admit(0, 0.0, 10, 1000)
    server.admit(1, 10 * RATE_WINDOW_S, 10, 0)
    assert server.token_rate < 1000 / RATE_WINDOW_S * 1e-4


def test_in_the_engine_it_moves_the_clients_first_token_and_nothing_else() -> None:
    queue = {**QUEUE, "per_output_token_cpu_s": 1e-4, "cpu_stretch": 3.0}
    plain, queued = tiny_profile(), tiny_profile(frontend_queue=queue)
    requests = [Request(t, 200, 20) for t in _arrivals(8.0, 400)]
    base_engine, queue_engine = make_engine(plain), make_engine(queued)
    base, moved = replay_open(base_engine, requests), replay_open(queue_engine, requests)
    server = FrontendServer(queued.frontend_queue)  # type: ignore[arg-type]
    for i, (b, m, r) in enumerate(zip(base, moved, requests, strict=True)):
        delay = server.admit(i, r.arrival_s, r.input_tokens, r.output_tokens)
        assert b.first_token is not None and m.first_token is not None
        assert m.first_token - b.first_token == pytest.approx(delay, abs=1e-9)
        assert m.finish - b.finish == pytest.approx(delay, abs=1e-9)  # type: ignore[operator]
    # vLLM's own histograms never see the API server.
    assert queue_engine.metrics.ttft.sum == pytest.approx(base_engine.metrics.ttft.sum)
    assert queue_engine.metrics.tpot.sum == pytest.approx(base_engine.metrics.tpot.sum)
    assert queue_engine.fe_queue is not None and queue_engine.fe_queue._delays == {}  # dropped at finish


def test_a_queue_replaces_the_fixed_front_end_delays() -> None:
    fixed = {"per_request_s": 0.5, "per_prompt_token_s": 0.0, "per_output_token_s": 0.01}
    both = tiny_profile(frontend=fixed, frontend_queue={**QUEUE, "per_request_cpu_s": 0.0})
    neither = tiny_profile()
    requests = [Request(1.0, 200, 20)]
    (a,), (b,) = replay_open(make_engine(both), requests), replay_open(make_engine(neither), requests)
    # A queue with 2 ms of prompt work and nothing else: not the fixed 0.5 s and 10 ms per token.
    assert a.first_token - b.first_token == pytest.approx(200 * 1e-5)  # type: ignore[operator]
    assert a.finish - b.finish == pytest.approx(200 * 1e-5)  # type: ignore[operator]


def test_the_hosts_delay_is_lognormal_per_request_and_reproducible() -> None:
    queue = FrontendQueue(per_request_cpu_s=0.0, host_delay_median_s=0.02, host_delay_sigma=0.5)
    first = FrontendServer(queue).admit(0, 0.0, 0, 1)
    server = FrontendServer(queue)
    delays = sorted(server.admit(i, float(i), 0, 1) for i in range(20_000))
    assert delays[len(delays) // 2] == pytest.approx(0.02, rel=0.03)
    assert delays[int(0.9 * len(delays))] == pytest.approx(0.02 * math.exp(0.5 * 1.2816), rel=0.05)
    assert FrontendServer(queue).admit(0, 0.0, 0, 1) == first  # seeded: every run draws the same
    # The last token's delay is drawn again: the client's TPOT moves by the difference.
    firsts = [server.first_delay(i) for i in range(20_000)]
    lasts = [server.last_delay(i) for i in range(20_000)]
    assert sorted(lasts)[len(lasts) // 2] == pytest.approx(0.02, rel=0.03)
    assert sum(1 for f, last in zip(firsts, lasts, strict=True) if f != last) > 19_000
    assert server.last_delay(0) == 0.0  # read once: forgotten


def test_each_replica_of_a_fleet_draws_its_own_host_delays() -> None:
    """Reproduces a defect: every engine's front end was seeded 0, so all replicas of a fleet drew
    the same sequence of host delays (correlated stalls that a real fleet does not have)."""
    queue = FrontendQueue(per_request_cpu_s=0.0, host_delay_median_s=0.02, host_delay_sigma=0.5)
    profile = tiny_profile(frontend_queue=queue.model_dump())
    fleet_rng = random.Random(7)
    first, second = (Engine(profile, EngineMetrics("sim"), rng=fleet_rng).fe_queue for _ in range(2))
    assert first is not None and second is not None
    draws = [(first.admit(i, float(i), 0, 1), second.admit(i, float(i), 0, 1)) for i in range(50)]
    assert sum(1 for a, b in draws if a != b) == 50
    # Still reproducible: the same fleet seed gives the same delays.
    again = Engine(profile, EngineMetrics("sim"), rng=random.Random(7)).fe_queue
    assert again is not None and again.admit(0, 0.0, 0, 1) == draws[0][0]
