"""The one interface every scaling policy implements: observation in, decision out.

``fleetslo``'s own policy, the baselines it is compared with (HPA, KEDA, llm-d) and the offline
oracle all implement ``Policy``; the control loop, the simulator and the demo call nothing else.
A policy is pure: its state goes in and comes out, time is a parameter, and it never does I/O.

A policy that learns something worth keeping across a controller restart or a leader change also
implements ``Restorable``: ``learned`` gives it as a JSON-safe dict (the controller persists it),
``restore`` takes it back with the target's recent load history (read from the metrics store at
start). ``learned_of`` and ``restore`` below are how callers use it: for a policy without the hook
(the baselines, the oracle) they persist nothing and restore nothing, so those are unaffected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

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


@dataclass(frozen=True, slots=True)
class LoadSample:
    """The target's load over one step of its history: requests/s and tokens/s (prompt +
    generated) at Unix time ``at``; ``None`` where the metrics store had no value."""

    at: float
    requests: float | None
    tokens: float | None


@dataclass(frozen=True, slots=True)
class Carried:
    """What a (re)starting controller hands a policy for one target."""

    #: What ``learned`` gave before the restart, as persisted; ``None``: nothing was kept.
    learned: Mapping[str, Any] | None = None
    #: The target's load over the last days, oldest first (empty: none could be read).
    history: Sequence[LoadSample] = ()


@dataclass(frozen=True, slots=True)
class Restored:
    """What ``restore`` did, for the controller's log and the resource's status."""

    #: ``resumed`` (the persisted state is in use), ``prior`` (nothing was persisted) or
    #: ``discarded`` (a record was there but unusable: another version, another engine, corrupt).
    learned: str
    #: Why, in a few words (logged, and shown in the status when ``discarded``).
    why: str = ""
    #: How many history samples reached the policy's forecast.
    history_used: int = 0

    @property
    def degraded(self) -> bool:
        return self.learned == "discarded"


@runtime_checkable
class Restorable(Protocol[S]):
    """A policy whose learned state survives a restart (see the module docstring)."""

    def learned(self, state: S) -> Mapping[str, Any] | None:
        """The part of ``state`` worth persisting, JSON-safe; ``None``: nothing yet."""
        ...

    def history_step(self, state: S) -> float | None:
        """Seconds between two samples of the load history ``restore`` wants; ``None``: none."""
        ...

    def restore(self, state: S, spec: FleetSLOSpec, carried: Carried) -> tuple[S, Restored]:
        """``state`` (the initial one) with what was carried over; never raises on a bad record."""
        ...


def learned_of(policy: Policy[Any], state: Any) -> Mapping[str, Any] | None:
    """What ``policy`` would persist of ``state``; ``None`` for a policy without the hook."""
    return policy.learned(state) if isinstance(policy, Restorable) else None


def history_step(policy: Policy[Any], state: Any) -> float | None:
    """The step of the load history ``policy`` wants at start; ``None``: it wants none."""
    return policy.history_step(state) if isinstance(policy, Restorable) else None


def restore(policy: Policy[Any], state: S, spec: FleetSLOSpec, carried: Carried) -> tuple[S, Restored]:
    """``policy.restore`` where the policy has the hook; otherwise ``state`` unchanged."""
    if isinstance(policy, Restorable):
        out: tuple[S, Restored] = policy.restore(state, spec, carried)
        return out
    return state, Restored("prior", f"policy {policy.name} keeps no state across restarts")
