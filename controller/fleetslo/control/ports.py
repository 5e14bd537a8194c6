"""The control plane's ports: the protocols the loop observes through (``Source``) and acts through
(actuators, drainer, pod directory), and the value types they share.

A source turns metrics into an ``Observation``; it never decides anything. It reports missing, stale
or partial data in the observation (``None`` signals, ``data_age``, ``replicas_reporting``) and raises
``Transient`` only when it could not observe at all.

Actuators: how the control loop reads a target's state and applies a decision.

Replicas and the batch limit are separate knobs with separate mechanisms (the Kubernetes scale
subresource; the gate's admin API or an engine-args rollout), so they are separate protocols. A
``FleetActuator`` composes them and owns the order of operations (drain before scale-down). Wrappers
(``DryRun``, ``Measured``) implement the same protocols around a real one.

Errors are raised as ``fleetslo.core.errors`` types (transient or permanent), never library exceptions.

Writes are **fenced**: the ``FleetActuator`` calls a ``Fence`` immediately before every write
(batch limit, drain, mark, scale). It returns how many seconds we are sure to lead, or raises
``Deposed``; the write must finish within that time (``fleetslo.control.deadline.fenced``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from fleetslo.core.errors import Transient
from fleetslo.core.model import Observation, ReplicaCounts
from fleetslo.core.spec import FleetSLO, Target
from fleetslo.policy.base import LoadSample


class Deposed(Transient):
    """This controller cannot prove it still holds the lease: it must not write."""

    reason = "not_leader"


#: Called immediately before each write: seconds of leadership left, or raises ``Deposed``.
Fence = Callable[[], float]


def unfenced() -> float:
    """The fence of a controller without election (or a test): always leading."""
    return float("inf")


@dataclass(frozen=True, slots=True)
class ScaleState:
    """What the platform says about a target's replicas right now."""

    desired: int
    counts: ReplicaCounts


@dataclass(frozen=True, slots=True)
class ActuationResult:
    """What an actuator did: ``changed`` False when there was nothing to do (or dry-run)."""

    changed: bool
    message: str
    dry_run: bool = False


class ReplicaActuator(Protocol):
    """Reads and sets a target's replica count."""

    def read(self, target: Target) -> ScaleState: ...

    def scale(self, target: Target, replicas: int, *, expected: int | None = None) -> ActuationResult:
        """Set the desired count to ``replicas``. ``expected``: the desired count the decision was
        planned against; if the target's count is no longer that, raise ``Conflict`` unwritten."""
        ...


class BatchLimitActuator(Protocol):
    """Reads and sets the per-replica concurrent-sequence limit of a target."""

    def read_limit(self, target: Target) -> int | None: ...

    def set_limit(self, target: Target, limit: int) -> ActuationResult: ...


class Drainer(Protocol):
    """Prepares replicas for removal so no in-flight request is lost.

    ``drain(target, count)`` picks ``count`` of the target's ready replicas — the ones the workload
    controller will remove: the highest ordinals of a StatefulSet or LeaderWorkerSet, the least busy
    pods of a Deployment — stops admission on them, waits (bounded) for their in-flight requests
    to finish and returns the names of the pods that are drained (possibly fewer than ``count``).
    The ``FleetActuator`` then marks them for removal (for a Deployment: the
    ``controller.kubernetes.io/pod-deletion-cost`` annotation) and scales down by that many.
    ``resume(target, names)`` admits again on drained pods that are kept after all (the scale-down
    failed, or the decision changed). ``resume_orphans(target)`` admits again on pods a controller
    drained and then left (killed, deposed): drains it owns on pods that are not terminating; a
    new leader calls it once per target, and returns the names it resumed.
    """

    def drain(self, target: Target, count: int) -> list[str]: ...

    def resume(self, target: Target, names: Sequence[str]) -> None: ...

    def resume_orphans(self, target: Target) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class PodEndpoint:
    """One pod of a target as the platform sees it: where to reach its sidecar and gate."""

    name: str
    ip: str
    ready: bool
    #: Being deleted (``deletionTimestamp`` set): on its way out, whatever its gate says.
    terminating: bool = False


class PodDirectory(Protocol):
    """Lists a target's pods (the direct source scrapes them; the gate actuator talks to them)."""

    def pods(self, target: Target) -> list[PodEndpoint]: ...


class Source(Protocol):
    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        """The observation of ``slo``'s target over its objectives' window, as of ``now``."""
        ...


@runtime_checkable
class HistorySource(Protocol):
    """A source that can also read a target's past load (a metrics store: Prometheus keeps days)."""

    def load_history(self, slo: FleetSLO, now: float, *, days: float, step: float) -> list[LoadSample]:
        """The target's request and token rates over the ``days`` before ``now``, one sample per
        ``step`` seconds, oldest first; an empty list when the store holds none. Raises
        ``Transient`` when the store cannot be asked now."""
        ...
