"""The demo router: least outstanding requests, the longest-unchanged replica on a tie, waiting for one."""

from __future__ import annotations

import asyncio

import pytest
from fleetslo.sim.demo.router import Router


def fleet(*names: str) -> list[tuple[str, str]]:
    return [(n, f"http://{n}") for n in names]


@pytest.mark.asyncio
async def test_requests_go_to_the_replica_with_the_fewest_outstanding() -> None:
    router = Router(lambda: fleet("a", "b", "c"))
    picks = [(await router.acquire())[0] for _ in range(6)]
    assert sorted(picks) == ["a", "a", "b", "b", "c", "c"]
    router.release("b")
    router.release("b")
    assert (await router.acquire())[0] == "b"
    assert router.in_flight() == 5


@pytest.mark.asyncio
async def test_a_tie_goes_to_the_replica_whose_count_changed_longest_ago() -> None:
    router = Router(lambda: fleet("a", "b"))
    first = (await router.acquire())[0]
    second = (await router.acquire())[0]
    router.release(first)
    router.release(second)
    assert (await router.acquire())[0] == first


@pytest.mark.asyncio
async def test_avoid_skips_a_replica_unless_it_is_the_only_one() -> None:
    router = Router(lambda: fleet("a", "b"))
    assert (await router.acquire(avoid={"a"}))[0] == "b"
    alone = Router(lambda: fleet("a"))
    assert (await alone.acquire(avoid={"a"}))[0] == "a"


@pytest.mark.asyncio
async def test_with_no_replica_serving_requests_wait_at_the_router() -> None:
    serving: list[tuple[str, str]] = []
    router = Router(lambda: list(serving), poll=0.001)
    waiting = asyncio.create_task(router.acquire())
    await asyncio.sleep(0.01)
    assert router.waiting == 1 and not waiting.done()
    serving.extend(fleet("late"))
    assert (await asyncio.wait_for(waiting, 1))[0] == "late"
    assert router.waiting == 0
