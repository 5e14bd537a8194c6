"""Replicas as local processes: a sim-server and its sidecar (exporter + gate) each, on loopback.

``LocalFleet`` is, for one target, what a Deployment and its pods are on Kubernetes:

* ``ReplicaActuator`` — ``scale(n)`` starts replicas (the two processes, on free loopback ports;
  the sim-server's cold start counts from that moment; a replica whose port another listener took
  before its process bound it starts again on new ones) or removes them: starting ones first, newest
  first (as a ReplicaSet deletes not-ready pods first), then the ones marked after a drain, then
  the newest. Removal sends SIGTERM to both processes; they are gone when both have exited;
* ``PodDirectory`` — its pods, ready once the sim-server's ``/health`` and the sidecar's
  ``/readyz`` answer 200 (a draining gate makes ``/readyz`` 503, so a draining pod turns unready
  as on Kubernetes), with ``sidecar_url`` and ``admin_url`` for the direct source and the gate
  actuator, which therefore work unchanged;
* ``PodMarker`` — drained pods marked as the first to remove (the pod-deletion-cost of a Deployment).

A monitor thread polls readiness and reaps stopped processes. Every process it starts is stopped by
``close()`` (SIGTERM, then SIGKILL after a grace), and each runs in its own session, so a Ctrl-C in
the terminal reaches only the supervisor, which stops them in order. Time for cost accounting comes
from an injected clock. It must not decide how many replicas there should be.

``gates()`` and ``counts()`` never wait for the lock: they read a snapshot republished on every
change. The demo's router calls them on the event loop for every request, while ``scale`` holds
the lock for as long as it takes to start processes (hundreds of milliseconds on a busy host) —
time every request in flight would otherwise lose.
"""

from __future__ import annotations

import logging
import math
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import IO

from fleetslo.control.local.probe import ReplicaProbe
from fleetslo.control.local.replica import (
    LOOPBACK,
    Ports,
    ReplicaRecipe,
    lost_its_port,
    reap,
    release,
    spawn,
)
from fleetslo.control.ports import ActuationResult, PodEndpoint, ScaleState
from fleetslo.core.errors import Conflict, FleetSLOError
from fleetslo.core.model import ReplicaCounts
from fleetslo.core.spec import Target

log = logging.getLogger("fleetslo.actuators.local")

#: Wall seconds a stopped process gets to exit before SIGKILL.
STOP_GRACE_S = 5.0
#: How often a starting replica is started again after another listener took one of its ports.
MAX_PORT_RELAUNCHES = 3


class LocalFleetError(FleetSLOError):
    """A replica could not be started (the machine is out of ports or processes)."""

    reason = "local_process"


class Phase(StrEnum):
    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    GONE = "gone"


@dataclass
class LocalReplica:
    """One replica: its ports, its two processes, and its lifecycle in fleet time."""

    name: str
    ports: Ports
    processes: list[subprocess.Popen[bytes]]
    requested_at: float
    phase: Phase = Phase.STARTING
    draining: bool = False
    marked: bool = False
    ready_at: float | None = None
    gone_at: float | None = None
    stop_deadline: float = math.inf
    preemptions: float = 0.0
    logs: Sequence[IO[bytes]] = ()
    cold_start_s: float = 0.0
    #: The epoch time its first start began (its simulated cold start counts from it).
    started_at: float = 0.0
    #: Starts again after losing a port to another listener (``_lost_a_port``).
    relaunches: int = 0

    @property
    def serving(self) -> bool:
        return self.phase is Phase.READY and not self.draining


class LocalFleet:
    """One target's replicas as local processes (see the module docstring)."""

    def __init__(
        self,
        target: Target,
        recipe: ReplicaRecipe,
        clock: Callable[[], float],
        *,
        poll_interval: float = 0.05,
        ready_poll_interval: float = 0.25,
        epoch: Callable[[], float] = time.time,
    ) -> None:
        self.target, self.recipe, self.clock, self.epoch = target, recipe, clock, epoch
        self.poll_interval, self.ready_poll_interval = poll_interval, ready_poll_interval
        self.replicas: list[LocalReplica] = []
        self._lock = threading.RLock()
        self._probe = ReplicaProbe(recipe.model_name)
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._ordinal = 0
        self._last_ready_poll = 0.0
        self._gates: list[tuple[str, str]] = []
        self._counts = ReplicaCounts(0, 0, 0)

    # --- lifecycle of the fleet ----------------------------------------------------------------

    def start(self, warm: int, timeout: float = 60.0) -> None:
        """Start ``warm`` replicas without a cold start and start the monitor; return once they are
        warm: ready, and each sidecar already serving its engine's page (a warm fleet has been
        scraped, so the first observation of it has data)."""
        with self._lock:
            for _ in range(warm):
                self._launch(cold_start_s=0.0)
        self._monitor = threading.Thread(target=self._watch, name="local-fleet", daemon=True)
        self._monitor.start()
        deadline = time.monotonic() + timeout
        while self.counts().ready < warm or not all(self._probe.reporting(r.ports) for r in self.replicas):
            self._check_failed_start()
            if time.monotonic() > deadline:
                raise LocalFleetError(
                    f"{warm} warm replicas not ready after {timeout:g}s (logs: {self.recipe.log_dir})"
                )
            time.sleep(self.poll_interval)

    def close(self) -> None:
        """Stop the monitor and every process this fleet started (SIGTERM, then SIGKILL)."""
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
        with self._lock:
            for replica in self.replicas:
                if replica.phase is not Phase.GONE:
                    self._terminate(replica)
            deadline = time.monotonic() + STOP_GRACE_S
            for replica in self.replicas:
                for process in replica.processes:
                    reap(process, max(0.0, deadline - time.monotonic()))
                self._retire(replica)
        self._probe.close()

    # --- ReplicaActuator ----------------------------------------------------------------------

    def read(self, target: Target) -> ScaleState:
        with self._lock:
            return ScaleState(len(self._provisioned()), self.counts())

    def scale(self, target: Target, replicas: int, *, expected: int | None = None) -> ActuationResult:
        with self._lock:
            current = self._provisioned()
            if expected is not None and len(current) != expected:
                raise Conflict(f"{target.name}: {len(current)} replicas, planned against {expected}")
            for _ in range(replicas - len(current)):
                self._launch(cold_start_s=self.recipe.cold_start_s)
            for replica in self._removal_order(current)[: max(0, len(current) - replicas)]:
                self._stop_replica(replica)
            return ActuationResult(
                replicas != len(current), f"{target.name}: {len(current)} -> {replicas} replicas"
            )

    # --- PodDirectory and PodMarker -----------------------------------------------------------

    def pods(self, target: Target) -> list[PodEndpoint]:
        with self._lock:
            return [PodEndpoint(r.name, LOOPBACK, r.serving) for r in self._provisioned()]

    def mark(self, target: Target, names: Sequence[str]) -> None:
        self._set_marked(names, True)

    def unmark(self, target: Target, names: Sequence[str]) -> None:
        self._set_marked(names, False)

    def sidecar_url(self, pod: PodEndpoint) -> str:
        return f"http://{LOOPBACK}:{self._by_name(pod.name).ports.sidecar}"

    def admin_url(self, pod: PodEndpoint) -> str:
        return f"http://{LOOPBACK}:{self._by_name(pod.name).ports.admin}"

    # --- what the demo reads ------------------------------------------------------------------

    def counts(self) -> ReplicaCounts:
        return self._counts

    def gates(self) -> list[tuple[str, str]]:
        """(name, gate base URL) of every replica that takes new requests now."""
        return self._gates

    def _publish(self) -> None:
        """Republish the lock-free snapshots (call with the lock held, after any change)."""
        replicas = self.replicas
        self._gates = [(r.name, f"http://{LOOPBACK}:{r.ports.gate}") for r in replicas if r.serving]
        self._counts = ReplicaCounts(
            sum(1 for r in replicas if r.serving),
            sum(1 for r in replicas if r.phase is Phase.STARTING),
            sum(1 for r in replicas if r.phase is Phase.STOPPING or r.draining),
        )

    def replica_seconds(self, now: float) -> float:
        """Fleet time paid for: from each replica's request (not before 0) to its end (or ``now``)."""
        with self._lock:
            return sum(
                max(0.0, (r.gone_at if r.gone_at is not None else now) - max(0.0, r.requested_at))
                for r in self.replicas
            )

    def preemptions(self) -> float:
        """Preemptions counted by every replica (stopped ones as of their last page)."""
        with self._lock:
            live = [r for r in self.replicas if r.phase in (Phase.READY, Phase.STARTING)]
        for replica in live:
            replica.preemptions = max(replica.preemptions, self._read_preemptions(replica))
        return sum(r.preemptions for r in self.replicas)

    # --- inside -------------------------------------------------------------------------------

    def _provisioned(self) -> list[LocalReplica]:
        return [r for r in self.replicas if r.phase in (Phase.STARTING, Phase.READY)]

    def _removal_order(self, current: list[LocalReplica]) -> list[LocalReplica]:
        starting = [r for r in reversed(current) if r.phase is Phase.STARTING]
        marked = [r for r in current if r.phase is Phase.READY and r.marked]
        rest = [r for r in reversed(current) if r.phase is Phase.READY and not r.marked]
        return starting + marked + rest

    def _launch(self, cold_start_s: float) -> LocalReplica:
        name = f"{self.target.name}-{self._ordinal}"
        self._ordinal += 1
        ports, started_at = Ports.pick(), self.epoch()
        try:
            processes, logs = spawn(self.recipe, name, ports, cold_start_s, started_at, mode="wb")
        except OSError as exc:
            raise LocalFleetError(f"cannot start replica {name}: {exc}") from exc
        replica = LocalReplica(
            name, ports, processes, self.clock(), logs=logs, cold_start_s=cold_start_s, started_at=started_at
        )
        self.replicas.append(replica)
        self._publish()
        log.info(
            "%s: started (engine :%d, sidecar :%d, gate :%d)", name, ports.engine, ports.sidecar, ports.gate
        )
        return replica

    def _lost_a_port(self, replica: LocalReplica) -> bool:
        """Whether a starting replica's process exited because another one took its port first
        (``free_port`` picks ports no outgoing connection takes, but another listener still can),
        and it may start again on new ones."""
        if replica.phase is not Phase.STARTING or replica.relaunches >= MAX_PORT_RELAUNCHES:
            return False
        if all(p.poll() is None for p in replica.processes):
            return False
        return lost_its_port(self.recipe, replica.name)

    def _relaunch(self, replica: LocalReplica) -> None:
        """Start a replica that lost a port again on new ones, with its cold start still counted
        from its first start; the logs keep both attempts."""
        for process in replica.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            reap(process, 1.0)
        for out in replica.logs:
            out.close()
        release(replica.ports)
        ports = Ports.pick()
        log.warning("%s: a port was taken while it started; starting it again on new ports", replica.name)
        try:
            replica.processes, replica.logs = spawn(
                self.recipe, replica.name, ports, replica.cold_start_s, replica.started_at, mode="ab"
            )
        except OSError as exc:  # nothing runs: it stops, and the monitor retires it
            log.warning("%s: cannot start again: %s", replica.name, exc)
            replica.processes, replica.logs = [], []
            self._terminate(replica)
        replica.ports, replica.relaunches = ports, replica.relaunches + 1
        self._publish()

    def _stop_replica(self, replica: LocalReplica) -> None:
        if replica.phase is Phase.READY:
            replica.preemptions = max(replica.preemptions, self._read_preemptions(replica))
        self._terminate(replica)
        log.info("%s: stopping", replica.name)

    def _terminate(self, replica: LocalReplica) -> None:
        replica.phase = Phase.STOPPING
        self._publish()
        replica.stop_deadline = time.monotonic() + STOP_GRACE_S
        for process in replica.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)

    def _retire(self, replica: LocalReplica) -> None:
        if replica.phase is not Phase.GONE:
            replica.phase = Phase.GONE
            self._publish()
            replica.gone_at = self.clock()
            release(replica.ports)
        for out in replica.logs:
            out.close()

    def _set_marked(self, names: Sequence[str], value: bool) -> None:
        with self._lock:
            for replica in self.replicas:
                if replica.name in names:
                    replica.marked = value

    def _by_name(self, name: str) -> LocalReplica:
        with self._lock:
            for replica in self.replicas:
                if replica.name == name:
                    return replica
        raise LocalFleetError(f"no replica named {name}")

    def _read_preemptions(self, replica: LocalReplica) -> float:
        value = self._probe.preemptions(replica.ports)
        return replica.preemptions if value is None else value

    def _check_failed_start(self) -> None:
        """Raise if a warm replica failed to start: a process exited while it was starting, or the
        monitor, seeing that first, already stopped it (it left starting without being ready)."""
        with self._lock:
            for replica in self.replicas:
                if self._lost_a_port(replica):
                    continue  # the monitor starts it again
                exited = any(p.poll() is not None for p in replica.processes)
                stopped = replica.phase in (Phase.STOPPING, Phase.GONE) and replica.ready_at is None
                if stopped or (replica.phase is Phase.STARTING and exited):
                    raise LocalFleetError(
                        f"{replica.name} exited while starting (logs: {self.recipe.log_dir})"
                    )

    # --- the monitor thread -------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_interval):
            with self._lock:
                replicas = list(self.replicas)
            poll_ready = time.monotonic() - self._last_ready_poll >= self.ready_poll_interval
            if poll_ready:
                self._last_ready_poll = time.monotonic()
            for replica in replicas:
                self._step(replica, poll_ready)

    def _step(self, replica: LocalReplica, poll_ready: bool) -> None:
        if replica.phase is Phase.STOPPING:
            if (
                all(p.poll() is not None for p in replica.processes)
                or time.monotonic() > replica.stop_deadline
            ):
                for process in replica.processes:
                    reap(process, 0.0)
                with self._lock:
                    self._retire(replica)
            return
        if replica.phase is Phase.GONE:
            return
        if self._lost_a_port(replica):
            with self._lock:
                self._relaunch(replica)
            return
        if any(p.poll() is not None for p in replica.processes):
            log.warning("%s: a process exited unexpectedly (logs in %s)", replica.name, self.recipe.log_dir)
            with self._lock:
                self._terminate(replica)
            return
        if replica.phase is Phase.STARTING and self._probe.healthy(replica.ports):
            with self._lock:
                if replica.phase is Phase.STARTING:
                    replica.phase, replica.ready_at = Phase.READY, self.clock()
                    self._publish()
                    log.info("%s: ready", replica.name)
        elif replica.phase is Phase.READY and poll_ready:
            draining = not self._probe.sidecar_ready(replica.ports)
            with self._lock:
                if replica.draining != draining:
                    replica.draining = draining
                    self._publish()
