"""The request mix the performance model predicts for: prompt and output length distributions.

A distribution, not a mean: p90 TTFT is set by the long prompts and p90 TPOT by the short outputs
that live through a long prefill. Each length is kept as ``POINTS`` equally likely values (the
mid-quantiles 5 %, 15 %, …, 95 %), read off vLLM's ``request_prompt_tokens`` and
``request_generation_tokens`` histograms and rescaled so their mean is the exact one the token
counters give (buckets are coarse: 1-2-5 steps). Without the histograms the shape is assumed
lognormal with a coefficient of variation of 1 around the measured mean, and ``assumed`` says so.
A quantile over prompts (the p90 TTFT's) is read between the points, on the quantiles as measured
(``prompt_band``): the rescaling is for the means the load is made of.

Pure value type; ``to_dict``/``from_dict`` round-trip it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from fleetslo.core.histogram import BucketHistogram, quantile

POINTS = 10
#: The fewest lengths in ``prompt_band``: a quantile read between points to within a 40th of the requests.
BAND = 40
_PROBABILITIES = tuple((i + 0.5) / POINTS for i in range(POINTS))
#: Shape assumed without a length histogram (coefficient of variation of a lognormal).
_ASSUMED_CV = 1.0


@dataclass(frozen=True, slots=True)
class RequestMix:
    prompt: tuple[float, ...]
    output: tuple[float, ...]
    #: True when a shape was assumed rather than measured (no length histograms).
    assumed: bool = False
    #: What the prompt points were multiplied by to reach the exact mean (``_at_mean``): their
    #: quantiles are the points over it. Heavy tails make it above 1 (the points, mid-quantiles,
    #: leave out the longest prompts' share of the mean), and a quantile read off scaled points
    #: reads long by it (``prompt_band``).
    prompt_scale: float = 1.0

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

    def prompt_band(self, q: float) -> tuple[float, ...]:
        """The prompt lengths at ``band_size(q)`` equally likely probabilities (``banded``, over the
        points in order, unscaled): what a q-quantile over prompts reads between them (``perf_model``)."""
        return banded(sorted(p / self.prompt_scale for p in self.prompt), band_size(q))

    def blend(self, newer: RequestMix, weight: float) -> RequestMix:
        """``weight`` of ``newer`` point by point (exponential smoothing of the distribution)."""

        def mix(a: Sequence[float], b: Sequence[float]) -> tuple[float, ...]:
            return tuple(weight * y + (1 - weight) * x for x, y in zip(a, b, strict=True))

        scale = weight * newer.prompt_scale + (1 - weight) * self.prompt_scale
        return RequestMix(
            mix(self.prompt, newer.prompt), mix(self.output, newer.output), newer.assumed, scale
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": list(self.prompt), "output": list(self.output), "assumed": self.assumed,
            "prompt_scale": self.prompt_scale,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestMix:
        scale = float(data.get("prompt_scale", 1.0))
        scale = scale if math.isfinite(scale) and scale > 0 else 1.0
        return cls(tuple(data["prompt"]), tuple(data["output"]), bool(data.get("assumed", False)), scale)


def band_size(q: float) -> int:
    """Lengths in a band: at least ``BAND``, and where one is at hand, a count whose mid-quantiles
    put one exactly at ``q`` (45 for a p90), so a q-quantile of the band is read on a length, not
    where two slices meet (a quantile there jumps to the longer one)."""
    for size in range(BAND, 2 * BAND):
        if abs(size * q - 0.5 - round(size * q - 0.5)) < 1e-9:
            return size
    return BAND


def banded(points: Sequence[float], size: int) -> tuple[float, ...]:
    """Lengths at the ``size`` mid-quantiles ``(j + 0.5) / size``, read off the line through the
    neighbouring points (each at the mid-quantile of its own equal share) in (normal score, log
    length): exact for a lognormal, the shape of LLM prompt lengths, and monotone for any. Beyond
    the outer points it stays at them: two points say nothing of the tail past them (1 and 5,128
    tokens would extrapolate to millions), and no quantile up to the top point's moves.

    Why: each of the mix's points stands for a tenth of the requests, so a quantile read off the
    points jumps from one to the next. A p90 TTFT over prompts whose top tenth is long sat on the
    top point, their 95th percentile (drawn 248: a 13,952-token point where the 90th percentile
    is 8,600 tokens, 1.17 s of prefill for 0.72 s), and the queue's wait, which moves the
    requests around the 90th percentile past it, hardly moved that p90: the model's TTFT stayed
    flat in the fleet's size where the engine's rises (0.76 s on 96 replicas, 0.95 s on 29)."""
    if len(points) < 2 or size <= len(points):
        return tuple(points)
    logs = [math.log(max(p, 1.0)) for p in points]
    return tuple(math.exp(logs[a] + f * (logs[a + 1] - logs[a])) for a, f in _band_weights(len(points), size))


@functools.lru_cache(maxsize=16)
def _band_weights(n: int, size: int) -> tuple[tuple[int, float], ...]:
    """(left neighbour, share of the way to the right one in normal score) per banded length."""
    z = NormalDist()
    centres = [z.inv_cdf((i + 0.5) / n) for i in range(n)]
    weights = []
    for j in range(size):
        score = z.inv_cdf((j + 0.5) / size)
        a = min(max(sum(c <= score for c in centres) - 1, 0), n - 2)
        weights.append((a, min(max((score - centres[a]) / (centres[a + 1] - centres[a]), 0.0), 1.0)))
    return tuple(weights)


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
    read = _points(prompt_lengths, mean_prompt)
    output = _points(output_lengths, mean_output)
    prompt = read or _lognormal(mean_prompt)
    outputs = tuple(max(1.0, d) for d in (output or _lognormal(mean_output))[0])
    return RequestMix(prompt[0], outputs, read is None or output is None, prompt[1])


def from_lengths(prompts: Sequence[int], outputs: Sequence[int]) -> RequestMix | None:
    """The mix of known requests' lengths, as ``measured`` reads a window off exact histograms:
    each length at the mid-quantile points, rescaled to its exact mean (``None`` without one)."""
    if not prompts or not outputs:
        return None

    def points(values: Sequence[int]) -> tuple[tuple[float, ...], float] | None:
        ordered = sorted(values)
        last = len(ordered) - 1
        return _at_mean(
            [float(ordered[min(last, int(p * len(ordered)))]) for p in _PROBABILITIES],
            sum(values) / len(values),
        )

    prompt, output = points(prompts), points(outputs)
    if prompt is None or output is None:
        return None
    return RequestMix(prompt[0], tuple(max(1.0, d) for d in output[0]), prompt_scale=prompt[1])


def _points(h: BucketHistogram | None, mean: float) -> tuple[tuple[float, ...], float] | None:
    if h is None or h.count < POINTS:
        return None
    values = [quantile(p, h) for p in _PROBABILITIES]
    if any(v is None or not math.isfinite(v) or v < 0 for v in values):
        return None
    return _at_mean([float(v) for v in values if v is not None], mean)


def _at_mean(points: Sequence[float], mean: float) -> tuple[tuple[float, ...], float] | None:
    """``points`` scaled so that their mean is ``mean``, and the factor (``None`` where they sum to
    nothing)."""
    total = sum(points)
    if total <= 0:
        return None
    scale = mean * len(points) / total
    return tuple(p * scale for p in points), scale


def _lognormal(mean: float) -> tuple[tuple[float, ...], float]:
    sigma = math.sqrt(math.log(1 + _ASSUMED_CV**2))
    mu = math.log(mean) - sigma * sigma / 2
    z = NormalDist()
    scaled = _at_mean([math.exp(mu + sigma * z.inv_cdf(p)) for p in _PROBABILITIES], mean)
    assert scaled is not None  # exponentials sum to more than nothing
    return scaled
