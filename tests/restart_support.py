"""A fleet for restart tests: every replica behaves as the capacity model's own physics says an
engine with ``truth``'s step costs does, at a steady arrival rate and request mix.

The observations are what a whole, settled fleet reports (every signal the ``fleetslo`` policy
learns from), so a controller learns the engine from them as it would from a real one; what the
restart tests check is that a new controller starts from what the old one learned, not the model's
accuracy (the policy benchmarks measure that against the simulator's engine).
"""

from __future__ import annotations

import math

from fleetslo.core.model import Observation, Quantiles, ReplicaCounts
from fleetslo.core.spec import FleetSLO
from fleetslo.policy.fleetslo.mix import RequestMix, measured
from fleetslo.policy.fleetslo.perf_model import predict
from fleetslo.policy.fleetslo.physics import StepCost

#: An engine three times faster per step than the conservative prior assumes: a controller that
#: starts from the prior sizes the fleet about three times too large until it has learned this.
FAST_ENGINE = StepCost(
    overhead_s=0.0167, per_seq_s=3.3e-5, per_prefill_token_s=5.0e-5, per_kv_token_s=5.0e-9,
    per_attention_token2_s=3.3e-10, max_num_seqs=256, max_batched_tokens=8192, source="test truth",
)  # fmt: skip


class ModelFleet:
    """A ``Source`` whose replicas serve ``rate`` requests/s of ``mix`` as ``truth`` predicts."""

    def __init__(self, rate: float, truth: StepCost = FAST_ENGINE, mix: RequestMix | None = None) -> None:
        self.rate, self.truth = rate, truth
        self.mix = mix or measured(1500.0, 250.0, None, None)
        assert self.mix is not None

    def observe(
        self, slo: FleetSLO, replicas: ReplicaCounts, batch_limit: int | None, now: float
    ) -> Observation:
        ready = max(replicas.ready, 1)
        p = predict(self.truth, self.rate / ready, self.mix, batch_limit, slo.spec.objectives.tpot.quantile)
        served = p.served * ready
        return Observation(
            slo.metadata.name, now, slo.spec.objectives.observation_window, replicas,
            batch_limit=batch_limit, replicas_reporting=replicas.ready, data_age=2.0,
            ttft=Quantiles(p90=p.ttft_p90 if math.isfinite(p.ttft_p90) else None),
            tpot=Quantiles(p90=p.tpot_p90 if math.isfinite(p.tpot_p90) else None),
            request_rate=served, prompt_tokens_rate=served * self.mix.mean_prompt,
            generation_tokens_rate=served * self.mix.mean_output,
            running=p.batch * ready, waiting=0.0, kv_cache_usage=0.2,
        )  # fmt: skip
