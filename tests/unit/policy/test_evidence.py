"""Every scale-down needs whole, fresh data; scale-ups and holds pass untouched."""

from __future__ import annotations

import pytest
from fleetslo.core.model import Decision, Observation, Reason, ReplicaCounts
from fleetslo.policy.evidence import guard_scale_down, scale_down_blocker

DOWN = Decision(replicas=3, batch_limit=None, reason=Reason.SCALE_DOWN_LOW_LOAD, message="load fell")


def obs(reporting: int = 8, age: float | None = 5.0, ready: int = 8) -> Observation:
    return Observation("t", 1000.0, 60.0, ReplicaCounts(ready), replicas_reporting=reporting, data_age=age)


@pytest.mark.parametrize(
    ("o", "reason"),
    [
        (obs(reporting=0, age=None), Reason.HOLD_NO_DATA),
        (obs(age=None), Reason.HOLD_NO_DATA),
        (obs(age=900.0), Reason.HOLD_STALE_DATA),
        (obs(reporting=1), Reason.HOLD_PARTIAL_DATA),
    ],
)
def test_a_scale_down_on_bad_data_holds_with_its_reason(o: Observation, reason: Reason) -> None:
    held = guard_scale_down(DOWN, o, current=8)
    assert held.replicas == 8 and held.reason == reason
    assert "scale-down to 3 waits" in held.message and "load fell" in held.message


def test_whole_fresh_data_lets_a_scale_down_through() -> None:
    assert scale_down_blocker(obs()) is None
    assert guard_scale_down(DOWN, obs(), current=8) is DOWN


def test_scale_ups_and_holds_pass_whatever_the_data() -> None:
    up = Decision(replicas=10, batch_limit=None, reason=Reason.SCALE_UP_QUEUE, message="queue")
    assert guard_scale_down(up, obs(reporting=1), current=8) is up
    same = Decision(replicas=8, batch_limit=None, reason=Reason.STEADY, message="")
    assert guard_scale_down(same, obs(reporting=0, age=None), current=8) is same
