"""``fleetslo run`` without Kubernetes: the same controller — policy, direct source, gate actuator,
drain, audit — over ``Static`` targets (replicas at fixed addresses, never scaled) and ``Local``
targets (replicas as local processes from a command template, scaled by starting and stopping them).

Each target gets its own fleet object, source and gate actuator; nothing here talks to a cluster,
so there is no leader election and no Kubernetes Event (the audit log and metrics remain). What the
policy learned is kept in the state file (``Environment.state_file``) and resumed at the next start.
Composition only: the parts are ``fleetslo.control.static`` and ``fleetslo.control.local``.
"""

from __future__ import annotations

import logging
import secrets
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fleetslo.control.actuators.gate import GateActuator
from fleetslo.control.audit import Auditor
from fleetslo.control.instruments import ControllerMetrics
from fleetslo.control.leader import AlwaysLeader
from fleetslo.control.local.template import CommandRecipe, TemplateFleet
from fleetslo.control.loop import Binding, Controller
from fleetslo.control.service import (
    Actuators,
    Environment,
    Running,
    make_fleet,
    make_policy_for,
    make_restorer,
    make_tracer,
)
from fleetslo.control.settings import ControllerSettings
from fleetslo.control.sources.direct import DirectSource
from fleetslo.control.static import StaticFleet
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import STANDALONE_KINDS, BatchActuator, FleetSLO, StandaloneKind
from fleetslo.policy.registry import check_options

log = logging.getLogger("fleetslo.run")


def is_standalone(specs: Sequence[FleetSLO]) -> bool:
    """True when every target is Static or Local; a mix with Kubernetes targets is an error."""
    kinds = {s.spec.target.kind in STANDALONE_KINDS for s in specs}
    if kinds == {True, False}:
        raise ConfigError("FleetSLOs: Static/Local targets and Kubernetes targets need separate controllers")
    return kinds == {True}


def build_standalone(
    settings: ControllerSettings,
    specs: Sequence[FleetSLO],
    env: Environment,
    *,
    log_dir: Path | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Running:
    """Every part of a controller for Static and Local ``specs``; Local fleets are started (their
    ``warm`` replicas healthy) before this returns, and stopped by the returned closers."""
    check_options(settings.policy, settings.policy_options)
    metrics = ControllerMetrics()
    closers: list[Callable[[], None]] = []
    bindings = []
    try:
        for slo in specs:
            fleet, token = _fleet(slo, settings, env, log_dir=log_dir, clock=clock, closers=closers)
            uses_gate = slo.spec.batch_limit.actuator is BatchActuator.GATE
            gate = _gate(fleet, token, settings) if (uses_gate or settings.drain.enabled) and token else None
            if uses_gate and gate is None:
                raise ConfigError(f"{slo.metadata.name}: batch_limit.actuator gate needs gate.token_file")
            if gate is not None:
                closers.append(gate.close)
            source = DirectSource(fleet, url=fleet.sidecar_url, interval=settings.interval,
                                  timeout=settings.source.direct.timeout, gpu_utilization=False)  # fmt: skip
            closers.append(source.close)
            # make_fleet takes the gate as the batch knob only when the spec says so; drains always.
            actuators = Actuators(fleet, {BatchActuator.GATE: gate} if gate else {}, gate, marker=fleet)
            fleet_actuator = make_fleet(slo, actuators, metrics, dry_run=settings.dry_run,
                                        drain=settings.drain.enabled and gate is not None)  # fmt: skip
            policy = make_policy_for(slo, settings, env)
            bindings.append(Binding(slo, policy, source, fleet_actuator))
    except BaseException:
        for close in reversed(closers):
            close()
        raise
    tracer, tracer_shutdown = make_tracer(settings)
    if tracer_shutdown is not None:
        closers.append(tracer_shutdown)
    controller = Controller(bindings, Auditor(metrics, None, tracer), leader=AlwaysLeader(),
                            backoff=settings.backoff, permanent_retry=settings.permanent_retry,
                            restorer=make_restorer(settings, env, specs, None))  # fmt: skip
    return Running(controller, metrics, None, list(reversed(closers)))


def _fleet(
    slo: FleetSLO,
    settings: ControllerSettings,
    env: Environment,
    *,
    log_dir: Path | None,
    clock: Callable[[], float],
    closers: list[Callable[[], None]],
) -> tuple[Any, str | None]:
    target = slo.spec.target
    if target.kind is StandaloneKind.STATIC:
        fleet = StaticFleet(target.endpoints, timeout=settings.source.direct.timeout)
        closers.append(fleet.close)
        return fleet, env.gate_token
    assert target.local is not None  # the spec's validator guarantees it for kind Local
    workdir = target.local.workdir
    folder = (
        Path(workdir)
        if workdir
        else log_dir or Path(tempfile.mkdtemp(prefix=f"fleetslo-{slo.metadata.name}-"))
    )
    folder.mkdir(parents=True, exist_ok=True)
    # Local sidecars are ours: without a configured token, they share a fresh one with this process.
    token = env.gate_token or secrets.token_urlsafe(24)
    token_file = folder / "gate-token"
    token_file.write_text(token + "\n", encoding="utf-8")
    token_file.chmod(0o600)
    recipe = CommandRecipe(
        target.local, target.model_name, token_file, folder,
        slo_ttft_s=slo.spec.objectives.ttft.threshold, slo_tpot_s=slo.spec.objectives.tpot.threshold,
        max_inflight=slo.spec.batch_limit.max,
    )  # fmt: skip
    local = TemplateFleet(target, recipe, clock)
    closers.append(local.close)
    log.info("%s: starting %d local replicas (logs in %s)", slo.metadata.name, target.local.warm, folder)
    local.start(target.local.warm, timeout=target.local.start_timeout)
    return local, token


def _gate(fleet: Any, token: str, settings: ControllerSettings) -> GateActuator:
    g = settings.gate
    return GateActuator(
        fleet, token, admin_url=fleet.admin_url, timeout=g.timeout, drain_timeout=g.drain_timeout
    )
