"""The gate actuator: set the batch limit live and drain replicas, through each pod's gate admin API.

``GateActuator`` implements ``BatchLimitActuator`` (the limit on every ready pod of a target) and
``Drainer`` (stop admission on the pods that will be removed and wait, bounded, until their
in-flight requests finish). Pods come from an injected ``PodDirectory``; calls go to each pod's
admin listener with a bearer token, several pods at once (a thread pool: the control loop is
synchronous). ``StaticPodDirectory`` serves a fixed list (no Kubernetes, demos, tests).

Every failure is a ``fleetslo.core.errors`` type: 401/403 and other 4xx are ``Permanent`` (a wrong
token or a gate that refuses the request will not heal by retrying), connection failures,
timeouts and 5xx are ``Transient``. The token never appears in a message or a log line.

Drains are leases the gate lets go of by itself: each carries the controller's ``owner`` name and
a ``drain_ttl``, and is renewed at every poll while the actuator waits, so a controller killed
mid-drain leaves gates that resume within ``drain_ttl`` seconds. ``resume_orphans`` resumes
what a previous controller left at once (a new leader calls it).

It must not decide anything: which limit and how many replicas come from the policy.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx

from fleetslo.control.ports import ActuationResult, PodDirectory, PodEndpoint
from fleetslo.core.errors import FleetSLOError, Permanent, Transient
from fleetslo.core.spec import Target, TargetKind

log = logging.getLogger("fleetslo.actuators.gate")

T = TypeVar("T")
DEFAULT_ADMIN_PORT = 8081


class GateUnreachable(Transient):
    """A pod's admin API did not answer (connection refused, reset, timeout)."""

    reason = "gate_unreachable"


class GateServerError(Transient):
    """A pod's admin API answered 5xx or something that is not its JSON."""

    reason = "gate_error"


class GateForbidden(Permanent):
    """The admin API refused the token (401/403): fix the Secret, retrying will not help."""

    reason = "gate_forbidden"


class GateRequestRefused(Permanent):
    """The admin API refused the request itself (another 4xx, e.g. a limit out of range)."""

    reason = "gate_refused"


class StaticPodDirectory:
    """A fixed list of pods per target, keyed by ``namespace/name``."""

    def __init__(self, pods: Mapping[str, Sequence[PodEndpoint]]) -> None:
        self._pods = {key: list(value) for key, value in pods.items()}

    def pods(self, target: Target) -> list[PodEndpoint]:
        return list(self._pods.get(f"{target.namespace}/{target.name}", []))


class GateActuator:
    """Talks to the gate admin API of every ready pod of a target."""

    def __init__(
        self,
        pods: PodDirectory,
        token: str,
        *,
        admin_port: int = DEFAULT_ADMIN_PORT,
        admin_url: Callable[[PodEndpoint], str] | None = None,
        client: httpx.Client | None = None,
        timeout: float = 2.0,
        drain_timeout: float = 60.0,
        drain_ttl: float = 30.0,
        owner: str = "fleetslo-controller",
        poll_interval: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        max_workers: int = 16,
    ) -> None:
        self.directory = pods
        self._auth = {"Authorization": f"Bearer {token}"}
        self._url = admin_url or (lambda pod: f"http://{pod.ip}:{admin_port}")
        self._client = client or httpx.Client()
        self.timeout = timeout
        self.drain_timeout = drain_timeout
        self.drain_ttl, self.owner = drain_ttl, owner
        self.poll_interval = poll_interval
        self.clock = clock
        self.sleep = sleep
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="gate-admin")

    def __repr__(self) -> str:
        return f"GateActuator(directory={self.directory!r})"  # the token stays out of reprs

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._client.close()

    # --- BatchLimitActuator -----------------------------------------------------------------

    def read_limit(self, target: Target) -> int | None:
        """The limit all answering pods share; ``None`` if they differ, have none, or no pod is ready.

        ``None`` makes the loop write the limit again, which is what a new pod (started with
        the default) or a pod that missed the last write needs.
        """
        answers = self._each(self._ready(target), lambda pod: self._call(pod, "GET", "/admin/limit"))
        limits = {a.get("limit") for _, a in _successes(answers)}
        _raise_if_none_answered(answers)
        return limits.pop() if len(limits) == 1 else None

    def set_limit(self, target: Target, limit: int) -> ActuationResult:
        """Set ``limit`` on every ready pod; raises the worst error after trying them all."""
        pods = self._ready(target)
        if not pods:
            return ActuationResult(False, f"{_key(target)}: no ready pods to set the limit on")
        answers = self._each(pods, lambda pod: self._call(pod, "PUT", "/admin/limit", {"limit": limit}))
        done = _successes(answers)
        changed = sum(1 for _, a in done if a.get("previous") != limit)
        message = f"{_key(target)}: limit {limit} on {len(done)}/{len(pods)} pods ({changed} changed)"
        _raise_worst(answers, message)
        return ActuationResult(changed > 0, message)

    # --- Drainer ----------------------------------------------------------------------------

    def drain(self, target: Target, count: int) -> list[str]:
        """Drain the ``count`` pods the workload controller will remove; return the drained names.

        Which pods: for a Deployment the least busy ready pods (the fleet then gives them the
        lowest pod-deletion-cost); for a StatefulSet or LeaderWorkerSet the highest ordinals, the
        only ones it removes. There only an unbroken run from the top ordinal counts, since
        scaling down by N removes the N highest; a top pod that is unready and unreachable counts
        as drained (no traffic can reach it). Pods not counted — still busy at ``drain_timeout``,
        or below a gap — are resumed rather than left unready for ever.
        """
        if count <= 0:
            return []
        ordered = target.kind != TargetKind.DEPLOYMENT
        chosen = self._highest(target, count) if ordered else self._least_busy(self._ready(target), count)
        started = [pod for pod, _ in _successes(self._each(chosen, self._start_drain))]
        drained = set(self._wait_drained(started))
        if ordered:
            drained |= {pod for pod in chosen if not pod.ready and pod not in started}
            kept = list(itertools.takewhile(lambda pod: pod in drained, chosen))
        else:
            kept = [pod for pod in chosen if pod in drained]
        self._resume([pod for pod in started if pod not in kept], target)
        log.info("%s: drained %s", _key(target), ", ".join(pod.name for pod in kept) or "no pod")
        return [pod.name for pod in kept]

    def resume(self, target: Target, names: Sequence[str]) -> None:
        """Admit again on drained pods that are kept after all (best effort: failures are logged)."""
        wanted = set(names)
        self._resume([pod for pod in self.directory.pods(target) if pod.name in wanted], target)

    def resume_orphans(self, target: Target) -> list[str]:
        """Resume drains that carry an owner (a controller's) on pods that are not terminating.

        Called by a new leader, which has drained nothing yet: every owned drain it finds was left
        by a controller that is gone. Drains without an owner (the pod's preStop hook) and pods
        being deleted are left alone: those replicas are leaving. Unreachable pods are skipped
        (their drain expires by itself)."""
        pods = [pod for pod in self.directory.pods(target) if not pod.terminating]
        answers = self._each(pods, lambda pod: self._call(pod, "GET", "/admin/status"))
        orphans = [pod for pod, a in _successes(answers) if a.get("draining") and a.get("drain_owner")]
        self._resume(orphans, target)
        return [pod.name for pod in orphans]

    def _resume(self, pods: list[PodEndpoint], target: Target) -> None:
        if pods:
            log.info("%s: resuming %s", _key(target), ", ".join(pod.name for pod in pods))
        for pod, answer in self._each(pods, lambda p: self._call(p, "DELETE", "/admin/drain")):
            if isinstance(answer, FleetSLOError):
                log.warning("%s: could not resume %s: %s", _key(target), pod.name, answer)

    def _highest(self, target: Target, count: int) -> list[PodEndpoint]:
        """The ``count`` pods with the highest ordinals (``name-<n>``), ready or not, highest first."""
        return sorted(self.directory.pods(target), key=lambda pod: _ordinal(pod.name), reverse=True)[:count]

    def _least_busy(self, pods: list[PodEndpoint], count: int) -> list[PodEndpoint]:
        answers = self._each(pods, lambda pod: self._call(pod, "GET", "/admin/status"))
        busy = {pod: int(a.get("inflight", 0)) + int(a.get("queued", 0)) for pod, a in _successes(answers)}
        return sorted(busy, key=lambda pod: (busy[pod], pod.name))[:count]

    def _start_drain(self, pod: PodEndpoint) -> dict[str, Any]:
        """Start (or renew) the drain lease on ``pod``; the answer is its status."""
        return self._call(pod, "POST", "/admin/drain", {"owner": self.owner, "ttl": self.drain_ttl})

    def _wait_drained(self, pods: list[PodEndpoint]) -> list[PodEndpoint]:
        """Poll until every pod reports drained or ``drain_timeout`` passes; the drained ones.

        Each poll renews the drain (a POST answers with the status), so it lasts while we wait and
        no longer than ``drain_ttl`` after we stop. Drained pods are renewed too, until the end."""
        drained: list[PodEndpoint] = []
        pending = list(pods)
        deadline = self.clock() + self.drain_timeout
        while pending:
            answers = self._each(pending, self._start_drain)
            self._each(drained, self._start_drain)
            drained += [pod for pod, a in _successes(answers) if a.get("drained")]
            pending = [pod for pod in pending if pod not in drained]
            if not pending or self.clock() >= deadline:
                break
            self.sleep(self.poll_interval)
        if pending:
            log.warning(
                "still busy after %gs: %s", self.drain_timeout, ", ".join(pod.name for pod in pending)
            )
        return drained

    # --- plumbing ---------------------------------------------------------------------------

    def _ready(self, target: Target) -> list[PodEndpoint]:
        return [pod for pod in self.directory.pods(target) if pod.ready]

    def _each(
        self, pods: list[PodEndpoint], call: Callable[[PodEndpoint], T]
    ) -> list[tuple[PodEndpoint, T | FleetSLOError]]:
        """``call`` on every pod at once; a pod's ``FleetSLOError`` is returned, not raised."""

        def one(pod: PodEndpoint) -> tuple[PodEndpoint, T | FleetSLOError]:
            try:
                return pod, call(pod)
            except FleetSLOError as exc:
                return pod, exc

        if len(pods) <= 1:
            return [one(pod) for pod in pods]
        return list(self._pool.map(one, pods))

    def _call(self, pod: PodEndpoint, method: str, path: str, body: Any = None) -> dict[str, Any]:
        url = self._url(pod) + path
        try:
            response = self._client.request(method, url, json=body, headers=self._auth, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise GateUnreachable(f"{pod.name}: {method} {path}: {type(exc).__name__}: {exc}") from exc
        _check_status(pod, method, path, response)
        try:
            answer = response.json()
        except ValueError as exc:
            raise GateServerError(f"{pod.name}: {method} {path}: the answer is not JSON") from exc
        if not isinstance(answer, dict):
            raise GateServerError(f"{pod.name}: {method} {path}: expected a JSON object")
        return answer


def _check_status(pod: PodEndpoint, method: str, path: str, response: httpx.Response) -> None:
    status = response.status_code
    where = f"{pod.name}: {method} {path}: HTTP {status}"
    if status in (401, 403):
        raise GateForbidden(f"{where}: the admin token was refused (check the Secret both sides mount)")
    if status >= 500:
        raise GateServerError(f"{where}: {response.text[:200]}")
    if status >= 400:
        raise GateRequestRefused(f"{where}: {response.text[:200]}")


def _successes(answers: Iterable[tuple[PodEndpoint, T | FleetSLOError]]) -> list[tuple[PodEndpoint, T]]:
    return [(pod, a) for pod, a in answers if not isinstance(a, FleetSLOError)]


def _errors(answers: Iterable[tuple[PodEndpoint, object]]) -> list[FleetSLOError]:
    return [a for _, a in answers if isinstance(a, FleetSLOError)]


def _raise_worst(answers: Sequence[tuple[PodEndpoint, object]], context: str) -> None:
    """Raise the first permanent error, else the first transient one, naming how many pods failed."""
    errors = _errors(answers)
    if not errors:
        return
    worst = next((e for e in errors if isinstance(e, Permanent)), errors[0])
    raise type(worst)(f"{context}; {len(errors)} failed, first: {worst}") from worst


def _raise_if_none_answered(answers: Sequence[tuple[PodEndpoint, object]]) -> None:
    if answers and len(_errors(answers)) == len(answers):
        _raise_worst(answers, "no pod answered")


def _key(target: Target) -> str:
    return f"{target.namespace}/{target.name}"


_ORDINAL = re.compile(r"-(\d+)$")


def _ordinal(name: str) -> int:
    """The ordinal of a StatefulSet pod or LeaderWorkerSet leader (``name-3`` → 3); -1 if none."""
    match = _ORDINAL.search(name)
    return int(match.group(1)) if match else -1
