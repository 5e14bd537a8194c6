"""``oracle``: replays a replica schedule planned offline by someone who knew the whole trace.

The plan comes from ``fleetslo.sim.oracle`` (cheapest schedule meeting the targets given the cold
start); this policy only looks up the planned count for ``now``. It is the lower bound on cost that
reactive policies are compared against, not something a cluster could run.

Pure: no I/O, no knowledge of the simulator beyond the schedule it is handed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from fleetslo.core.errors import ConfigError
from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec

#: ``(from_s, replicas)`` steps: from ``from_s`` on, ``replicas`` should be provisioned.
Schedule = Sequence[tuple[float, int]]


@dataclass(frozen=True, slots=True)
class OraclePolicy:
    """Provision exactly what the schedule says at each instant (before its first step: its first count)."""

    name = "oracle"
    interval = 15.0
    schedule: Schedule
    _times: tuple[float, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        steps = tuple((float(t), int(n)) for t, n in self.schedule)
        if not steps:
            raise ConfigError("oracle: the schedule is empty")
        if any(b[0] <= a[0] for a, b in pairwise(steps)):
            raise ConfigError("oracle: schedule times must be strictly increasing")
        if any(n < 0 for _, n in steps):
            raise ConfigError("oracle: scheduled replica counts must be >= 0")
        object.__setattr__(self, "schedule", steps)
        object.__setattr__(self, "_times", tuple(t for t, _ in steps))

    def planned(self, now: float) -> int:
        """The scheduled count at ``now``."""
        index = max(0, bisect_right(self._times, now) - 1)
        return self.schedule[index][1]

    def initial_state(self, spec: FleetSLOSpec) -> None:
        return None

    def decide(self, obs: Observation, state: None, spec: FleetSLOSpec, now: float) -> tuple[Decision, None]:
        count = self.planned(now)
        return Decision(count, obs.batch_limit, Reason.SCHEDULED, f"oracle: planned {count} replicas"), None
