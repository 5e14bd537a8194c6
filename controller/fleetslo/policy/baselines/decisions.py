"""Turning a baseline's ``(replicas, reason, message)`` step into a ``Decision``.

Baselines only ever move the replica count: the batch limit in every decision is the one observed, so
the fleet keeps whatever limit it runs with. This module holds no policy logic.
"""

from __future__ import annotations

from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.policy.baselines.hpa import Step


def current_replicas(obs: Observation) -> int:
    """What the HPA calls ``currentReplicas``: the scale target's replicas, i.e. ready plus starting."""
    return obs.replicas.provisioned


def decision(step: Step, obs: Observation, policy: str) -> Decision:
    replicas, reason, message = step
    return Decision(replicas, obs.batch_limit, reason, f"{policy}: {message}" if message else policy)


def hold(obs: Observation, reason: Reason, message: str, policy: str) -> Decision:
    """Keep the current count: the answer to missing or unusable data (never a scale-down)."""
    return decision(Step(current_replicas(obs), reason, message), obs, policy)
