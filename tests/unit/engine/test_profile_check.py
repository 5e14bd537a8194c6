"""The profile's open-loop check says which side of the model missed: vLLM's own p90 TTFT (from its
histogram) beside the simulator's on the engine's clock, and the client's beside the whole model's."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleetslo.cli.profile_check import _engine_means, poisson_arrivals, simulated_p90s
from fleetslo.engine.bench import read_counters

from tests.support import AFTER_LOAD, IDLE, capture

PROFILES = Path(__file__).resolve().parents[3] / "controller" / "fleetslo" / "sim" / "profiles"


def test_the_engines_p90_ttft_is_read_from_vllms_histogram_over_the_run() -> None:
    means = _engine_means(read_counters(capture(IDLE)), read_counters(capture(AFTER_LOAD)))
    p90, mean = means["engine_p90_ttft_s"], means["engine_mean_ttft_s"]
    assert p90 is not None and mean is not None and p90 > mean  # the 79 requests queued behind 8
    assert _engine_means({}, {})["engine_p90_ttft_s"] is None  # no page: missing, not 0


def test_the_engine_only_simulation_leaves_the_front_end_and_host_out() -> None:
    profile = str(PROFILES / "cpu-tiny-llama-vllm.yaml")
    arrivals = poisson_arrivals(2.0, 20.0, 64, 32, seed=1)
    whole, _ = simulated_p90s(profile, arrivals)
    engine, _ = simulated_p90s(profile, arrivals, engine_only=True)
    assert whole is not None and engine is not None
    assert engine < whole  # the API server's work and the host's delay come on top
    assert engine == pytest.approx(simulated_p90s(profile, arrivals, engine_only=True)[0])


def test_the_phases_the_hosts_delay_is_measured_in_use_fresh_connections() -> None:
    # Back-to-back requests on one keep-alive connection now and then wait ~130 ms more for the
    # first token: the phases of few clients, where the host's delay is read, must not reuse one.
    import argparse

    from fleetslo.cli.profile import plan_phases
    from fleetslo.sim.host_delay import HOST_DELAY_CLIENTS

    args = argparse.Namespace(output_tokens=32, sweep_prompt=64, requests=4)
    phases = plan_phases([1, 2, 4, 8], [16, 256], args)
    assert [p.name for p in phases] == ["c1", "c2", "c4", "c8", "p16", "p256"]
    assert (
        {p.name for p in phases if p.fresh_connections}
        == {p.name for p in phases if p.concurrency <= HOST_DELAY_CLIENTS}
        == {"c1", "c2", "p16", "p256"}
    )


async def _peer_ports(fresh: bool) -> list[int]:
    """The client ports a closed-loop phase of one client and three requests came from."""
    from aiohttp import web
    from fleetslo.engine.bench import Bench, Phase

    ports: list[int] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        ports.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for _ in range(2):
            await response.write(b'data: {"choices": [{"text": "x"}]}\n\n')
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        bench = Bench(f"http://127.0.0.1:{port}", "m", None)
        result = await bench.closed(Phase("c1", 1, 8, 2, 3, fresh_connections=fresh))
        assert [s.ok for s in result.shots] == [True] * 3
    finally:
        await runner.cleanup()
    return ports


def test_a_fresh_connections_phase_opens_one_connection_per_request() -> None:
    import asyncio

    assert len(set(asyncio.run(_peer_ports(fresh=True)))) == 3
    assert len(set(asyncio.run(_peer_ports(fresh=False)))) == 1  # keep-alive: one connection


def test_failed_requests_are_counted_by_their_reason() -> None:
    from fleetslo.cli.profile_check import client_p90s, failure_reasons
    from fleetslo.engine.client import Shot

    shots = [
        Shot(0.0, 16, 8, 0.1, 0.01, True),
        Shot(0.1, 16, 0, None, None, False, "ReadTimeout"),
        Shot(0.2, 16, 0, None, None, False, "ReadTimeout"),
        Shot(0.3, 16, 0, None, None, False, "The model does not exist"),
        Shot(0.4, 16, 0, None, None, False),
    ]
    assert failure_reasons(shots) == {"ReadTimeout": 2, "The model does not exist": 1, "no first token": 1}
    assert client_p90s(shots)[2] == sum(failure_reasons(shots).values())
    assert failure_reasons(shots[:1]) == {}
