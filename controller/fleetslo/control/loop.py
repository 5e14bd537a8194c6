"""The control loop: one reconcile = read → observe → decide → apply → audit, per target.

``Controller.tick(now)`` reconciles every target; ``tick_target(name, now)`` one of them (the
scheduler runs one job per target, so a slow or failing target never delays the others). ``now``
is a parameter: scenario tests run thousands of ticks in virtual time.

Rules a reconcile follows:

* only the leader reconciles (``leader.is_leader()`` is checked before reading) and only the
  leader writes: ``leader.fence()`` runs immediately before **every** write (a drain takes up to
  a minute, and the lease can pass to another controller meanwhile), confirms the lease, and
  bounds the write to end while it is ours. A controller that finds itself deposed writes nothing
  more, resumes what it drained, and counts it (``actuation_errors{kind="not_leader"}``);
* a controller that becomes leader starts every policy from its initial state, and first resumes
  the drains a previous controller left behind (``Drainer.resume_orphans``, once per target);
* with a ``Restorer`` (``fleetslo.control.state``), a target's first reconcile of a leadership term
  first resumes its policy from the persisted record and the metrics store's history (a store
  that cannot be read now fails the reconcile: retried, as a failed read is), and every decision
  saves the record again;
* each reconcile has ``api_budget`` seconds of Kubernetes API time across all its calls
  (``fleetslo.control.deadline``): a hung API server fails the tick in bounded time;
* a scale write planned against a count that changed meanwhile (someone scaled the target, or
  another write landed: ``Conflict``, a 409) is not retried blindly: the reconcile reads, observes
  and decides again from the fresh state, ``replan_attempts`` times at most;
* each policy decides at its own ``interval``, at most once per interval;
* **an observation that fails transiently does not stop the tick: the policy gets an observation
  with the replica counts and no signals** (every signal ``None``, ``replicas_reporting`` 0,
  ``data_age`` ``None``), so its own "no data → hold" logic decides and the hold is audited with
  its reason. The loop never invents numbers, and the policy is the one place that knows what to
  do without them (a floor of ``replicas.min`` still applies, a scale-down never does);
* a failure to read or to write the target (or a permanent observation failure, such as a bad
  query) fails the reconcile: nothing more happens for that target, the policy's state is kept as
  it was (the decision did not happen), and the target is retried after a kopf-style back-off —
  ``backoff`` delays for consecutive transient failures (at least the API's Retry-After), and
  ``permanent_retry`` after a permanent one, which is also reported as a Warning Event. Any other
  exception is a bug: logged with its traceback, and backed off like a transient failure;
* one target's failure never touches another target.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from fleetslo.control import deadline
from fleetslo.control.actuators.fleet import FleetActuator, FleetState
from fleetslo.control.audit import Auditor, Reconcile
from fleetslo.control.ports import Deposed, Source
from fleetslo.control.state import Restorer
from fleetslo.core.errors import Conflict, FleetSLOError, Permanent, RateLimited, Transient
from fleetslo.core.model import Observation
from fleetslo.core.spec import FleetSLO
from fleetslo.policy.base import Policy
from fleetslo.policy.evidence import guard_scale_down

log = logging.getLogger("fleetslo.loop")

T = TypeVar("T")


class Leadership(Protocol):
    def is_leader(self) -> bool: ...

    def fence(self) -> float:
        """Immediately before a write: seconds we are sure to lead, or raise ``Deposed``."""
        ...


@dataclass(frozen=True, slots=True)
class Binding:
    """One FleetSLO and what observes, decides and acts for it."""

    slo: FleetSLO
    policy: Policy[Any]
    source: Source
    fleet: FleetActuator

    @property
    def name(self) -> str:
        return self.slo.metadata.name


class Throttle:
    """Back-off after consecutive failures of one target (kopf's ``throttled``); reset on success."""

    def __init__(self, delays: Sequence[float], permanent_retry: float) -> None:
        self.delays = tuple(delays) or (1.0,)
        self.permanent_retry = permanent_retry
        self.failures = 0
        self.retry_at = float("-inf")

    def ready(self, now: float) -> bool:
        return now >= self.retry_at

    def success(self) -> None:
        self.failures, self.retry_at = 0, float("-inf")

    def failure(self, now: float, exc: BaseException) -> float:
        """Record a failure at ``now``; returns the delay before the next attempt."""
        if isinstance(exc, Permanent):
            delay = self.permanent_retry
        else:
            delay = self.delays[min(self.failures, len(self.delays) - 1)]
            if isinstance(exc, RateLimited) and exc.retry_after:
                delay = max(delay, exc.retry_after)
        self.failures += 1
        self.retry_at = now + delay
        return delay


class Outcome(StrEnum):
    """What ``tick_target`` did (for tests and the scheduler's logs)."""

    FOLLOWER = "follower"
    BACKING_OFF = "backing_off"
    NOT_DUE = "not_due"
    DECIDED = "decided"
    FAILED = "failed"


@dataclass
class _Runtime:
    policy_state: Any
    throttle: Throttle
    next_decision: float = float("-inf")
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Whether this leadership term already resumed the drains a previous controller left.
    orphans_resumed: bool = False
    #: Whether this leadership term already resumed the policy's persisted state.
    restored: bool = False


class _Failed(Exception):
    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(stage)
        self.stage, self.cause = stage, cause


class Controller:
    """Reconciles every bound target; thread-safe per target (one reconcile of a target at a time)."""

    def __init__(
        self,
        bindings: Sequence[Binding],
        auditor: Auditor,
        *,
        leader: Leadership,
        backoff: Sequence[float] = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0),
        permanent_retry: float = 600.0,
        perf_clock: Callable[[], float] = time.perf_counter,
        api_budget: float = 20.0,
        replan_attempts: int = 2,
        restorer: Restorer | None = None,
    ) -> None:
        self.bindings = {b.name: b for b in bindings}
        self.auditor, self.leader, self.perf_clock = auditor, leader, perf_clock
        self.api_budget, self.replan_attempts = api_budget, max(1, replan_attempts)
        self._backoff, self._permanent_retry = tuple(backoff), permanent_retry
        self.restorer = restorer
        self._runtime = {name: self._fresh(b) for name, b in self.bindings.items()}
        self._leading = False
        self._leading_lock = threading.Lock()

    def _fresh(self, binding: Binding) -> _Runtime:
        return _Runtime(
            binding.policy.initial_state(binding.slo.spec), Throttle(self._backoff, self._permanent_retry)
        )

    def tick(self, now: float) -> dict[str, Outcome]:
        """Reconcile every target once (as due); returns what happened to each."""
        return {name: self.tick_target(name, now) for name in self.bindings}

    def tick_target(self, name: str, now: float) -> Outcome:
        if not self._check_leader():
            return Outcome.FOLLOWER
        binding, runtime = self.bindings[name], self._runtime[name]
        with runtime.lock:
            if not runtime.throttle.ready(now):
                return Outcome.BACKING_OFF
            if now < runtime.next_decision:
                return Outcome.NOT_DUE
            started = self.perf_clock()
            try:
                with deadline.within(self.api_budget, self.perf_clock):
                    self._resume_orphans(binding, runtime)
                    return self._reconcile(binding, runtime, now)
            finally:
                self.auditor.metrics.tick_duration.observe(max(0.0, self.perf_clock() - started))

    def _check_leader(self) -> bool:
        """Whether we lead; on becoming leader, every policy starts over from its initial state."""
        leading = self.leader.is_leader()
        with self._leading_lock:
            if leading and not self._leading:
                for name, binding in self.bindings.items():
                    with self._runtime[name].lock:
                        self._runtime[name] = self._fresh(binding)
            self._leading = leading
        return leading

    def _resume_orphans(self, b: Binding, runtime: _Runtime) -> None:
        """Once per leadership term: admit again on pods a gone controller left drained."""
        if runtime.orphans_resumed:
            return
        try:
            resumed = b.fleet.resume_orphans(b.slo.spec.target)
        except FleetSLOError as exc:  # best effort: the gates' own drain expiry is the backstop
            log.warning("%s: could not check for orphaned drains (retrying next tick): %s", b.name, exc)
            return
        runtime.orphans_resumed = True
        if resumed:
            log.warning("%s: resumed drains left by a previous controller on %s", b.name, ", ".join(resumed))

    def _reconcile(self, b: Binding, runtime: _Runtime, now: float) -> Outcome:
        target = b.slo.spec.target
        with self.auditor.span(b.name, target) as span:
            try:
                self._restore(b, runtime, now)
                record, state = self._decide_and_apply(b, runtime, now)
            except _Failed as failed:
                if isinstance(failed.cause, Deposed):
                    return self._deposed(b, failed.cause)
                delay = runtime.throttle.failure(now, failed.cause)
                self.auditor.failed(b.name, target, failed.stage, failed.cause, retry_in=delay, span=span)
                return Outcome.FAILED
            if record is None:
                return Outcome.FOLLOWER
            runtime.policy_state, runtime.next_decision = state, now + b.policy.interval
            runtime.throttle.success()
            if self.restorer is not None:
                self.restorer.save(b.slo, b.policy, state, now)
            self.auditor.decided(record, span)
            return Outcome.DECIDED

    def _restore(self, b: Binding, runtime: _Runtime, now: float) -> None:
        """Once per leadership term, before the first decision: the policy resumes what was persisted."""
        restorer = self.restorer
        if restorer is None or runtime.restored:
            return
        initial = runtime.policy_state
        runtime.policy_state = _stage(
            "restore", lambda: restorer.start(b.slo, b.policy, b.source, initial, now)
        )
        runtime.restored = True

    def _deposed(self, b: Binding, exc: Deposed) -> Outcome:
        """The lease was gone at a write: nothing was written from then on; another leader acts."""
        self.auditor.metrics.actuation_errors.labels(b.name, exc.reason).inc()
        log.warning("%s: not written, leadership lost: %s", b.name, exc)
        return Outcome.FOLLOWER

    def _decide_and_apply(self, b: Binding, runtime: _Runtime, now: float) -> tuple[Reconcile | None, Any]:
        for attempt in range(1, self.replan_attempts + 1):
            try:
                return self._plan_and_apply(b, runtime, now)
            except _Failed as failed:
                if not isinstance(failed.cause, Conflict) or attempt == self.replan_attempts:
                    raise
                log.info("%s: re-planning from a fresh read (try %d): %s", b.name, attempt + 1, failed.cause)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _plan_and_apply(self, b: Binding, runtime: _Runtime, now: float) -> tuple[Reconcile | None, Any]:
        target = b.slo.spec.target
        before = _stage("read", lambda: b.fleet.read(target))
        obs, observe_error = self._observe(b, before, now)
        obs = obs.finite_only()  # a NaN is missing data, never a number a policy computes with
        decision, state = _stage(
            "decide", lambda: b.policy.decide(obs, runtime.policy_state, b.slo.spec, now)
        )
        decision = guard_scale_down(decision, obs, before.scale.desired)
        if not self.leader.is_leader():
            return None, state  # lost the lease while deciding: someone else may act now
        outcome = _stage("apply", lambda: b.fleet.apply(target, decision, before, self.leader.fence))
        return Reconcile(b.name, target, before, obs, decision, outcome, observe_error), state

    def _observe(
        self, b: Binding, before: FleetState, now: float
    ) -> tuple[Observation, FleetSLOError | None]:
        counts = before.scale.counts
        try:
            obs = _stage("observe", lambda: b.source.observe(b.slo, counts, before.batch_limit, now))
        except _Failed as failed:
            if not isinstance(failed.cause, Transient):
                raise
            self.auditor.observe_failed(b.name, b.slo.spec.target, failed.cause)
            window = b.slo.spec.objectives.observation_window
            blind = Observation(b.name, now, window, counts, batch_limit=before.batch_limit)
            return blind, failed.cause
        return obs, None


def _stage(stage: str, call: Callable[[], T]) -> T:
    """Run one stage; any failure leaves as ``_Failed(stage, cause)``."""
    try:
        return call()
    except Exception as exc:
        raise _Failed(stage, exc) from exc
