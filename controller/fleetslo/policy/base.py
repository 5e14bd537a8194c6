"""The one interface every scaling policy implements: observation in, decision out.

``fleetslo``'s own policy, the baselines it is compared with (HPA, KEDA, llm-d) and the offline
oracle all implement ``Policy``; the control loop, the simulator and the demo call nothing else.
A policy is pure: its state goes in and comes out, time is a parameter, and it never does I/O.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from fleetslo.core.model import Decision, Observation
from fleetslo.core.spec import FleetSLOSpec

S = TypeVar("S")


class Policy(Protocol[S]):
    """A scaling policy. ``name`` is how users select it (``--policy NAME``); ``interval`` is the
    number of seconds between two decisions (HPA syncs every 15 s, KEDA polls every 15 s, …)."""

    name: str
    interval: float

    def initial_state(self, spec: FleetSLOSpec) -> S:
        """The state before the first observation."""
        ...

    def decide(self, obs: Observation, state: S, spec: FleetSLOSpec, now: float) -> tuple[Decision, S]:
        """The decision for this observation, and the state to pass to the next call."""
        ...
