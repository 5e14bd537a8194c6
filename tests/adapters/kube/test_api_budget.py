"""A hung API server costs one reconcile a bounded amount of time (defect 15 of issue 15).

The server here accepts connections and never answers, as an API server behind a stuck load
balancer does. Before, the client retried a read time-out three times at 10 s each: one call took
40 s against a 60 s liveness limit. Now a call is made once, within what the reconcile's API
budget has left, and once the budget is spent no further call is even attempted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from fleetslo.control import deadline
from fleetslo.control.kube.client import REACHABILITY, client_for
from fleetslo.control.kube.workloads import Workloads
from fleetslo.core.errors import ApiUnavailable
from fleetslo.core.spec import Target
from fleetslo.testing import FakeClock

from tests.adapters.kube.kapi import HungServer

QWEN = Target(namespace="infer", name="qwen", model_name="qwen")


@pytest.fixture
def hung() -> Iterator[HungServer]:
    server = HungServer()
    yield server
    server.close()


def test_a_hung_api_server_gets_one_attempt_per_call_within_the_budget(hung: HungServer) -> None:
    api = client_for(hung.url)
    workloads = Workloads(api)
    with contextlib.closing(api), deadline.within(0.5, time.monotonic) as budget:
        with pytest.raises(ApiUnavailable):
            workloads.get(QWEN)
        assert hung.connections == 1  # no retries behind the loop's back
        with pytest.raises(deadline.DeadlineExceeded, match="API time is spent"):
            workloads.scale(QWEN, 3)
    assert hung.connections == 1  # the write was not even attempted
    assert budget.calls == 1 and budget.spent <= budget.seconds + 0.5
    assert REACHABILITY.reachable() is False


def test_outside_a_reconcile_a_call_keeps_its_own_timeout() -> None:
    with deadline.call_timeout(10.0, "read lease") as timeout:
        assert timeout == 10.0
    clock = FakeClock(0.0)
    with deadline.within(6.0, clock):
        with deadline.call_timeout(10.0, "read") as first:
            assert first == 6.0
            clock.advance(4.0)
        with deadline.call_timeout(10.0, "scale") as second:
            assert second == 2.0  # 4 s of the 6 s were spent in the first call


def test_a_fenced_write_must_end_while_the_lease_is_ours() -> None:
    clock = FakeClock(0.0)
    with deadline.within(20.0, clock), deadline.fenced(3.0):
        with deadline.call_timeout(10.0, "scale") as timeout:
            assert timeout == 3.0
            clock.advance(3.0)
        with pytest.raises(deadline.DeadlineExceeded), deadline.call_timeout(10.0, "mark"):
            pass
