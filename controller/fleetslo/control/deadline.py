"""How much API time one reconcile may still spend: a budget shared by every call it makes.

A hung API server used to cost 10 s per attempt and four attempts per call (urllib3's default
retries), so one tick could run past the liveness limit. Now each reconcile opens an
``ApiBudget`` (``within``) and every Kubernetes call made on that thread takes its timeout from
it (``call_timeout``): at most the per-call timeout, at most what the budget has left, and at
most until the write fence closes (``not_after``: the leader's lease stops being ours). Only the
time spent *inside* API calls counts, so a long drain between a read and the scale write does not
use the budget up. When nothing is left, the call is not made at all (``DeadlineExceeded``).

The budget travels in a ``ContextVar``: calls made outside a reconcile (the election thread,
Events) see no budget and get the plain per-call timeout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from fleetslo.core.errors import Transient

#: No call is started with less than this left: it could not finish, and would only add load.
MIN_CALL_TIMEOUT = 0.05


class DeadlineExceeded(Transient):
    """The reconcile's API time is spent (or the write fence closed): the call was not made."""

    reason = "deadline_exceeded"


class ApiBudget:
    """``seconds`` of API time, measured on ``clock``; ``not_after`` bounds it in absolute time."""

    def __init__(self, seconds: float, clock: Callable[[], float]) -> None:
        self.seconds, self.clock = seconds, clock
        self.spent = 0.0
        self.calls = 0
        self.not_after = math.inf

    def left(self) -> float:
        return min(self.seconds - self.spent, self.not_after - self.clock())

    @contextmanager
    def call(self, per_call: float, what: str) -> Iterator[float]:
        """One API call: yields its timeout, then counts the time it took against the budget."""
        timeout = min(per_call, self.left())
        if timeout < MIN_CALL_TIMEOUT:
            raise DeadlineExceeded(
                f"{what}: not attempted, the reconcile's API time is spent "
                f"({self.spent:.1f} s of {self.seconds:g} s in {self.calls} call(s))"
            )
        started = self.clock()
        self.calls += 1
        try:
            yield timeout
        finally:
            self.spent += max(0.0, self.clock() - started)


_current: ContextVar[ApiBudget | None] = ContextVar("fleetslo_api_budget", default=None)


@contextmanager
def within(seconds: float, clock: Callable[[], float]) -> Iterator[ApiBudget]:
    """Run a reconcile with ``seconds`` of API time; calls inside share it."""
    budget = ApiBudget(seconds, clock)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


@contextmanager
def fenced(valid_for: float) -> Iterator[None]:
    """Inside, no call may end later than ``valid_for`` seconds from now (the lease's remaining
    validity): a write that cannot finish while we still lead is not sent."""
    budget = _current.get()
    if budget is None:
        yield
        return
    previous = budget.not_after
    budget.not_after = min(previous, budget.clock() + valid_for)
    try:
        yield
    finally:
        budget.not_after = previous


@contextmanager
def call_timeout(per_call: float, what: str) -> Iterator[float]:
    """The timeout for one API call: ``per_call`` outside a reconcile, else bounded by its budget."""
    budget = _current.get()
    if budget is None:
        yield per_call
        return
    with budget.call(per_call, what) as timeout:
        yield timeout
