"""Admission control: at most ``limit`` requests in flight, a bounded FIFO queue behind them.

Pure asyncio bookkeeping with no sockets, so every rule is testable in microseconds:

- ``acquire()`` admits at once while fewer than ``limit`` requests are in flight and nobody is
  queued (arrivals never overtake the queue), queues otherwise, and raises ``Rejected`` when the
  queue is full, the wait exceeds the timeout, or the gate is draining.
- ``release()`` hands the freed slot straight to the oldest waiter.
- ``set_limit()`` takes effect at once: raising it admits waiters immediately; lowering it lets
  in-flight requests finish and admits nobody until the count is under the new limit.
- ``drain()`` stops new arrivals; requests already queued keep their place and are served (they
  were accepted by this replica, and failing them now would turn a slow answer into an error).

It must not know about HTTP: the proxy maps ``Rejected.reason`` to a status code.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

#: Reasons a request is turned away, as used in ``fleetslo_gate_rejected_total{reason}``.
QUEUE_FULL = "queue_full"
QUEUE_TIMEOUT = "queue_timeout"
DRAINING = "draining"


class Rejected(Exception):
    """The request was not admitted; ``reason`` is one of the constants above."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class AdmissionState:
    """A consistent reading of the gate's counters (the admin API and the collector use it)."""

    limit: int | None
    inflight: int
    queued: int
    max_queue: int
    draining: bool

    @property
    def drained(self) -> bool:
        """Draining, and nothing left in flight or waiting."""
        return self.draining and self.inflight == 0 and self.queued == 0


class Admission:
    """Counts requests in flight against a live limit; ``None`` means no limit."""

    def __init__(self, limit: int | None, max_queue: int) -> None:
        self._limit = limit
        self.max_queue = max_queue
        self.inflight = 0
        self.draining = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def limit(self) -> int | None:
        return self._limit

    @property
    def queued(self) -> int:
        return len(self._waiters)

    def state(self) -> AdmissionState:
        return AdmissionState(self._limit, self.inflight, self.queued, self.max_queue, self.draining)

    def _has_room(self) -> bool:
        return self._limit is None or self.inflight < self._limit

    async def acquire(self, max_wait: float) -> None:
        """Wait for a slot (FIFO), at most ``max_wait`` seconds; ``Rejected`` if none comes."""
        if self.draining:
            raise Rejected(DRAINING)
        if not self._waiters and self._has_room():
            self._take()
            return
        if len(self._waiters) >= self.max_queue:
            raise Rejected(QUEUE_FULL)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._idle.clear()
        timer = asyncio.get_running_loop().call_later(max_wait, self._expire, waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            self._abandon(waiter)
            raise
        finally:
            timer.cancel()

    def release(self) -> None:
        """A request left the upstream: give its slot to the oldest waiter, if any."""
        self.inflight -= 1
        self._grant()
        self._check_idle()

    def set_limit(self, limit: int | None) -> int | None:
        """Change the limit now; returns the previous one."""
        previous, self._limit = self._limit, limit
        self._grant()
        return previous

    def drain(self) -> None:
        """Stop admitting new arrivals; what is in flight or queued still completes."""
        self.draining = True

    def resume(self) -> None:
        """Admit again after a drain (the replica was not removed after all)."""
        self.draining = False

    async def wait_idle(self) -> None:
        """Return once nothing is in flight or queued."""
        await self._idle.wait()

    def _take(self) -> None:
        self.inflight += 1
        self._idle.clear()

    def _grant(self) -> None:
        while self._waiters and self._has_room():
            waiter = self._waiters.popleft()
            if waiter.done():
                # Its client hung up (the task's cancellation cancelled the future at once) or it
                # timed out, and its task has not run yet: the slot goes to the next waiter.
                continue
            # Set the result before the waiter's task runs: the slot is counted from this moment,
            # so a burst of releases never over-admits.
            waiter.set_result(None)
            self.inflight += 1

    def _expire(self, waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            self._waiters.remove(waiter)
            waiter.set_exception(Rejected(QUEUE_TIMEOUT))
            self._grant()  # work-conserving whatever order callbacks ran in
            self._check_idle()

    def _abandon(self, waiter: asyncio.Future[None]) -> None:
        """The waiting task was cancelled (its client went away)."""
        if waiter.cancelled() and waiter in self._waiters:
            self._waiters.remove(waiter)
            self._check_idle()
        elif waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            # Granted a slot in the same instant it was cancelled: hand the slot on.
            self.release()

    def _check_idle(self) -> None:
        if self.inflight == 0 and not self._waiters:
            self._idle.set()
