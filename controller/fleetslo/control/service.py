"""``fleetslo run``: settings and FleetSLO specs in, a running controller out.

``build`` wires the parts — source, policy, actuators (wrapped: ``DryRun*`` for advisory targets or
``--dry-run``, ``Measured*`` always), auditor, leader election — and ``serve`` runs them: an
APScheduler ``BackgroundScheduler`` with one job per target (``max_instances=1``, ``coalesce=True``:
a target never has two overlapping reconciles, and a late job runs once, not in a burst), the
election on its own thread, and ``/healthz``, ``/readyz``, ``/metrics`` on a small HTTP server.
Shutdown stops the scheduler (waiting for running reconciles), releases the lease and closes.

Files and the environment are read by ``cli.py`` and handed in as ``Environment``.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor as SchedulerPool
from apscheduler.schedulers.background import BackgroundScheduler
from kubernetes import client

from fleetslo.control.actuators.catalog import Wiring, build_batch_limits, drainer_of
from fleetslo.control.actuators.fleet import FleetActuator
from fleetslo.control.actuators.kubernetes import KubeReplicaActuator
from fleetslo.control.actuators.wrappers import (
    DryRunBatchLimit,
    DryRunDrainer,
    DryRunMarker,
    DryRunReplicas,
    MeasuredBatchLimit,
    MeasuredDrainer,
    MeasuredMarker,
    MeasuredReplicas,
    PodMarker,
)
from fleetslo.control.audit import Auditor
from fleetslo.control.health import Health, Heartbeat, http_server
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.kube.client import REACHABILITY, connect
from fleetslo.control.kube.events import KubeEventRecorder
from fleetslo.control.kube.lease import KubeLeaseLock
from fleetslo.control.kube.pods import KubePodDirectory, KubePodMarker
from fleetslo.control.kube.workloads import Workloads
from fleetslo.control.leader import AlwaysLeader, LeaderElector
from fleetslo.control.loop import Binding, Controller
from fleetslo.control.ports import BatchLimitActuator, Drainer, PodDirectory, ReplicaActuator, Source
from fleetslo.control.resources import Held, StatusAuditor, StatusWriter
from fleetslo.control.settings import ControllerSettings, SourceKind
from fleetslo.control.sources.direct import DirectSource
from fleetslo.control.sources.prometheus import PrometheusClient, PrometheusSource
from fleetslo.control.state import FileStateStore, Restorer, StateStore, StatusReader, StatusStateStore
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import BatchActuator, FleetSLO, Mode, ReplicaActuatorKind
from fleetslo.policy.base import Policy
from fleetslo.policy.fleetslo.physics import StepCost
from fleetslo.policy.registry import check_options, make_policy

log = logging.getLogger("fleetslo.run")


#: Reads an engine profile (a packaged name or a file written by ``fleetslo profile``) as the step
#: costs the capacity model starts from; a ``ConfigError`` when it is missing or broken.
ProfileReader = Callable[[str], StepCost]


def no_profile_reader(name: str) -> StepCost:
    raise ConfigError(f"profile: {name!r} cannot be read here (no profile reader was given)")


@dataclass(frozen=True)
class Environment:
    """What ``cli.py`` read from outside the process for ``fleetslo run``."""

    in_pod: bool
    identity: str
    prometheus_token: Callable[[], str | None] = lambda: None
    gate_token: str | None = None
    #: How ``spec.profile`` is read (the simulator's profile loader lives above this layer).
    profiles: ProfileReader = no_profile_reader
    #: The state file for targets without a FleetSLO resource (``state.file``, or the default
    #: ``cli.py`` chose next to the config); ``None``: their learned state is not persisted.
    state_file: Path | None = None


@dataclass(frozen=True)
class Actuators:
    """The shared, unwrapped actuators; ``make_fleet`` wraps them per target."""

    replicas: ReplicaActuator
    #: The batch-limit actuators the FleetSLOs name, by kind (``actuators.catalog``).
    batch: Mapping[BatchActuator, BatchLimitActuator] = field(default_factory=dict)
    #: What empties a replica before it is removed (the sidecar gate's admin API), if configured.
    drainer: Drainer | None = None
    marker: PodMarker | None = None


@dataclass
class Running:
    """A built controller and what must be closed when it stops."""

    controller: Controller
    metrics: ControllerMetrics
    elector: LeaderElector | None
    closers: list[Callable[[], None]] = field(default_factory=list)
    #: Whether the last Kubernetes API call got an answer (``None``: none made yet).
    api_reachable: Callable[[], bool | None] = lambda: None


def make_fleet(
    slo: FleetSLO, actuators: Actuators, metrics: ControllerMetrics, *, dry_run: bool, drain: bool
) -> FleetActuator:
    """The target's ``FleetActuator``: its batch knob, drain when possible, dry-run and measured wrappers."""
    name, spec = slo.metadata.name, slo.spec
    batch = actuators.batch.get(spec.batch_limit.actuator)
    drainer = actuators.drainer if drain else None
    replicas, marker = actuators.replicas, actuators.marker
    if spec.replicas.actuator == ReplicaActuatorKind.EXTERNAL:
        # Another autoscaler follows the published count and removes replicas itself: no drain.
        replicas, drainer, marker = DryRunReplicas(replicas), None, None
    if dry_run or spec.mode == Mode.ADVISORY:
        replicas = DryRunReplicas(replicas)
        batch = DryRunBatchLimit(batch) if batch is not None else None
        drainer = DryRunDrainer() if drainer is not None else None
        marker = DryRunMarker() if marker is not None else None
    return FleetActuator(
        MeasuredReplicas(replicas, metrics, name),
        MeasuredBatchLimit(batch, metrics, name) if batch is not None else None,
        MeasuredDrainer(drainer, metrics, name) if drainer is not None else None,
        MeasuredMarker(marker, metrics, name) if marker is not None else None,
    )


def make_policy_for(slo: FleetSLO, settings: ControllerSettings, env: Environment) -> Policy[Any]:
    """The target's policy; ``spec.profile`` names the engine its capacity model starts from."""
    options: dict[str, Any] = dict(settings.policy_options)
    if slo.spec.profile is not None:
        options["step_cost"] = read_profile(slo, env.profiles)
    return make_policy(settings.policy, slo.spec, **options)


def read_profile(slo: FleetSLO, profiles: ProfileReader) -> StepCost:
    """``spec.profile`` as step costs; a ``ConfigError`` naming the FleetSLO when it cannot be read."""
    assert slo.spec.profile is not None
    try:
        return profiles(slo.spec.profile)
    except ConfigError as exc:
        raise ConfigError(f"FleetSLO {slo.metadata.name}: spec.profile: {exc}") from exc


def make_restorer(
    settings: ControllerSettings, env: Environment, specs: Sequence[FleetSLO], status: StatusStateStore | None
) -> Restorer | None:
    """Where each target's learned state is kept: its resource's status, else the state file."""
    if not settings.state.enabled:
        return None
    file_store = FileStateStore(env.state_file) if env.state_file is not None else None
    stores: dict[str, StateStore] = {}
    for slo in specs:
        name = slo.metadata.name
        store: StateStore | None = status if status is not None and name in status.resources else file_store
        if store is None:
            log.info("%s: no FleetSLO resource and no state.file: its learned state is not persisted", name)
            continue
        stores[name] = store
    return Restorer(stores, history_days=settings.state.history_days)


def make_source(settings: ControllerSettings, env: Environment, pods: PodDirectory) -> Source:
    if settings.source.kind == SourceKind.DIRECT:
        d = settings.source.direct
        return DirectSource(pods, port=d.port, scheme=d.scheme, timeout=d.timeout,
                            interval=settings.interval, gpu_utilization=d.gpu_utilization)  # fmt: skip
    p = settings.source.prometheus
    verify: ssl.SSLContext | bool = not p.insecure_skip_verify
    if p.ca_file and not p.insecure_skip_verify:
        try:
            verify = ssl.create_default_context(cafile=p.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"source.prometheus.ca_file: cannot load {p.ca_file} ({exc})") from exc
    prom = PrometheusClient(p.url, timeout=p.timeout, token=env.prometheus_token, verify=verify)
    return PrometheusSource(prom, max_age=p.max_age, namespace_label=p.namespace_label,
                            pod_label=p.pod_label, extra_matchers=p.extra_matchers)  # fmt: skip


def build(
    settings: ControllerSettings,
    specs: Sequence[FleetSLO],
    env: Environment,
    api: client.ApiClient | None = None,
    *,
    status: StatusWriter | None = None,
    held: Sequence[Held] = (),
) -> Running:
    """Every part of a controller for ``specs``, connected to the cluster (``api``, or ``connect``);
    with ``status``, the reconciles of the ``held`` resources are written into their status too."""
    check_options(settings.policy, settings.policy_options)  # a typo stops here, before any cluster call
    api = api or connect(settings.kubernetes, in_pod=env.in_pod)
    workloads = Workloads(api)
    pods = KubePodDirectory(api, workloads)
    wiring = Wiring(settings, workloads, pods, env.gate_token, env.identity)
    batch = build_batch_limits(wiring, {s.spec.batch_limit.actuator for s in specs})
    actuators = Actuators(
        KubeReplicaActuator(workloads),
        batch,
        drainer_of(batch),
        KubePodMarker(api, settings.drain.deletion_cost),
    )
    elector = _elector(settings, env, api)
    leader = elector or AlwaysLeader()
    metrics = ControllerMetrics(leader.is_leader)
    source = make_source(settings, env, pods)
    events = None if settings.dry_run else KubeEventRecorder(api, settings.kubernetes.component, time.time)
    bindings = [
        Binding(slo, make_policy_for(slo, settings, env), source,
                make_fleet(slo, actuators, metrics, dry_run=settings.dry_run, drain=settings.drain.enabled))
        for slo in specs
    ]  # fmt: skip
    tracer, tracer_shutdown = make_tracer(settings)
    auditor = Auditor(metrics, events, tracer)
    in_status = None
    if status is not None:
        auditor = StatusAuditor(metrics, events, tracer, status, held, dry_run=settings.dry_run)
        if isinstance(status, StatusReader):
            resources = {h.slo.metadata.name: h.resource for h in held if h.resource is not None}
            in_status = StatusStateStore(status, resources)
            auditor.capacity_state = in_status.pending
    controller = Controller(bindings, auditor, leader=leader, backoff=settings.backoff,
                            permanent_retry=settings.permanent_retry,
                            api_budget=settings.kubernetes.api_budget,
                            restorer=make_restorer(settings, env, specs, in_status))  # fmt: skip
    closers = [c for c in (getattr(source, "close", None),) if c is not None]
    closers += [close for a in batch.values() if (close := getattr(a, "close", None)) is not None]
    if tracer_shutdown is not None:
        closers.append(tracer_shutdown)
    return Running(controller, metrics, elector, closers, REACHABILITY.reachable)


def _elector(settings: ControllerSettings, env: Environment, api: client.ApiClient) -> LeaderElector | None:
    le = settings.leader_election
    if not le.enabled:
        return None
    return LeaderElector(
        KubeLeaseLock(api, le.namespace, le.name), le.identity or env.identity,
        lease_duration=le.lease_duration, renew_deadline=le.renew_deadline, retry_period=le.retry_period,
        clock=time.monotonic, wall=time.time,
    )  # fmt: skip


def make_tracer(settings: ControllerSettings) -> tuple[Any, Callable[[], None] | None]:
    """A tracer exporting over OTLP/HTTP when an endpoint is configured (and its shutdown, which
    flushes the last spans); a no-op tracer otherwise."""
    from opentelemetry import trace

    if not settings.otlp_endpoint:
        return trace.NoOpTracer(), None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "fleetslo-controller"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{settings.otlp_endpoint}/v1/traces"))
    )
    return provider.get_tracer("fleetslo.controller"), provider.shutdown


# --------------------------------------------------------------------------------------------
# running: scheduler, election thread, health and metrics endpoints
# --------------------------------------------------------------------------------------------


class Service:
    """A built controller, running: ``start()``, then ``stop()`` (or ``serve(stop_event)``)."""

    def __init__(
        self, running: Running, settings: ControllerSettings, wall: Callable[[], float] = time.time
    ) -> None:
        self.running, self.settings, self.wall = running, settings, wall
        self.heartbeat = Heartbeat(list(running.controller.bindings))
        self.server = http_server(settings, running.metrics, self.heartbeat, Health.of(settings),
                                   running.api_reachable)  # fmt: skip
        self.scheduler = _scheduler(running.controller, self.heartbeat, settings.interval, wall)
        self._election_stop = threading.Event()
        self._election: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> Service:
        threading.Thread(target=self.server.serve_forever, name="fleetslo-http", daemon=True).start()
        if self.running.elector is not None:
            self._election = threading.Thread(
                target=self.running.elector.run,
                args=(self._election_stop,),
                name="fleetslo-lease",
                daemon=True,
            )
            self._election.start()
        self.scheduler.start()
        log.info("controller running: %d target(s), serving on port %d", len(self.heartbeat.names), self.port)
        return self

    def stop(self) -> None:
        """Stop ticking (waiting for running reconciles), release the lease, close everything."""
        self.scheduler.shutdown(wait=True)
        self._election_stop.set()
        if self._election is not None:
            self._election.join(timeout=15)  # the elector releases the lease on its way out
        self.server.shutdown()
        self.server.server_close()
        for close in self.running.closers:
            close()

    def serve(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set."""
        self.start()
        try:
            stop.wait()
        finally:
            self.stop()


def _scheduler(controller: Controller, heartbeat: Heartbeat, interval: float,
               wall: Callable[[], float]) -> BackgroundScheduler:  # fmt: skip
    workers = max(1, min(16, len(controller.bindings)))
    scheduler = BackgroundScheduler(executors={"default": SchedulerPool(workers)}, timezone="UTC")
    for name in controller.bindings:

        def job(name: str = name) -> None:
            heartbeat.start(name)
            try:
                controller.tick_target(name, wall())
            finally:
                heartbeat.beat(name)

        # max_instances=1: never two reconciles of one target at once; coalesce: a late job runs once.
        scheduler.add_job(
            job, "interval", seconds=interval, id=name, max_instances=1, coalesce=True,
            misfire_grace_time=max(1, int(interval)), next_run_time=datetime.now(UTC),
        )  # fmt: skip
    return scheduler
