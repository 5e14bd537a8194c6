"""Cross-cutting concerns as decorators around any actuator: ``DryRun*`` and ``Measured*``.

``DryRun*`` (advisory mode, ``mode: advisory`` or ``--dry-run``) passes reads through, logs each
write it would make as a structured line and returns ``dry_run=True`` without touching anything —
no ``if dry_run:`` anywhere else (Sloth's ``DryRunApiserverRepository``). ``Measured*`` records each
call's latency and, on failure, its error kind into the controller metrics, then re-raises
(Sloth's ``measurer``). Both implement the same protocols as what they wrap, so they stack:
``Measured(DryRun(real))`` measures the reads a dry run still makes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.ports import (
    ActuationResult,
    BatchLimitActuator,
    Drainer,
    ReplicaActuator,
    ScaleState,
)
from fleetslo.core.errors import FleetSLOError
from fleetslo.core.spec import Target

log = logging.getLogger("fleetslo.actuation")


class PodMarker(Protocol):
    """Marks drained pods as the first to remove (Deployments: ``pod-deletion-cost``), or unmarks them."""

    def mark(self, target: Target, names: Sequence[str]) -> None: ...

    def unmark(self, target: Target, names: Sequence[str]) -> None: ...


def _would(target: Target, action: str, message: str, **fields: object) -> ActuationResult:
    text = f"dry run: would {message}"
    log.info(text, extra={"fields": {"event": "dry_run", "action": action, "target": target.name,
                                     "namespace": target.namespace, **fields}})  # fmt: skip
    return ActuationResult(False, text, dry_run=True)


class DryRunReplicas:
    def __init__(self, inner: ReplicaActuator) -> None:
        self.inner = inner

    def read(self, target: Target) -> ScaleState:
        return self.inner.read(target)

    def scale(self, target: Target, replicas: int, *, expected: int | None = None) -> ActuationResult:
        return _would(target, "scale", f"scale {target.name} to {replicas} replicas", replicas=replicas)


class DryRunBatchLimit:
    def __init__(self, inner: BatchLimitActuator) -> None:
        self.inner = inner

    def read_limit(self, target: Target) -> int | None:
        return self.inner.read_limit(target)

    def set_limit(self, target: Target, limit: int) -> ActuationResult:
        return _would(
            target, "set_limit", f"set the batch limit of {target.name} to {limit}", batch_limit=limit
        )


class DryRunDrainer:
    """Pretends ``count`` pods were drained (placeholders: a dry run does not pick real pods)."""

    def drain(self, target: Target, count: int) -> list[str]:
        _would(target, "drain", f"drain {count} pod(s) of {target.name}", count=count)
        return [f"<pod {i + 1} of {count}>" for i in range(count)]

    def resume(self, target: Target, names: Sequence[str]) -> None:
        _would(target, "resume", f"resume {len(names)} pod(s) of {target.name}", count=len(names))

    def resume_orphans(self, target: Target) -> list[str]:
        _would(target, "resume_orphans", f"resume drains left by another controller on {target.name}")
        return []


class DryRunMarker:
    def mark(self, target: Target, names: Sequence[str]) -> None:
        _would(target, "mark", f"mark {len(names)} pod(s) of {target.name} for removal", count=len(names))

    def unmark(self, target: Target, names: Sequence[str]) -> None:
        _would(target, "unmark", f"unmark {len(names)} pod(s) of {target.name}", count=len(names))


class _Meter:
    """Times one call and counts its failure under the target's label."""

    def __init__(self, metrics: ControllerMetrics, label: str, clock: Callable[[], float]) -> None:
        self.metrics, self.label, self.clock = metrics, label, clock

    @contextmanager
    def __call__(self, operation: str) -> Iterator[None]:
        started = self.clock()
        try:
            yield
        except FleetSLOError as exc:
            self.metrics.actuation_errors.labels(self.label, exc.reason).inc()
            raise
        finally:
            self.metrics.actuation_duration.labels(operation).observe(max(0.0, self.clock() - started))


class MeasuredReplicas:
    def __init__(
        self, inner: ReplicaActuator, metrics: ControllerMetrics, label: str,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:  # fmt: skip
        self.inner, self._meter = inner, _Meter(metrics, label, clock)

    def read(self, target: Target) -> ScaleState:
        with self._meter("read"):
            return self.inner.read(target)

    def scale(self, target: Target, replicas: int, *, expected: int | None = None) -> ActuationResult:
        with self._meter("scale"):
            return self.inner.scale(target, replicas, expected=expected)


class MeasuredBatchLimit:
    def __init__(
        self, inner: BatchLimitActuator, metrics: ControllerMetrics, label: str,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:  # fmt: skip
        self.inner, self._meter = inner, _Meter(metrics, label, clock)

    def read_limit(self, target: Target) -> int | None:
        with self._meter("read_limit"):
            return self.inner.read_limit(target)

    def set_limit(self, target: Target, limit: int) -> ActuationResult:
        with self._meter("set_limit"):
            return self.inner.set_limit(target, limit)


class MeasuredDrainer:
    def __init__(
        self, inner: Drainer, metrics: ControllerMetrics, label: str,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:  # fmt: skip
        self.inner, self._meter = inner, _Meter(metrics, label, clock)

    def drain(self, target: Target, count: int) -> list[str]:
        with self._meter("drain"):
            return self.inner.drain(target, count)

    def resume(self, target: Target, names: Sequence[str]) -> None:
        with self._meter("resume"):
            self.inner.resume(target, names)

    def resume_orphans(self, target: Target) -> list[str]:
        with self._meter("resume_orphans"):
            return self.inner.resume_orphans(target)


class MeasuredMarker:
    def __init__(
        self, inner: PodMarker, metrics: ControllerMetrics, label: str,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:  # fmt: skip
        self.inner, self._meter = inner, _Meter(metrics, label, clock)

    def mark(self, target: Target, names: Sequence[str]) -> None:
        with self._meter("mark"):
            self.inner.mark(target, names)

    def unmark(self, target: Target, names: Sequence[str]) -> None:
        with self._meter("unmark"):
            self.inner.unmark(target, names)
