"""The backlog alone: requests held beyond what the arrival rate keeps there (Little's law)."""

from __future__ import annotations

import math

import pytest
from fleetslo.core.model import Observation, Quantiles, ReplicaCounts
from fleetslo.policy.fleetslo.backlog import backlog, stay_ratio, useful


def fleet(*, running: float | None = 200.0, waiting: float | None = 0.0, rate: float | None = 20.0,
          ready: int = 10, reporting: int = 10) -> Observation:  # fmt: skip
    return Observation(
        target="llm", at=0.0, window=60.0, replicas=ReplicaCounts(ready), batch_limit=None,
        replicas_reporting=reporting, data_age=1.0, ttft=Quantiles(), tpot=Quantiles(),
        request_rate=rate, running=running, waiting=waiting,
    )  # fmt: skip


def test_what_the_arrivals_keep_in_the_fleet_is_no_backlog() -> None:
    # 20/s staying 10 s: 200 held in the steady state.
    assert backlog(fleet(), 20.0, 10.0) == 0.0
    assert backlog(fleet(running=260.0), 20.0, 10.0) == pytest.approx(60.0)
    assert backlog(fleet(running=150.0, waiting=50.0), 20.0, 8.0) == pytest.approx(40.0)


def test_replicas_not_reporting_are_counted_as_holding_what_the_others_hold() -> None:
    assert backlog(fleet(running=200.0, reporting=5), 20.0, 10.0) == pytest.approx(200.0)


def test_without_a_steady_state_only_the_waiting_requests_are_a_backlog() -> None:
    assert backlog(fleet(running=900.0, waiting=30.0), 20.0, math.inf) == pytest.approx(30.0)
    assert backlog(fleet(running=900.0, waiting=None), 20.0, math.inf) == 0.0


def test_the_stay_ratio_is_what_the_fleet_held_over_what_the_model_said() -> None:
    first = stay_ratio(fleet(), 8.0, None)  # held 200 at 20/s: 10 s against 8 predicted
    assert first == pytest.approx(1.25)
    assert stay_ratio(fleet(), 10.0, first) == pytest.approx(0.1 * 1.0 + 0.9 * 1.25)


@pytest.mark.parametrize(
    "seen",
    [fleet(rate=None), fleet(rate=0.0), fleet(running=None, waiting=None)],
    ids=["no-rate", "idle", "no-gauge"],
)
def test_a_window_that_cannot_tell_keeps_the_ratio(seen: Observation) -> None:
    assert stay_ratio(seen, 8.0, 1.1) == 1.1
    assert stay_ratio(fleet(), math.inf, 1.1) == 1.1


def test_a_backlog_uses_no_more_replicas_than_the_arrivals_need_and_those_that_hold_it() -> None:
    """vLLM keeps a request on the replica that queued it: replicas added for a backlog only take
    the arrivals off the ones holding it, so past (arrivals' fleet + ready) they add nothing."""
    assert useful(40, 14, 1) == (15, 1)  # one replica holds the queue: 14 carry the arrivals
    assert useful(40, 14, 30) == (40, None)  # thirty may hold it: 40 is within 14 + 30
    assert useful(15, 14, 1) == (15, None)  # exactly the bound: not capped
