"""``ReplicaActuator`` on the Kubernetes scale subresource (Deployment, StatefulSet, LeaderWorkerSet).

``read`` takes desired/ready/starting/draining from the workload's spec and status; ``scale`` patches
``spec.replicas`` through ``/scale`` and writes nothing when the desired count is already what is
asked (Knative's "return early if desired == current"). API failures arrive already classified
(``fleetslo.control.kube.client.api_call``): the loop backs off on transient ones and stops hammering on
permanent ones. Deciding *how many* is the policy's job, never this module's.
"""

from __future__ import annotations

from fleetslo.control.kube.workloads import Workloads, replica_counts, where
from fleetslo.control.ports import ActuationResult, ScaleState
from fleetslo.core.spec import Target


class KubeReplicaActuator:
    """Scales workloads through their scale subresource."""

    def __init__(self, workloads: Workloads) -> None:
        self.workloads = workloads

    def read(self, target: Target) -> ScaleState:
        desired, counts = replica_counts(self.workloads.get(target))
        return ScaleState(desired, counts)

    def scale(self, target: Target, replicas: int) -> ActuationResult:
        # Read right before writing: the no-op check must compare with the API's current value,
        # not with one cached since the start of the tick (a person may have scaled meanwhile).
        desired, _ = replica_counts(self.workloads.get(target))
        if desired == replicas:
            return ActuationResult(False, f"{where(target)} already has {replicas} replicas")
        self.workloads.scale(target, replicas)
        return ActuationResult(True, f"scaled {where(target)} from {desired} to {replicas} replicas")
