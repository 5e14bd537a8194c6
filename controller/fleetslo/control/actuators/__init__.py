"""Actuators: apply a decision to a target (Kubernetes scale, gate limits, engine args, local processes)."""
