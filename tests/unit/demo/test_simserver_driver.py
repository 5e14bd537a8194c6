"""The real-time engine driver: same answers as the simulator on the same arrivals, tokens in order."""

from __future__ import annotations

import asyncio

import pytest
from fleetslo.sim.harness import make_engine, replay_open
from fleetslo.sim.server.clock import SpeedClock
from fleetslo.sim.server.driver import EngineDriver, Generation
from fleetslo.sim.vllm_metrics import EngineMetrics
from fleetslo.sim.workload import Request

from tests.unit.sim.sim_support import tiny_profile

#: 500 simulated seconds per wall second: a 10 ms engine step lasts 20 µs of wall time.
FAST = 500.0


def test_speed_clock_maps_both_ways() -> None:
    wall = [100.0]
    clock = SpeedClock(10.0, now=lambda: wall[0])
    wall[0] = 101.5
    assert clock.now() == pytest.approx(15.0)
    assert clock.wall_at(30.0) == pytest.approx(103.0)
    assert clock.wall_seconds(60.0) == pytest.approx(6.0)
    with pytest.raises(ValueError, match="speedup"):
        SpeedClock(0.0)


async def _finish(generation: Generation) -> None:
    while not generation.finished:
        await generation.changed.wait()
        generation.changed.clear()


@pytest.mark.asyncio
async def test_driver_matches_the_simulator_on_the_same_arrivals() -> None:
    profile = tiny_profile(max_num_seqs=8, kv_capacity_tokens=20_000)
    loop = asyncio.get_running_loop()
    driver = EngineDriver(profile, EngineMetrics("tiny"), SpeedClock(FAST, now=loop.time))
    sizes = [(1500, 40), (300, 200), (2500, 5), (800, 120), (50, 1), (4000, 60)] * 4
    generations = []
    for n_in, n_out in sizes:
        generations.append(driver.submit(n_in, n_out))
        await asyncio.sleep(0.0004)  # 0.2 simulated seconds apart: arrivals land mid-run
    await asyncio.wait_for(asyncio.gather(*(_finish(g) for g in generations)), 10)
    driver.close()
    # Replay the very arrivals the driver saw through the simulator's own harness.
    arrivals = [Request(g.req.arrival, g.req.input_tokens, g.req.output_tokens) for g in generations]
    engine = make_engine(profile)
    reference = replay_open(engine, arrivals)
    for live, ref in zip(generations, reference, strict=True):
        assert live.req.first_token == pytest.approx(ref.first_token, rel=1e-9)
        assert live.req.finish == pytest.approx(ref.finish, rel=1e-9)
    metrics = driver.engine.metrics
    assert metrics.ttft.counts == engine.metrics.ttft.counts
    assert metrics.generation_tokens == engine.metrics.generation_tokens
    assert metrics.success == len(sizes)


@pytest.mark.asyncio
async def test_tokens_are_released_in_order_up_to_max_tokens_and_counted_once() -> None:
    profile = tiny_profile()
    loop = asyncio.get_running_loop()
    finished: list[Generation] = []
    driver = EngineDriver(
        profile,
        EngineMetrics("tiny"),
        SpeedClock(50.0, now=loop.time),
        stream_interval=0.002,
        on_finish=finished.append,
    )
    generation = driver.submit(100, 300)  # ~3 simulated seconds of decode: ~60 ms of wall time
    seen = []
    while not generation.finished or generation.sent < 300:
        await asyncio.wait_for(generation.changed.wait(), 5)
        generation.changed.clear()
        produced = driver.produced(generation)
        assert produced >= generation.sent
        seen.append(produced)
        generation.sent = produced
    driver.close()
    assert seen[-1] == 300
    assert len(seen) > 3, "tokens should stream out in several releases, not all at the end"
    assert finished == [generation]
    assert driver.outstanding == 0


@pytest.mark.asyncio
async def test_metrics_refresh_brings_the_engine_to_the_present() -> None:
    profile = tiny_profile()
    loop = asyncio.get_running_loop()
    driver = EngineDriver(profile, EngineMetrics("tiny"), SpeedClock(FAST, now=loop.time))
    driver.submit(1000, 10_000)  # decoding for a long time
    await asyncio.sleep(0.01)
    metrics = driver.metrics()
    assert metrics.running == 1 and metrics.waiting == 0
    assert metrics.generation_tokens > 1
    assert metrics.kv_usage > 0
    driver.close()


@pytest.mark.asyncio
async def test_a_blocked_loop_shows_as_wake_up_lag() -> None:
    """The host check reads how late the engine's wake-ups run: a loop blocked for 50 ms (a busy
    host) shows as about that much lag, an idle one as next to none."""
    import time

    profile = tiny_profile(max_num_seqs=8, kv_capacity_tokens=20_000)
    loop = asyncio.get_running_loop()
    driver = EngineDriver(profile, EngineMetrics("tiny"), SpeedClock(10.0, now=loop.time))
    generation = driver.submit(500, 50)  # 50 decode steps: several wake-ups
    await asyncio.sleep(0)
    time.sleep(0.05)  # noqa: ASYNC251 -- blocking on purpose: the loop cannot run its timers
    await asyncio.wait_for(_finish(generation), 10)
    driver.close()
    late = [lag for _, lag in driver.lag]
    assert late and max(late) >= 0.04
