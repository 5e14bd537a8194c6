"""The ``fleetslo`` policy: two knobs (replicas, batch limit), feed-forward sizing, feedback, safe limits."""

from controller.policy.fleetslo.config import FleetSLOConfig
from controller.policy.fleetslo.policy import FleetSLOPolicy, FleetSLOState

__all__ = ["FleetSLOConfig", "FleetSLOPolicy", "FleetSLOState"]
