"""Admission without sockets: the limit, FIFO order, the queue bound and timeout, limit changes, drain."""

from __future__ import annotations

import asyncio

import pytest
from fleetslo.sidecar.gate.admission import DRAINING, QUEUE_FULL, QUEUE_TIMEOUT, Admission, Rejected
from hypothesis import given, settings
from hypothesis import strategies as st


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_requests_under_the_limit_are_admitted_at_once() -> None:
    a = Admission(limit=2, max_queue=10)
    await a.acquire(1.0)
    await a.acquire(1.0)
    assert (a.inflight, a.queued) == (2, 0)


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_waiters_are_admitted_in_arrival_order_as_slots_free_up() -> None:
    a = Admission(limit=1, max_queue=10)
    await a.acquire(1.0)
    order: list[int] = []

    async def wait(i: int) -> None:
        await a.acquire(5.0)
        order.append(i)

    tasks = [asyncio.create_task(wait(i)) for i in range(3)]
    await settle()
    assert a.queued == 3
    for _ in range(3):
        a.release()
        await settle()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2]
    assert a.inflight == 1


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_new_arrival_does_not_overtake_the_queue_when_a_slot_frees() -> None:
    a = Admission(limit=1, max_queue=10)
    await a.acquire(1.0)
    waiter = asyncio.create_task(a.acquire(5.0))
    await settle()
    a.release()  # the slot goes to the waiter, not to whoever calls acquire next
    late = asyncio.create_task(a.acquire(5.0))
    await settle()
    assert waiter.done() and not late.done()
    late.cancel()


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_full_queue_rejects_at_once() -> None:
    a = Admission(limit=1, max_queue=1)
    await a.acquire(1.0)
    queued = asyncio.create_task(a.acquire(5.0))
    await settle()
    with pytest.raises(Rejected) as rejected:
        await a.acquire(5.0)
    assert rejected.value.reason == QUEUE_FULL
    queued.cancel()


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_max_queue_zero_rejects_as_soon_as_the_limit_is_reached() -> None:
    a = Admission(limit=1, max_queue=0)
    await a.acquire(1.0)
    with pytest.raises(Rejected, match=QUEUE_FULL):
        await a.acquire(1.0)


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_waiter_past_its_timeout_is_rejected_and_leaves_the_queue() -> None:
    a = Admission(limit=1, max_queue=5)
    await a.acquire(1.0)
    with pytest.raises(Rejected) as rejected:
        await a.acquire(0.01)
    assert rejected.value.reason == QUEUE_TIMEOUT
    assert a.queued == 0


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_raising_the_limit_admits_waiters_immediately() -> None:
    a = Admission(limit=1, max_queue=10)
    await a.acquire(1.0)
    tasks = [asyncio.create_task(a.acquire(5.0)) for _ in range(3)]
    await settle()
    assert a.set_limit(3) == 1
    assert (a.inflight, a.queued) == (3, 1)
    await settle()
    assert sum(t.done() for t in tasks) == 2
    a.set_limit(None)  # no limit at all
    await asyncio.gather(*tasks)
    assert a.inflight == 4


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_lowering_the_limit_admits_nobody_until_in_flight_falls_under_it() -> None:
    a = Admission(limit=3, max_queue=10)
    for _ in range(3):
        await a.acquire(1.0)
    a.set_limit(1)
    waiter = asyncio.create_task(a.acquire(5.0))
    a.release()
    a.release()
    await settle()
    assert not waiter.done() and a.inflight == 1
    a.release()
    await settle()
    assert waiter.done() and a.inflight == 1


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_cancelled_waiter_leaves_the_queue_and_a_granted_then_cancelled_one_frees_its_slot() -> None:
    a = Admission(limit=1, max_queue=10)
    await a.acquire(1.0)
    first = asyncio.create_task(a.acquire(5.0))
    second = asyncio.create_task(a.acquire(5.0))
    await settle()
    second.cancel()
    await settle()
    assert a.queued == 1
    a.release()  # grants `first` ...
    first.cancel()  # ... which is cancelled before it runs: the slot must not leak
    await settle()
    assert (a.inflight, a.queued) == (0, 0)


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_drain_refuses_arrivals_serves_the_queue_and_reports_idle() -> None:
    a = Admission(limit=1, max_queue=10)
    await a.acquire(1.0)
    queued = asyncio.create_task(a.acquire(5.0))
    await settle()
    a.drain()
    with pytest.raises(Rejected, match=DRAINING):
        await a.acquire(1.0)
    assert not a.state().drained
    idle = asyncio.create_task(a.wait_idle())
    a.release()
    await queued
    assert not idle.done()
    a.release()
    await asyncio.wait_for(idle, 1.0)
    assert a.state().drained
    a.resume()
    await a.acquire(1.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["arrive", "leave", "limit", "hang_up"]), st.integers(1, 4)), max_size=40
    )
)
def test_in_flight_never_exceeds_the_limit_whatever_happens(steps: list[tuple[str, int]]) -> None:
    async def scenario() -> None:
        a = Admission(limit=2, max_queue=100)
        holders: list[asyncio.Task[None]] = []
        released = 0
        for op, n in steps:
            if op == "arrive":
                holders.append(asyncio.create_task(a.acquire(10.0)))
            elif op == "leave" and a.inflight > 0:
                a.release()
                released += 1
            elif op == "limit":
                a.set_limit(n)
            elif op == "hang_up":
                # The n-th pending client hangs up and a slot frees before its task runs.
                pending = [t for t in holders if not t.done()]
                if pending:
                    pending[min(n, len(pending)) - 1].cancel()
                if a.inflight > 0:
                    a.release()
                    released += 1
            await settle()
            assert a.limit is None or a.inflight <= max(a.limit, _admitted_before_lowering(steps))
            assert a.queued == sum(not t.done() for t in holders)
            admitted = sum(t.done() and not t.cancelled() and t.exception() is None for t in holders)
            assert a.inflight == admitted - released  # no slot leaks, none is handed to nobody
            if a.limit is None or a.inflight < a.limit:
                assert a.queued == 0  # work-conserving: nobody waits while a slot is free
        for t in holders:
            t.cancel()

    asyncio.run(scenario())


def _admitted_before_lowering(steps: list[tuple[str, int]]) -> int:
    # Lowering the limit never evicts: in flight may stay above a lowered limit until requests
    # leave, but never above the highest limit that was in force.
    return max([2] + [n for op, n in steps if op == "limit"])


@pytest.mark.asyncio
@pytest.mark.virtual_time
async def test_a_slot_freed_while_the_oldest_waiter_is_being_cancelled_goes_to_the_next_one() -> None:
    # Issue 15 defect 1: the oldest waiter's client hung up (its task is cancelled, so its future
    # is cancelled at once) and a slot frees before that task runs. Handing the slot to the
    # cancelled future raised InvalidStateError, the slot went to nobody, and every later
    # arrival queued behind a gate with nothing in flight.
    a = Admission(limit=1, max_queue=100)
    await a.acquire(1.0)
    gone = asyncio.create_task(a.acquire(5.0))
    await settle()
    later = [asyncio.create_task(a.acquire(5.0)) for _ in range(40)]
    await settle()
    gone.cancel()
    a.release()  # before `gone` has run its cancellation
    await settle()
    assert gone.cancelled()
    assert sum(t.done() for t in later) == 1
    assert (a.inflight, a.queued) == (1, 39)
    for _ in range(39):
        a.release()
        await settle()
    assert all(t.done() and t.exception() is None for t in later)
    assert (a.inflight, a.queued) == (1, 0)
