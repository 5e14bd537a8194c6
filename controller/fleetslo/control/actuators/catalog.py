"""The batch-limit actuators, one row each: the extension point for a new way to cap a replica's batch.

Adding one is its module (a ``BatchLimitActuator``, and a ``Drainer`` too if it can empty a replica
before removal), its ``BatchActuator`` value in the spec, and one row here. The controller builds
only the actuators its FleetSLOs name (``build_batch_limits``), ``make_fleet`` picks each target's
by its kind, and a test holds the spec's enum, this table and the chart's schema to one list.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from fleetslo.control.actuators.engine_args import EngineArgsActuator
from fleetslo.control.actuators.gate import GateActuator
from fleetslo.control.kube.workloads import Workloads
from fleetslo.control.ports import BatchLimitActuator, Drainer, PodDirectory
from fleetslo.control.settings import ControllerSettings
from fleetslo.core.errors import ConfigError
from fleetslo.core.spec import BatchActuator


@dataclass(frozen=True, slots=True)
class Wiring:
    """What a batch-limit actuator may be built from."""

    settings: ControllerSettings
    workloads: Workloads
    pods: PodDirectory
    gate_token: str | None
    identity: str


@dataclass(frozen=True, slots=True)
class BatchLimitEntry:
    kind: BatchActuator
    build: Callable[[Wiring], BatchLimitActuator]
    #: Whether the built actuator is also the ``Drainer`` (it can stop admission on a replica).
    drains: bool
    #: What it needs in the cluster, for people reading the table.
    needs: str


def make_gate(w: Wiring) -> GateActuator:
    """The gate actuator: live batch limit and drain through each pod's gate admin API."""
    if not w.gate_token:
        raise ConfigError("gate.token_file: required when a FleetSLO uses batch_limit.actuator: gate")
    g = w.settings.gate
    return GateActuator(w.pods, w.gate_token, admin_port=g.admin_port, timeout=g.timeout,
                        drain_timeout=g.drain_timeout, drain_ttl=g.drain_ttl,
                        owner=w.settings.leader_election.identity or w.identity)  # fmt: skip


def _engine_args(w: Wiring) -> EngineArgsActuator:
    return EngineArgsActuator(w.workloads, time.monotonic, **w.settings.engine_args.model_dump())


#: Every batch-limit actuator (``none``: the policy's limit is advisory, nothing applies it).
BATCH_LIMIT_ACTUATORS: tuple[BatchLimitEntry, ...] = (
    BatchLimitEntry(BatchActuator.GATE, make_gate, True,
                    "the sidecar's gate on every pod and its admin token (gate.token_file)"),
    BatchLimitEntry(BatchActuator.ENGINE_ARGS, _engine_args, False,
                    "patch on the workload: --max-num-seqs in its pod template (a rollout per change)"),
)  # fmt: skip


def build_batch_limits(
    wiring: Wiring, kinds: Collection[BatchActuator]
) -> dict[BatchActuator, BatchLimitActuator]:
    """The actuators of ``kinds`` (those the FleetSLOs name), built once and shared by every target."""
    return {e.kind: e.build(wiring) for e in BATCH_LIMIT_ACTUATORS if e.kind in kinds}


def drainer_of(batch: Mapping[BatchActuator, BatchLimitActuator]) -> Drainer | None:
    """The built actuator that also drains replicas, if any."""
    for entry in BATCH_LIMIT_ACTUATORS:
        actuator = batch.get(entry.kind)
        if entry.drains and actuator is not None:
            return actuator  # type: ignore[return-value]
    return None
