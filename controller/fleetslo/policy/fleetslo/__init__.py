"""The ``fleetslo`` policy: two knobs (replicas, batch limit), feed-forward sizing, feedback, safe limits."""

from fleetslo.policy.fleetslo.config import FleetSLOConfig
from fleetslo.policy.fleetslo.policy import FleetSLOPolicy
from fleetslo.policy.fleetslo.state import FleetSLOState

__all__ = ["FleetSLOConfig", "FleetSLOPolicy", "FleetSLOState"]
