"""The FleetSLO spec: the version the code is written against (``v1``), re-exported."""

from fleetslo.core.spec.v1 import (
    RESOURCE_API_VERSION,
    Availability,
    BatchActuator,
    BatchLimit,
    Cost,
    FleetSLO,
    FleetSLOSpec,
    Metadata,
    Mode,
    Objective,
    Objectives,
    ReplicaActuatorKind,
    Replicas,
    Target,
    TargetKind,
    load_fleetslo_documents,
)

__all__ = [
    "RESOURCE_API_VERSION",
    "Availability",
    "BatchActuator",
    "BatchLimit",
    "Cost",
    "FleetSLO",
    "FleetSLOSpec",
    "Metadata",
    "Mode",
    "Objective",
    "Objectives",
    "ReplicaActuatorKind",
    "Replicas",
    "Target",
    "TargetKind",
    "load_fleetslo_documents",
]
