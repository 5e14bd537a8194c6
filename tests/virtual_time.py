"""Virtual time for asyncio tests that keep their real sockets (issue 18 §9).

``VirtualTimeLoop`` is a selector event loop whose ``time()`` only moves when the loop would
otherwise sleep: when nothing is ready, it gives real I/O a few milliseconds of real time to
arrive (loopback bytes are there at once; this only absorbs scheduling), then jumps straight to
the next timer. So ``sleep(30)``, a 2 s first-token delay, a queue timeout or aiohttp's keep-alive
timer take no real time, and what the test sees is ordered by the loop's clock alone: a test about
timing states its times in seconds that mean what they say, and never waits for them. Sockets,
aiohttp, the gate and the fake upstream stay real. The same idea as ``looptime`` (kopf's tests),
without a pytest plugin that also runs for every other test; it must not be used with threads
that the loop waits for (their work takes real time the clock does not see).

Use it with ``@pytest.mark.virtual_time`` under a directory whose ``conftest.py`` installs
``loop_factories`` (``pytest_asyncio_loop_factories``).
"""

from __future__ import annotations

import asyncio
import os
import selectors
from typing import Any

#: Real seconds to wait for I/O, a few times, before the clock jumps to the next timer.
_PATIENCE = (0.0005, 0.001, 0.002)
#: With no timer at all only I/O can wake the loop: wait for it for real, at most this long.
_NOTHING_SCHEDULED_WAIT = 30.0


class _FastForward:
    """Wraps the loop's selector: an idle select advances the loop's clock instead of sleeping."""

    def __init__(self, inner: selectors.BaseSelector, loop: VirtualTimeLoop) -> None:
        self.inner = inner
        self.loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = self.inner.select(0)
        if events or timeout == 0:
            return events
        for wait in _PATIENCE:
            events = self.inner.select(wait)
            if events:
                return events
        if timeout is None:
            return self.inner.select(_NOTHING_SCHEDULED_WAIT)
        self.loop.advance(timeout)
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a virtual clock that starts at 0 and jumps over idle time."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0
        self._selector = _FastForward(self._selector, self)  # type: ignore[has-type,assignment]

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        self._virtual_now += max(seconds, 0.0)


def loop_factories(item: Any) -> dict[str, Any]:
    """For ``pytest_asyncio_loop_factories``: a virtual clock for tests marked ``virtual_time``
    (``FLEETSLO_TESTS_REAL_TIME=1`` runs them on the real clock, to compare)."""
    if item.get_closest_marker("virtual_time") is not None and not os.environ.get("FLEETSLO_TESTS_REAL_TIME"):
        return {"virtual_time": VirtualTimeLoop}
    return {"real_time": asyncio.new_event_loop}
