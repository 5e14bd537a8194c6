"""``ReplicaActuator`` on the Kubernetes scale subresource (Deployment, StatefulSet, LeaderWorkerSet).

``read`` takes desired/ready/starting/draining from the workload's spec and status; ``scale`` patches
``spec.replicas`` through ``/scale`` and writes nothing when the desired count is already what is
asked (Knative's "return early if desired == current"). API failures arrive already classified
(``fleetslo.control.kube.client.api_call``): the loop backs off on transient ones and stops hammering on
permanent ones. Deciding *how many* is the policy's job, never this module's.

A write is planned against a desired count (``expected``): if the workload's count is no longer
that one (someone scaled it meanwhile), ``scale`` raises ``Conflict`` without writing, and the
patch itself carries the ``resourceVersion`` of the read just before it, so a change that lands
between that read and the write is a 409 from the API server, never overwritten. The loop then
re-plans from a fresh read.
"""

from __future__ import annotations

from fleetslo.control.kube.workloads import Workloads, replica_counts, resource_version, where
from fleetslo.control.ports import ActuationResult, ScaleState
from fleetslo.core.errors import Conflict
from fleetslo.core.spec import Target


class KubeReplicaActuator:
    """Scales workloads through their scale subresource."""

    def __init__(self, workloads: Workloads) -> None:
        self.workloads = workloads

    def read(self, target: Target) -> ScaleState:
        desired, counts = replica_counts(self.workloads.get(target))
        return ScaleState(desired, counts)

    def scale(self, target: Target, replicas: int, *, expected: int | None = None) -> ActuationResult:
        # Read right before writing: the no-op check must compare with the API's current value,
        # not with one cached since the start of the tick (a person may have scaled meanwhile).
        obj = self.workloads.get(target)
        desired, _ = replica_counts(obj)
        if expected is not None and desired != expected:
            raise Conflict(
                f"{where(target)} was scaled from {expected} to {desired} replicas since the decision "
                f"to write {replicas}: not written, re-planning"
            )
        if desired == replicas:
            return ActuationResult(False, f"{where(target)} already has {replicas} replicas")
        self.workloads.scale(target, replicas, resource_version(obj))
        return ActuationResult(True, f"scaled {where(target)} from {desired} to {replicas} replicas")
