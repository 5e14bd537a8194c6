"""Leader election on a Lease, with client-go's semantics, so only one controller actuates.

Each ``step()`` tries to acquire or renew (every ``retry_period``). A lease held by someone else
counts as expired once its record has not changed for ``lease_duration`` **as measured on our own
clock** since we first saw that record — never by comparing the holder's timestamps with ours, so
clock skew between nodes cannot cause two leaders. The leader renews every ``retry_period`` and
considers itself leader only while its last successful renewal is younger than ``renew_deadline``
(< ``lease_duration``): a leader cut off from the API steps down before anyone may take over.
``release()`` on shutdown hands the lease over at once (the follower's next step acquires it).

``fence()`` is what the loop calls immediately before every write: it refuses (``Deposed``) unless
our last renewal is younger than ``renew_deadline`` *and* the Lease read from the API right now
names us as holder, and returns how long our renewal stays valid, which bounds the write. So a
controller that lost the lease while it waited on a drain never writes the scale.

Time is injected (``clock``: monotonic seconds; ``wall``: epoch seconds for the record); the lock
is a protocol so the logic is tested without an API server and the real Lease is tested with kmock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from fleetslo.control.kube.lease import LeaseRecord
from fleetslo.control.ports import Deposed
from fleetslo.core.errors import FleetSLOError

log = logging.getLogger("fleetslo.leader")


class LeaseLock(Protocol):
    def describe(self) -> str: ...

    def get(self) -> tuple[LeaseRecord, str | None] | None: ...

    def create(self, record: LeaseRecord) -> None: ...

    def update(self, record: LeaseRecord, resource_version: str | None) -> None: ...


class LeaderElector:
    """Acquires and renews one lease for ``identity``; ``is_leader()`` is safe from any thread."""

    def __init__(
        self,
        lock: LeaseLock,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float],
        wall: Callable[[], float],
        on_change: Callable[[bool], None] = lambda _leading: None,
    ) -> None:
        self.lock, self.identity = lock, identity
        self.lease_duration, self.renew_deadline, self.retry_period = (
            lease_duration,
            renew_deadline,
            retry_period,
        )
        self.clock, self.wall, self.on_change = clock, wall, on_change
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # our last successful acquire/renew, on our clock
        self._leading = False
        self._mutex = threading.Lock()

    def is_leader(self) -> bool:
        with self._mutex:
            return self._holds(self.clock())

    def fence(self) -> float:
        """Seconds we still surely lead, confirmed against the Lease in the API; else ``Deposed``."""
        with self._mutex:
            checked = self.clock()
            if self._renewed_at is None or not self._holds(checked):
                raise Deposed(f"{self.identity} has not renewed {self.lock.describe()} within the deadline")
            left = self.renew_deadline - (checked - self._renewed_at)
        try:
            current = self.lock.get()
        except FleetSLOError as exc:
            raise Deposed(f"cannot confirm {self.lock.describe()}: {exc}") from exc
        holder = current[0].holder if current is not None else None
        if holder != self.identity:
            raise Deposed(f"{self.lock.describe()} is held by {holder or 'nobody'}, not {self.identity}")
        return left - (self.clock() - checked)

    def _holds(self, now: float) -> bool:
        return self._renewed_at is not None and now - self._renewed_at < self.renew_deadline

    def step(self) -> bool:
        """One attempt to acquire or renew; returns whether we lead afterwards."""
        now = self.clock()
        try:
            acquired = self._try(now)
        except FleetSLOError as exc:
            log.warning("%s: %s", self.lock.describe(), exc)
            acquired = False
        with self._mutex:
            if acquired:
                self._renewed_at = now
            leading = self._holds(self.clock())
        self._report(leading)
        return leading

    def _try(self, now: float) -> bool:
        current = self.lock.get()
        if current is None:
            self.lock.create(self._record(None))
            return True
        record, version = current
        if record != self._observed:
            self._observed, self._observed_at = record, now
        held_by_other = record.holder not in (None, self.identity)
        if held_by_other and now < self._observed_at + max(record.duration, 1.0):
            return False
        self.lock.update(self._record(record), version)
        return True

    def _record(self, previous: LeaseRecord | None) -> LeaseRecord:
        at = datetime.fromtimestamp(self.wall(), UTC)
        if previous is not None and previous.holder == self.identity:
            return LeaseRecord(
                self.identity, self.lease_duration, previous.acquired, at, previous.transitions
            )
        transitions = 0 if previous is None else previous.transitions + 1  # as client-go counts them
        return LeaseRecord(self.identity, self.lease_duration, at, at, transitions)

    def release(self) -> None:
        """Give the lease up (on shutdown) so a follower takes over at its next step."""
        with self._mutex:
            leading, self._renewed_at = self._holds(self.clock()), None
        if not leading:
            return
        try:
            current = self.lock.get()
            if current is not None and current[0].holder == self.identity:
                record = current[0]
                released = LeaseRecord(None, 1.0, record.acquired, record.renewed, record.transitions)
                self.lock.update(released, current[1])
        except FleetSLOError as exc:
            log.warning(
                "%s: release failed (a follower takes over when it expires): %s", self.lock.describe(), exc
            )
        self._report(False)

    def _report(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            log.info(
                "%s %s leadership of %s",
                self.identity,
                "acquired" if leading else "lost",
                self.lock.describe(),
            )
            self.on_change(leading)

    def run(self, stop: threading.Event) -> None:
        """Step every ``retry_period`` until ``stop`` is set, then release."""
        while not stop.is_set():
            self.step()
            stop.wait(self.retry_period)
        self.release()


class AlwaysLeader:
    """For a single controller without election (``leader_election.enabled: false``)."""

    def is_leader(self) -> bool:
        return True

    def fence(self) -> float:
        return float("inf")
