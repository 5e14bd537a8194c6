"""The in-memory cluster the controller's fault suite runs against (``benchmarks.faults.control``).

One workload (desired count, resourceVersion), a Lease with compare-and-swap, drained pods, and
faults injected per API call. The cluster itself counts what must never happen: scale writes by a
controller that does not hold the Lease, writes with no plan to check against, pods removed
without a drain. Every API call goes through the reconcile's API budget, as the real client does.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fleetslo.control import deadline
from fleetslo.control.kube.lease import LeaseRecord
from fleetslo.control.ports import ActuationResult, ScaleState
from fleetslo.core.errors import ApiUnavailable, Conflict, RateLimited
from fleetslo.core.model import ReplicaCounts
from fleetslo.core.spec import Target
from fleetslo.testing import FakeClock

#: Seconds one API call waits before a hung server counts as a time-out (``kube.client``).
CALL_TIMEOUT = 10.0
API_BUDGET = 20.0


@dataclass
class ApiFaults:
    """Chances per API call; ``hung`` calls take the whole per-call timeout, then fail."""

    conflict: float = 0.0
    rate_limited: float = 0.0
    unavailable: float = 0.0
    hung: float = 0.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def inject(self, what: str, clock: FakeClock, timeout: float) -> None:
        roll = self.rng.random()
        for chance, error in ((self.conflict, Conflict), (self.rate_limited, RateLimited),
                              (self.unavailable, ApiUnavailable)):  # fmt: skip
            if roll < chance:
                raise error(f"injected: {what}")
            roll -= chance
        if roll < self.hung:
            clock.advance(timeout)
            raise ApiUnavailable(f"injected: {what} timed out after {timeout:g} s")


@dataclass
class Cluster:
    desired: int
    clock: FakeClock
    faults: ApiFaults = field(default_factory=ApiFaults)
    version: int = 1
    lease: tuple[LeaseRecord, int] | None = None
    drained: set[str] = field(default_factory=set)
    drains_in_force: set[str] = field(default_factory=set)
    serial: int = 0
    # what must never happen
    non_leader_writes: int = 0
    stale_writes: int = 0
    undrained_removals: int = 0
    writes: list[tuple[float, str, int, int]] = field(default_factory=list)

    def call(self, what: str) -> None:
        """One API call: it may fail as injected; it costs the reconcile's API time."""
        with deadline.call_timeout(CALL_TIMEOUT, what) as timeout:
            self.faults.inject(what, self.clock, timeout)

    def holder(self) -> str | None:
        return self.lease[0].holder if self.lease else None


class ClusterReplicas:
    """The scale subresource of the cluster's workload, as controller ``who`` reaches it."""

    def __init__(self, cluster: Cluster, who: str) -> None:
        self.cluster, self.who = cluster, who

    def read(self, target: Target) -> ScaleState:
        self.cluster.call("read")
        d = self.cluster.desired
        return ScaleState(d, ReplicaCounts(ready=d))

    def scale(self, target: Target, replicas: int, *, expected: int | None = None) -> ActuationResult:
        c = self.cluster
        c.call("scale")
        if expected is not None and c.desired != expected:
            raise Conflict(f"scaled from {expected} to {c.desired} meanwhile")
        if c.desired == replicas:
            return ActuationResult(False, "already there")
        if c.holder() != self.who:
            c.non_leader_writes += 1
        if expected is None:
            c.stale_writes += 1  # a write with no plan to check against
        if replicas < c.desired:
            c.undrained_removals += max(0, (c.desired - replicas) - len(c.drained))
        c.writes.append((c.clock(), self.who, c.desired, replicas))
        c.desired, c.version = replicas, c.version + 1
        c.drains_in_force -= c.drained
        c.drained.clear()
        return ActuationResult(True, f"scaled to {replicas}")


class ClusterDrainer:
    """Drains pods; ``during`` runs while a drain waits (the world moving on meanwhile)."""

    def __init__(self, cluster: Cluster, during: Callable[[], None] = lambda: None) -> None:
        self.cluster, self.during = cluster, during

    def drain(self, target: Target, count: int) -> list[str]:
        names = []
        for _ in range(count):
            self.cluster.serial += 1
            names.append(f"pod-{self.cluster.serial}")
        self.cluster.drained |= set(names)
        self.cluster.drains_in_force |= set(names)
        self.during()
        return names

    def resume(self, target: Target, names: Sequence[str]) -> None:
        self.cluster.drained -= set(names)
        self.cluster.drains_in_force -= set(names)

    def resume_orphans(self, target: Target) -> list[str]:
        orphans = sorted(self.cluster.drains_in_force)
        self.resume(target, orphans)
        return orphans


class ClusterLease:
    """The Lease with compare-and-swap; ``partitioned`` makes this controller's calls fail."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.partitioned = False

    def describe(self) -> str:
        return "lease fleetslo/fleetslo-controller"

    def _reach(self) -> None:
        if self.partitioned:
            raise ApiUnavailable("partitioned from the API server")

    def get(self) -> tuple[LeaseRecord, str | None] | None:
        self._reach()
        lease = self.cluster.lease
        return None if lease is None else (lease[0], str(lease[1]))

    def create(self, record: LeaseRecord) -> None:
        self._reach()
        if self.cluster.lease is not None:
            raise Conflict("exists")
        self.cluster.lease = (record, 1)

    def update(self, record: LeaseRecord, resource_version: str | None) -> None:
        self._reach()
        lease = self.cluster.lease
        if lease is None or (resource_version is not None and resource_version != str(lease[1])):
            raise Conflict("resourceVersion")
        self.cluster.lease = (record, lease[1] + 1)
