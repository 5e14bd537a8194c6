"""The decision the policy returns: the replica step, the batch limit, the p90s the model expects.

Pure: the chain's step, the observation, the policy's state and the spec in; a ``Decision`` out.
"""

from __future__ import annotations

import math

from fleetslo.core.model import Decision, Observation, Reason
from fleetslo.core.spec import FleetSLOSpec
from fleetslo.policy.fleetslo.limit import batch_limit
from fleetslo.policy.fleetslo.perf_model import Prediction
from fleetslo.policy.fleetslo.state import FleetSLOState
from fleetslo.policy.stages import Step


def decision(
    step: Step, obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, *, warming_up: bool
) -> Decision:
    """``step`` with the batch limit (none while the first window fills) and the p90s expected."""
    replicas, reason, message = step
    limit = None if warming_up else batch_limit(obs, state, spec)
    if replicas == obs.replicas.provisioned and limit is not None and limit != obs.batch_limit:
        tighter = obs.batch_limit is None or limit < obs.batch_limit
        reason = Reason.BATCH_LIMIT_TIGHTENED if tighter else Reason.BATCH_LIMIT_RELAXED
        message = f"{message}; batch limit {obs.batch_limit} -> {limit}"
    predicted = expected(obs, state, spec, replicas, limit)
    return Decision(
        replicas=replicas, batch_limit=limit if limit is not None else obs.batch_limit,
        reason=reason, message=f"fleetslo: {message}",
        predicted_ttft_p90=None if predicted is None else _finite(predicted.ttft_p90),
        predicted_tpot_p90=None if predicted is None else _finite(predicted.tpot_p90),
    )  # fmt: skip


def expected(
    obs: Observation, state: FleetSLOState, spec: FleetSLOSpec, replicas: int, limit: int | None
) -> Prediction | None:
    """The p90s the model expects at today's arrival rate on ``replicas`` (the next window's)."""
    arrival = obs.request_rate  # as the sizing reads it (``FleetSLOPolicy._plan``)
    if state.mix is None or not arrival or replicas <= 0:
        return None
    return state.model.predict(
        arrival / replicas, state.mix, limit or obs.batch_limit, spec.objectives.tpot.quantile
    )


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
