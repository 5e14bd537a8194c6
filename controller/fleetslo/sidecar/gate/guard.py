"""Bounds on what clients can make the gate hold before a request is admitted, and a quiet log.

The public port is open to anyone who can reach the pod. Without bounds, slow clients exhaust it
(issue 15 defect 3: 300 connections that never finish their headers made real requests and the
sidecar's own ``/metrics`` time out; 40 slow 9 MiB uploads added 496 MB against a 512 Mi limit):

- headers: aiohttp closes a connection that has not sent a whole request within its keep-alive
  timeout, counted from when it connected (``Gate`` sets it to ``header_timeout``);
- bodies: ``BodyBudget`` caps the bodies being read or held (queued) at once, by count and by
  bytes; a request over either is answered 503 at once, and a body that does not arrive within
  ``body_timeout`` is answered 408;
- logs: ``ThrottledLog`` lets one line per kind through every ``interval`` seconds and says how
  many it held back, so a flood of bad requests cannot fill the disk.

Bookkeeping only: no sockets, no HTTP.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class BodyBudget:
    """Bodies in the gate's memory now (being read, or read and waiting for a slot)."""

    max_bodies: int
    max_bytes: int
    bodies: int = 0
    bytes: int = 0
    #: Requests refused because the budget was spent (``fleetslo_gate_rejected_total{reason="busy"}``).
    refused: int = 0

    def open(self) -> bool:
        """Take a place for one more body; False (and counted) when none is left."""
        if self.bodies >= self.max_bodies:
            self.refused += 1
            return False
        self.bodies += 1
        return True

    def grow(self, size: int) -> bool:
        """Account ``size`` more bytes of an open body; False when that would pass the byte cap."""
        if self.bytes + size > self.max_bytes:
            self.refused += 1
            return False
        self.bytes += size
        return True

    def close(self, size: int) -> None:
        """The body of ``size`` bytes was sent upstream or dropped."""
        self.bodies -= 1
        self.bytes -= size


class ThrottledLog(logging.Filter):
    """At most one record per ``key`` (logger and message template) per ``interval`` seconds."""

    def __init__(self, interval: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self.clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg)[:200])
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            record.msg = f"{record.msg} (and {held} more like it in the last {now - last:.0f}s)"  # type: ignore[operator]
        if len(self._last) > 1024:  # many distinct messages: forget the oldest kinds
            for old in sorted(self._last, key=self._last.__getitem__)[:512]:
                self._last.pop(old, None)
        return True


#: aiohttp's loggers that write a line (with a traceback) per bad request or broken connection.
NOISY_LOGGERS = ("aiohttp.server", "aiohttp.web", "aiohttp.access", "fleetslo.gate")


def throttle_noisy_loggers(interval: float = 10.0) -> ThrottledLog:
    """Install one ``ThrottledLog`` on every logger that clients can make write."""
    throttle = ThrottledLog(interval)
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ThrottledLog) for f in logger.filters):
            logger.addFilter(throttle)
    return throttle
