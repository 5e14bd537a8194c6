"""What the plugin saw inside one vLLM engine: per-step batch composition and time, exact
per-request latencies, kept as running totals and served as fresh Prometheus families per scrape.

A *step* is one scheduler iteration: its prefill chunks (requests and tokens), its decoding
sequences, the KV tokens in use when it ran, and how long it took. The totals are what a capacity
model regresses on: over any window, mean step time = overhead + per_seq·seqs + per_prefill·tokens
+ per_kv·kv, and window means are differences of these running totals divided by the step count.
A *request* record is one finished request's own clock: queue, prefill, decode, TTFT and TPOT, exact
(no histogram buckets), as vLLM measured them — from when the engine client got the request, so
they exclude the API server's parsing, templating and tokenizing before that (see the package doc).

Pure bookkeeping and exposition: this module must not import vLLM (the plugin adapts vLLM's
objects to these records), so it is tested without an engine.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import IO

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

PREFIX = "fleetslo_engine"
#: Step-time buckets (seconds): CPU steps are milliseconds, GPU steps tens of milliseconds.
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56)
#: Per-request latency buckets (seconds) for TTFT and TPOT as the engine measured them.
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
#: Recent records kept for ``recent()`` (a bounded memory, whatever the uptime).
RECENT = 4096


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One engine step as the scheduler planned it and the engine timed it."""

    prefill_seqs: int
    prefill_tokens: int
    decode_seqs: int
    kv_tokens: int
    seconds: float


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request by the engine's clock (arrival at the engine client to last token)."""

    prompt_tokens: int
    output_tokens: int
    queue_s: float
    prefill_s: float
    decode_s: float
    ttft_s: float | None
    tpot_s: float | None
    preemptions: int
    finish_reason: str


class _Histogram:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        index = next((i for i, bound in enumerate(self.bounds) if value <= bound), len(self.bounds))
        self.counts[index] += 1
        self.total += value

    def family(self, name: str, help_text: str, labels: dict[str, str]) -> HistogramMetricFamily:
        cumulative, buckets = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(cumulative)))
        family = HistogramMetricFamily(name, help_text, labels=list(labels))
        family.add_metric(list(labels.values()), buckets, self.total)
        return family


class EngineBook(Collector):
    """Running totals of steps and requests for one engine, safe to feed and scrape concurrently."""

    def __init__(self, model_name: str, engine: str = "0", records: IO[str] | None = None) -> None:
        self.labels = {"model_name": model_name, "engine": engine}
        self._lock = threading.Lock()
        self._records = records
        self.steps = 0
        self.sums = {"seconds": 0.0, "prefill_seqs": 0.0, "prefill_tokens": 0.0}
        self.sums |= {"decode_seqs": 0.0, "kv_tokens": 0.0}
        self.requests = 0
        self.step_hist = _Histogram(STEP_BUCKETS)
        self.ttft_hist = _Histogram(LATENCY_BUCKETS)
        self.tpot_hist = _Histogram(LATENCY_BUCKETS)
        self.last_step: StepRecord | None = None
        self._recent_steps: deque[StepRecord] = deque(maxlen=RECENT)
        self._recent_requests: deque[RequestRecord] = deque(maxlen=RECENT)

    def add_step(self, step: StepRecord) -> None:
        with self._lock:
            self.steps += 1
            self.sums["seconds"] += step.seconds
            self.sums["prefill_seqs"] += step.prefill_seqs
            self.sums["prefill_tokens"] += step.prefill_tokens
            self.sums["decode_seqs"] += step.decode_seqs
            self.sums["kv_tokens"] += step.kv_tokens
            self.step_hist.observe(step.seconds)
            self.last_step = step
            self._recent_steps.append(step)
        self._write("step", step)

    def add_request(self, request: RequestRecord) -> None:
        with self._lock:
            self.requests += 1
            if request.ttft_s is not None:
                self.ttft_hist.observe(request.ttft_s)
            if request.tpot_s is not None:
                self.tpot_hist.observe(request.tpot_s)
            self._recent_requests.append(request)
        self._write("request", request)

    def recent(self) -> tuple[list[StepRecord], list[RequestRecord]]:
        with self._lock:
            return list(self._recent_steps), list(self._recent_requests)

    def _write(self, kind: str, record: StepRecord | RequestRecord) -> None:
        # One JSON object per line: the exact records, for offline fits beyond what totals allow.
        if self._records is not None:
            self._records.write(json.dumps({"kind": kind, **asdict(record)}) + "\n")
            self._records.flush()

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        with self._lock:
            yield from self._families()

    def _families(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        names, values = list(self.labels), list(self.labels.values())
        yield _counter(
            "steps", "Engine steps (scheduler iterations) that ran work.", names, values, self.steps
        )
        for key, help_text in _SUM_HELP.items():
            yield _counter(f"step_{key}", help_text, names, values, self.sums[key])
        yield _counter("requests", "Requests the engine finished.", names, values, self.requests)
        yield self.step_hist.family(f"{PREFIX}_step_duration_seconds", "Engine step time.", self.labels)
        yield self.ttft_hist.family(
            f"{PREFIX}_request_ttft_seconds",
            "Time to first token by the engine's clock (excludes the API server's work before it).",
            self.labels,
        )
        yield self.tpot_hist.family(
            f"{PREFIX}_request_tpot_seconds", "Mean time per output token of each request.", self.labels
        )
        if self.last_step is not None:
            gauge = GaugeMetricFamily(
                f"{PREFIX}_last_step_decode_seqs", "Decoding seqs, last step.", labels=names
            )
            gauge.add_metric(values, self.last_step.decode_seqs)
            yield gauge


_SUM_HELP = {
    "seconds": "Sum of step times (seconds).",
    "prefill_seqs": "Sum over steps of the requests with a prefill chunk in the step.",
    "prefill_tokens": "Sum over steps of the prompt tokens computed in the step.",
    "decode_seqs": "Sum over steps of the sequences decoding one token in the step.",
    "kv_tokens": "Sum over steps of the KV-cache tokens in use (block granularity).",
}


def _counter(
    name: str, help_text: str, labels: list[str], values: list[str], value: float
) -> CounterMetricFamily:
    family = CounterMetricFamily(f"{PREFIX}_{name}", help_text, labels=labels)
    family.add_metric(values, float(value))
    return family
