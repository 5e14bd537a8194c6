"""The ``FleetActuator``: one target's knobs together, and the order in which they move.

It reads the target's state (replicas, batch limit) and applies a ``Decision``:

* the batch limit first — it acts in seconds, replicas in minutes;
* scale-up: one scale write;
* scale-down: replicas that are still starting go first (the ReplicaSet removes not-ready pods
  before ready ones), and only the rest are **drained** (admission stopped, in-flight requests
  finished), **marked** for removal (``pod-deletion-cost`` on a Deployment), and then removed by
  one scale write. If fewer were drained than asked, the scale-down shrinks to what was drained:
  a request in flight is never cut. If the write fails, the drained pods are resumed and unmarked;
* nothing is written when the decision equals the current state;
* every write is **fenced**: ``fence()`` runs immediately before it (a drain can take a minute, and
  the lease can be lost meanwhile), and the write must finish while the lease is still ours. A
  deposed controller resumes what it drained and writes nothing more;
* the scale write is planned against ``state.scale.desired``: if the target was scaled since the
  read, the write is refused (``Conflict``), drained pods are resumed, and the loop re-plans.

The two knobs are attempted independently; if both fail the permanent error wins (it needs a
person). Which actuators are real, dry-run or measured is decided by whoever builds this object.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from fleetslo.control import deadline
from fleetslo.control.actuators.wrappers import PodMarker
from fleetslo.control.ports import (
    ActuationResult,
    BatchLimitActuator,
    Deposed,
    Drainer,
    Fence,
    ReplicaActuator,
    ScaleState,
    unfenced,
)
from fleetslo.core.errors import FleetSLOError, Permanent
from fleetslo.core.model import Decision
from fleetslo.core.spec import Target

log = logging.getLogger("fleetslo.actuation")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FleetState:
    """What the target looks like before a decision is applied."""

    scale: ScaleState
    batch_limit: int | None


@dataclass(frozen=True, slots=True)
class FleetOutcome:
    """What applying a decision did to each knob (``None``: the knob was not touched)."""

    replicas: ActuationResult | None = None
    batch_limit: ActuationResult | None = None
    drained: tuple[str, ...] = ()
    #: The replica count actually written (may be above the decision after a short drain).
    replicas_written: int | None = None

    @property
    def changed(self) -> bool:
        return any(r is not None and r.changed for r in (self.replicas, self.batch_limit))

    @property
    def dry_run(self) -> bool:
        return any(r is not None and r.dry_run for r in (self.replicas, self.batch_limit))

    @property
    def messages(self) -> list[str]:
        return [r.message for r in (self.batch_limit, self.replicas) if r is not None]


class FleetActuator:
    """Applies decisions to one target through its replica, batch-limit, drain and marking actuators."""

    def __init__(
        self,
        replicas: ReplicaActuator,
        batch: BatchLimitActuator | None = None,
        drainer: Drainer | None = None,
        marker: PodMarker | None = None,
    ) -> None:
        self.replicas, self.batch, self.drainer, self.marker = replicas, batch, drainer, marker

    def read(self, target: Target) -> FleetState:
        limit = self.batch.read_limit(target) if self.batch is not None else None
        return FleetState(self.replicas.read(target), limit)

    def resume_orphans(self, target: Target) -> list[str]:
        """Resume drains a previous controller left on the target's pods (none without a drainer)."""
        return self.drainer.resume_orphans(target) if self.drainer is not None else []

    def apply(
        self, target: Target, decision: Decision, state: FleetState, fence: Fence = unfenced
    ) -> FleetOutcome:
        errors: list[FleetSLOError] = []
        limit_result = None
        try:
            limit_result = self._limit(target, decision, state, fence)
        except FleetSLOError as exc:
            errors.append(exc)
        try:
            outcome = self._replicas(target, decision.replicas, state.scale, fence)
        except FleetSLOError as exc:
            errors.append(exc)
            outcome = FleetOutcome()
        if errors:
            raise _worst(errors)
        return FleetOutcome(outcome.replicas, limit_result, outcome.drained, outcome.replicas_written)

    def _limit(
        self, target: Target, decision: Decision, state: FleetState, fence: Fence
    ) -> ActuationResult | None:
        if self.batch is None or decision.batch_limit is None or decision.batch_limit == state.batch_limit:
            return None
        limit, batch = decision.batch_limit, self.batch
        return _fenced(fence, lambda: batch.set_limit(target, limit))

    def _replicas(self, target: Target, wanted: int, scale: ScaleState, fence: Fence) -> FleetOutcome:
        if wanted == scale.desired:
            return FleetOutcome()
        if wanted > scale.desired or self.drainer is None:
            result = _fenced(fence, lambda: self.replicas.scale(target, wanted, expected=scale.desired))
            return FleetOutcome(result, replicas_written=wanted)
        return self._scale_down(target, wanted, scale, fence)

    def _scale_down(self, target: Target, wanted: int, scale: ScaleState, fence: Fence) -> FleetOutcome:
        drainer = self.drainer
        assert drainer is not None
        remove = scale.desired - wanted
        not_ready = min(remove, scale.counts.starting)  # removed first by the workload controller
        drained: list[str] = []
        if remove > not_ready:
            drained = _fenced(fence, lambda: drainer.drain(target, remove - not_ready))
        new = scale.desired - not_ready - len(drained)
        if new == scale.desired:
            return FleetOutcome(
                ActuationResult(False, f"scale-down of {target.name} waits: no replica drained yet")
            )
        try:
            # Fenced again: the drain may have taken a minute, and the lease may be gone by now.
            if drained and self.marker is not None:
                marker = self.marker
                _fenced(fence, lambda: marker.mark(target, drained))
            result = _fenced(fence, lambda: self.replicas.scale(target, new, expected=scale.desired))
        except FleetSLOError:
            self._undo(target, drained)
            raise
        return FleetOutcome(result, drained=tuple(drained), replicas_written=new)

    def _undo(self, target: Target, drained: list[str]) -> None:
        """Put drained pods back in service after a failed scale-down (best effort: logged)."""
        if not drained:
            return
        assert self.drainer is not None
        try:
            if self.marker is not None:
                self.marker.unmark(target, drained)
            self.drainer.resume(target, drained)
        except FleetSLOError as exc:
            log.warning("could not resume drained pods %s of %s: %s", drained, target.name, exc)


def _fenced(fence: Fence, write: Callable[[], T]) -> T:
    """``write``, only if we still lead, and bounded to end while we do."""
    valid_for = fence()
    with deadline.fenced(valid_for):
        return write()


def _worst(errors: list[FleetSLOError]) -> FleetSLOError:
    """Deposed first (nothing more may happen), then a permanent error (it needs a person)."""
    return max(errors, key=lambda e: (isinstance(e, Deposed), isinstance(e, Permanent)))
