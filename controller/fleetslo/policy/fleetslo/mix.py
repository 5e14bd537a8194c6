"""The request mix the performance model predicts for: prompt and output length distributions.

A distribution, not a mean: p90 TTFT is set by the long prompts and p90 TPOT by the short outputs
that live through a long prefill. Each length is kept as ``POINTS`` equally likely values (the
mid-quantiles 5 %, 15 %, …, 95 %), read off vLLM's ``request_prompt_tokens`` and
``request_generation_tokens`` histograms and rescaled so their mean is the exact one the token
counters give (buckets are coarse: 1-2-5 steps). Without the histograms the shape is assumed
lognormal with a coefficient of variation of 1 around the measured mean, and ``assumed`` says so.

Pure value type; ``to_dict``/``from_dict`` round-trip it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from fleetslo.core.histogram import BucketHistogram, quantile

POINTS = 10
_PROBABILITIES = tuple((i + 0.5) / POINTS for i in range(POINTS))
#: Shape assumed without a length histogram (coefficient of variation of a lognormal).
_ASSUMED_CV = 1.0


@dataclass(frozen=True, slots=True)
class RequestMix:
    prompt: tuple[float, ...]
    output: tuple[float, ...]
    #: True when a shape was assumed rather than measured (no length histograms).
    assumed: bool = False

    def __post_init__(self) -> None:
        if not self.prompt or not self.output:
            raise ValueError("a request mix needs prompt and output points")
        # tuples whatever came in: a mix is a key of the model's memo (perf_model._predict)
        object.__setattr__(self, "prompt", tuple(self.prompt))
        object.__setattr__(self, "output", tuple(self.output))

    @property
    def mean_prompt(self) -> float:
        return sum(self.prompt) / len(self.prompt)

    @property
    def mean_output(self) -> float:
        return sum(self.output) / len(self.output)

    @property
    def tokens_per_request(self) -> float:
        return self.mean_prompt + self.mean_output

    def decode_context(self) -> float:
        """Mean context a decode step reads per sequence: prompt + half the output, token-weighted."""
        d2 = sum(d * d for d in self.output) / len(self.output)
        return self.mean_prompt + d2 / (2 * self.mean_output)

    def blend(self, newer: RequestMix, weight: float) -> RequestMix:
        """``weight`` of ``newer`` point by point (exponential smoothing of the distribution)."""

        def mix(a: Sequence[float], b: Sequence[float]) -> tuple[float, ...]:
            return tuple(weight * y + (1 - weight) * x for x, y in zip(a, b, strict=True))

        return RequestMix(mix(self.prompt, newer.prompt), mix(self.output, newer.output), newer.assumed)

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": list(self.prompt), "output": list(self.output), "assumed": self.assumed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestMix:
        return cls(tuple(data["prompt"]), tuple(data["output"]), bool(data.get("assumed", False)))


def measured(
    mean_prompt: float | None,
    mean_output: float | None,
    prompt_lengths: BucketHistogram | None,
    output_lengths: BucketHistogram | None,
) -> RequestMix | None:
    """The window's mix; ``None`` without both means (nothing to size by)."""
    if not mean_prompt or not mean_output or mean_prompt <= 0 or mean_output <= 0:
        return None
    if not (math.isfinite(mean_prompt) and math.isfinite(mean_output)):
        return None
    prompt = _points(prompt_lengths, mean_prompt)
    output = _points(output_lengths, mean_output)
    assumed = prompt is None or output is None
    return RequestMix(
        prompt or _lognormal(mean_prompt),
        tuple(max(1.0, d) for d in (output or _lognormal(mean_output))),
        assumed,
    )


def from_lengths(prompts: Sequence[int], outputs: Sequence[int]) -> RequestMix | None:
    """The mix of known requests' lengths, as ``measured`` reads a window off exact histograms:
    each length at the mid-quantile points, rescaled to its exact mean (``None`` without one)."""
    if not prompts or not outputs:
        return None

    def points(values: Sequence[int]) -> tuple[float, ...] | None:
        ordered = sorted(values)
        last = len(ordered) - 1
        return _at_mean(
            [float(ordered[min(last, int(p * len(ordered)))]) for p in _PROBABILITIES],
            sum(values) / len(values),
        )

    prompt, output = points(prompts), points(outputs)
    if prompt is None or output is None:
        return None
    return RequestMix(prompt, tuple(max(1.0, d) for d in output))


def _points(h: BucketHistogram | None, mean: float) -> tuple[float, ...] | None:
    if h is None or h.count < POINTS:
        return None
    values = [quantile(p, h) for p in _PROBABILITIES]
    if any(v is None or not math.isfinite(v) or v < 0 for v in values):
        return None
    return _at_mean([float(v) for v in values if v is not None], mean)


def _at_mean(points: Sequence[float], mean: float) -> tuple[float, ...] | None:
    """``points`` scaled so that their mean is ``mean`` (``None`` where they sum to nothing)."""
    total = sum(points)
    if total <= 0:
        return None
    return tuple(p * mean * len(points) / total for p in points)


def _lognormal(mean: float) -> tuple[float, ...]:
    sigma = math.sqrt(math.log(1 + _ASSUMED_CV**2))
    mu = math.log(mean) - sigma * sigma / 2
    z = NormalDist()
    raw = [math.exp(mu + sigma * z.inv_cdf(p)) for p in _PROBABILITIES]
    scale = mean * len(raw) / sum(raw)
    return tuple(r * scale for r in raw)
