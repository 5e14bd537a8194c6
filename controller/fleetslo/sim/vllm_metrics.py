"""The metrics one simulated replica exposes, shaped exactly like vLLM's ``/metrics``.

Cumulative counters and histograms with vLLM's default bucket bounds (``vllm/v1/metrics/buckets.py``,
0.32/0.33; see research/vllm.md §1.3) or custom ones, plus the running/waiting/KV gauges, turned
into an ``EngineSnapshot`` on demand. A policy under test therefore sees the same bucket
quantization a real fleet gives it, through the same window math.

Recording is on the simulator's hot path, so histograms keep plain per-bucket counts and only
build immutable ``BucketHistogram`` values when a snapshot is taken. This module records; it
must not decide anything or know about the fleet.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate

from fleetslo.core import conventions as cv
from fleetslo.core.histogram import BucketHistogram
from fleetslo.core.model import EngineSnapshot

TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

#: vLLM's bucket family of each histogram (the keys ``--custom-histogram-buckets`` accepts).
BUCKET_FAMILY: Mapping[str, str] = {
    cv.Histogram.TTFT: "time_to_first_token",
    cv.Histogram.ITL: "inter_token_latency",
    cv.Histogram.TPOT: "inter_token_latency",
    cv.Histogram.E2E: "request_latency",
    cv.Histogram.QUEUE: "request_latency",
    cv.Histogram.PREFILL: "request_latency",
    cv.Histogram.DECODE: "request_latency",
    cv.Histogram.INFERENCE: "request_latency",
}
DEFAULT_BUCKETS: Mapping[str, tuple[float, ...]] = {
    "time_to_first_token": TTFT_BUCKETS,
    "inter_token_latency": ITL_BUCKETS,
    "request_latency": REQUEST_LATENCY_BUCKETS,
}

#: vLLM's ``request_tokens`` layout up to a 128k context: the 1-2-5 series.
LENGTH_BUCKETS: tuple[float, ...] = tuple(
    float(m * 10**e) for e in range(6) for m in (1, 2, 5) if m * 10**e <= 131_072
)

ENGINE = "0"  # one engine core per replica: the ``engine`` label vLLM gives data-parallel rank 0


class Hist:
    """A mutable histogram: per-bucket (not cumulative) counts; the last slot is ``+Inf``."""

    __slots__ = ("_bounds_inf", "bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self._bounds_inf = (*self.bounds, math.inf)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # ``le`` buckets: a value equal to a bound belongs to that bound's bucket.
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def observe_linear(self, first: float, step: float, n: int, weight: int) -> None:
        """``weight`` observations of each of ``first + step·i`` for ``i`` in ``0..n-1``.

        A run of identical decode steps gives every running sequence one inter-token gap per
        step, and the gaps grow linearly as the KV cache grows; counting them arithmetically
        keeps a run of n steps O(buckets crossed) instead of O(n·batch).
        """
        if n <= 0 or weight <= 0:
            return
        last = first + step * (n - 1)
        self.sum += weight * (n * first + step * n * (n - 1) / 2)
        lo = bisect_left(self.bounds, first)
        if step <= 0 or lo == bisect_left(self.bounds, last):
            self.counts[lo] += n * weight
            return
        done = 0
        for b in range(lo, len(self.bounds)):
            upto = _count_at_or_below(first, step, n, self.bounds[b])
            if upto > done:
                self.counts[b] += (upto - done) * weight
                done = upto
            if done >= n:
                return
        self.counts[-1] += (n - done) * weight

    def cumulative(self) -> BucketHistogram:
        # accumulate in C (whole numbers, so the same floats as a running sum): once per scrape
        # per histogram per replica, which adds up on a fleet of hundreds
        counts = tuple(map(float, accumulate(self.counts)))
        return BucketHistogram(self._bounds_inf, counts, self.sum)


def _count_at_or_below(first: float, step: float, n: int, bound: float) -> int:
    """How many of ``first + step·i`` (``i < n``, ``step > 0``) are ``<= bound``, as floats compute them."""
    k = min(n, max(0, math.floor((bound - first) / step) + 1))
    while k > 0 and first + step * (k - 1) > bound:
        k -= 1
    while k < n and first + step * k <= bound:
        k += 1
    return k


class EngineMetrics:
    """Everything one replica's ``/metrics`` page would show, kept cumulatively."""

    __slots__ = (
        "decode", "e2e", "generation_tokens", "inference", "itl", "kv_usage", "model_name", "output_len",
        "preemptions", "prefill", "prompt_len", "prompt_tokens", "queue", "running", "success", "tpot",
        "ttft", "waiting",
    )  # fmt: skip

    def __init__(self, model_name: str, buckets: Mapping[str, Sequence[float]] | None = None) -> None:
        families = {**DEFAULT_BUCKETS, **(buckets or {})}
        unknown = set(buckets or {}) - set(DEFAULT_BUCKETS)
        if unknown:
            raise ValueError(f"unknown bucket families: {sorted(unknown)}")

        def make(name: str) -> Hist:
            return Hist(families[BUCKET_FAMILY[name]])

        self.model_name = model_name
        self.ttft, self.itl, self.tpot = (
            make(cv.Histogram.TTFT),
            make(cv.Histogram.ITL),
            make(cv.Histogram.TPOT),
        )
        self.e2e, self.queue = make(cv.Histogram.E2E), make(cv.Histogram.QUEUE)
        self.prefill, self.decode = make(cv.Histogram.PREFILL), make(cv.Histogram.DECODE)
        self.inference = make(cv.Histogram.INFERENCE)
        # vLLM's request_prompt_tokens / request_generation_tokens (1-2-5 token buckets).
        self.prompt_len, self.output_len = Hist(LENGTH_BUCKETS), Hist(LENGTH_BUCKETS)
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.success = 0
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0

    def histograms(self) -> dict[str, Hist]:
        return {
            cv.Histogram.TTFT: self.ttft, cv.Histogram.ITL: self.itl, cv.Histogram.TPOT: self.tpot,
            cv.Histogram.E2E: self.e2e, cv.Histogram.QUEUE: self.queue, cv.Histogram.PREFILL: self.prefill,
            cv.Histogram.DECODE: self.decode, cv.Histogram.INFERENCE: self.inference,
        }  # fmt: skip

    def snapshot(self, histograms: Iterable[str] | None = None) -> EngineSnapshot:
        """The page as a scrape would parse it at this instant (one engine, label ``"0"``).

        ``histograms`` limits which histogram families are included (all by default).
        """
        key = (ENGINE, "")
        gauges: dict[str, dict[tuple[str, str], float]] = {
            cv.Gauge.RUNNING: {key: float(self.running)},
            cv.Gauge.WAITING: {key: float(self.waiting)},
            cv.Gauge.KV_CACHE_USAGE: {key: self.kv_usage},
        }
        counters: dict[str, dict[tuple[str, str], float]] = {
            cv.Counter.PROMPT_TOKENS: {key: float(self.prompt_tokens)},
            cv.Counter.GENERATION_TOKENS: {key: float(self.generation_tokens)},
            cv.Counter.PREEMPTIONS: {key: float(self.preemptions)},
            cv.Counter.REQUEST_SUCCESS: {(ENGINE, "stop"): float(self.success)},
        }
        everything = {
            **self.histograms(),
            cv.Histogram.PROMPT_LENGTH: self.prompt_len,
            cv.Histogram.OUTPUT_LENGTH: self.output_len,
        }
        names = everything if histograms is None else histograms
        families = {name: {ENGINE: everything[name].cumulative()} for name in names}
        return EngineSnapshot(self.model_name, gauges, counters, families)
