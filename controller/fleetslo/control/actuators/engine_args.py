"""``BatchLimitActuator`` that rolls out ``--max-num-seqs`` in the pod template (engine args).

A rollout restarts every replica (each restart is a cold start), so a change is applied only when
it lasts: the policy must have wanted a limit on the same side of the current one for ``lasting``
seconds, the change must be at least ``min_change`` of the current value, and at most one rollout
per target happens in ``min_interval``. Nothing is written when the limit is unchanged. While a
change waits, ``set_limit`` returns ``changed=False`` with a message saying why, which the audit
log shows; that is an outcome, not an error.

The clock is injected; the waiting state is per target and lives only in this object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fleetslo.control.kube import rollout
from fleetslo.control.kube.workloads import KINDS, Workloads, where
from fleetslo.control.ports import ActuationResult
from fleetslo.core.spec import Target

_Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class _Wanted:
    direction: int
    since: float


class EngineArgsActuator:
    """Sets the batch limit by patching the vLLM containers' ``--max-num-seqs`` (a rolling restart)."""

    def __init__(
        self,
        workloads: Workloads,
        clock: Callable[[], float],
        *,
        container: str | None = None,
        min_interval: float = 1800.0,
        lasting: float = 600.0,
        min_change: float = 0.1,
    ) -> None:
        self.workloads, self.clock, self.container = workloads, clock, container
        self.min_interval, self.lasting, self.min_change = min_interval, lasting, min_change
        self._wanted: dict[_Key, _Wanted] = {}
        self._last_rollout: dict[_Key, float] = {}

    def _containers(self, target: Target) -> list[rollout.ContainerRef]:
        obj = self.workloads.get(target)
        return rollout.vllm_containers(obj, KINDS[target.workload_kind].templates, self.container)

    def read_limit(self, target: Target) -> int | None:
        return rollout.current_limit(self._containers(target))

    def set_limit(self, target: Target, limit: int) -> ActuationResult:
        key, now = _key(target), self.clock()
        containers = self._containers(target)
        current = rollout.current_limit(containers)
        if current == limit:
            self._wanted.pop(key, None)
            return ActuationResult(False, f"{where(target)} already runs with max-num-seqs {limit}")
        waiting = self._why_wait(key, current, limit, now)
        if waiting:
            return ActuationResult(
                False, f"max-num-seqs {current} -> {limit} on {where(target)} waits: {waiting}"
            )
        if not containers:
            return ActuationResult(False, f"{where(target)} has no vLLM container to set max-num-seqs on")
        self.workloads.json_patch(target, rollout.limit_patch(containers, limit), "set max-num-seqs")
        self._wanted.pop(key, None)
        self._last_rollout[key] = now
        return ActuationResult(True, f"rolling out max-num-seqs {current} -> {limit} on {where(target)}")

    def _why_wait(self, key: _Key, current: int | None, limit: int, now: float) -> str | None:
        """Why the change must wait, or ``None`` when it may roll out now."""
        direction = 1 if current is None or limit > current else -1
        wanted = self._wanted.get(key)
        if wanted is None or wanted.direction != direction:
            self._wanted[key] = wanted = _Wanted(direction, now)
        if now - wanted.since < self.lasting:
            return f"wanted for {now - wanted.since:.0f}s of {self.lasting:.0f}s"
        if current is not None and abs(limit - current) < self.min_change * current:
            return f"a change under {self.min_change:.0%} is not worth a rolling restart"
        last = self._last_rollout.get(key)
        if last is not None and now - last < self.min_interval:
            return f"last rollout {now - last:.0f}s ago (at most one per {self.min_interval:.0f}s)"
        return None


def _key(target: Target) -> _Key:
    return (target.kind.value, target.namespace, target.name)
