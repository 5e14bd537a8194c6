"""The body budget and the log throttle, without sockets."""

from __future__ import annotations

import logging

from fleetslo.sidecar.gate.guard import BodyBudget, ThrottledLog


def test_the_budget_refuses_past_its_count_and_its_bytes_and_gives_back_on_close() -> None:
    budget = BodyBudget(max_bodies=2, max_bytes=100)
    assert budget.open() and budget.open()
    assert not budget.open() and budget.refused == 1
    assert budget.grow(60) and not budget.grow(41) and budget.refused == 2
    budget.close(60)
    budget.close(0)
    assert (budget.bodies, budget.bytes) == (0, 0)
    assert budget.open() and budget.grow(100)


def test_the_throttle_lets_one_line_per_kind_through_per_interval_and_says_how_many_it_held() -> None:
    now = [0.0]
    throttle = ThrottledLog(interval=10.0, clock=lambda: now[0])

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, msg, None, None)

    assert throttle.filter(record("Error handling request"))
    assert not any(throttle.filter(record("Error handling request")) for _ in range(99))
    assert throttle.filter(record("another kind"))
    now[0] = 10.0
    again = record("Error handling request")
    assert throttle.filter(again)
    assert "and 99 more like it" in again.getMessage()
