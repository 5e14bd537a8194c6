"""What one engine step costs: the coefficients the performance model is built on.

vLLM runs a replica in steps. A step gives every decoding sequence one token and spends the rest
of ``max_num_batched_tokens`` on prefill chunks; it costs a fixed part (weights read once, launch,
sync), a part per sequence in it, a part per prefill token, a part per KV token its decoders read,
and the quadratic part of prefill attention (research/traces_perf.md §2.5; the simulator's engine
uses exactly these terms, ``sim/profile.py``). ``StepCost`` carries them as plain numbers so the
pure policy never imports the simulator: a packaged profile or a ``fleetslo profile`` file is turned
into one by the caller, and without either the policy starts from ``CONSERVATIVE_PRIOR`` and says so.

Pure value type; ``to_dict``/``from_dict`` round-trip it for the persisted model state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class StepCost:
    """Seconds per step and per unit of work in it; ``source`` says where they came from."""

    overhead_s: float
    per_seq_s: float
    per_prefill_token_s: float
    per_kv_token_s: float
    per_attention_token2_s: float = 0.0
    max_num_seqs: int = 1024
    max_batched_tokens: int = 8192
    source: str = "conservative prior"

    def __post_init__(self) -> None:
        for name in ("overhead_s", "per_prefill_token_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"step cost {name} must be > 0, got {getattr(self, name)!r}")
        for name in ("per_seq_s", "per_kv_token_s", "per_attention_token2_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"step cost {name} must be >= 0, got {getattr(self, name)!r}")
        if self.max_num_seqs < 1 or self.max_batched_tokens < 1:
            raise ValueError("step cost max_num_seqs and max_batched_tokens must be >= 1")

    def scaled(self, speed: float) -> StepCost:
        """Every time coefficient × ``speed`` (> 1: the engine is slower than these numbers say)."""
        return replace(
            self,
            overhead_s=self.overhead_s * speed,
            per_seq_s=self.per_seq_s * speed,
            per_prefill_token_s=self.per_prefill_token_s * speed,
            per_kv_token_s=self.per_kv_token_s * speed,
            per_attention_token2_s=self.per_attention_token2_s * speed,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepCost:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


#: Without a profile: a replica assumed about twice as slow per step as the slowest packaged one
#: (a large MoE model at TP4), so the first fleet is too big rather than too small; the learned
#: speed (``perf_model.PerformanceModel.speed``) brings it to what the fleet shows within minutes.
CONSERVATIVE_PRIOR = StepCost(
    overhead_s=0.05,
    per_seq_s=1.0e-4,
    per_prefill_token_s=1.5e-4,
    per_kv_token_s=1.5e-8,
    per_attention_token2_s=1.0e-9,
    max_num_seqs=256,
    max_batched_tokens=8192,
    source="conservative prior (no engine profile named)",
)
