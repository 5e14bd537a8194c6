"""vLLM's metric families as the sim-server shows them: names, help texts, label values, buckets.

Copied from vLLM 0.32/0.33 (``vllm/v1/metrics/loggers.py``, ``buckets.py``; the captures in
``tests/fixtures/vllm`` are the reference a test compares against). Only families the engine model
can fill truthfully are listed: a count the model does not have (FLOPs estimates, tokens per engine
step) is left off the page rather than shown as a made-up number, while a count that is truly zero
here (prefix-cache hits, multimodal items, queue-limit rejections) is shown as zero, as vLLM shows it.

``RequestStats`` records the per-request histograms the engine model does not keep (prompt and
output lengths, ``max_tokens``, preemptions). Data and recording only; no I/O.
"""

from __future__ import annotations

from typing import Final

from fleetslo.sim.vllm_metrics import Hist

PREFIX: Final = "vllm:"

#: Gauges: name → help.
GAUGE_HELP: Final[dict[str, str]] = {
    "num_requests_running": "Number of requests in model execution batches.",
    "num_requests_waiting": "Number of requests waiting to be processed.",
    "num_requests_waiting_by_reason": (
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
        "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). "
        "Sum of all reasons equals vllm:num_requests_waiting."
    ),
    "engine_sleep_state": (
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
        "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."
    ),
    "kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
}

#: Counters (exposed with ``_total`` and a ``_created`` gauge): name → help.
COUNTER_HELP: Final[dict[str, str]] = {
    "prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "external_prefix_cache_queries": (
        "External prefix cache queries from KV connector cross-instance cache sharing, "
        "in terms of number of queried tokens."
    ),
    "external_prefix_cache_hits": (
        "External prefix cache hits from KV connector cross-instance cache sharing, "
        "in terms of number of cached tokens."
    ),
    "mm_cache_queries": "Multi-modal cache queries, in terms of number of queried items.",
    "mm_cache_hits": "Multi-modal cache hits, in terms of number of cached items.",
    "num_preemptions": "Cumulative number of preemption from the engine.",
    "prompt_tokens": "Number of prefill tokens processed.",
    "prompt_tokens_by_source": "Number of prompt tokens by source.",
    "prompt_tokens_cached": "Number of cached prompt tokens (local + external).",
    "prompt_tokens_cached_by_source": (
        "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded "
        "to DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at "
        "admission; sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits."
    ),
    "generation_tokens": "Number of generation tokens processed.",
    "request_success": "Count of successfully processed requests.",
    "admission_rejections": "Number of admission attempts rejected by a queue limit, by reason.",
}

#: Histograms: name → help.
HISTOGRAM_HELP: Final[dict[str, str]] = {
    "request_prompt_tokens": "Number of prefill tokens processed.",
    "request_generation_tokens": "Number of generation tokens processed.",
    "request_max_num_generation_tokens": "Histogram of maximum number of requested generation tokens.",
    "request_params_n": "Histogram of the n request parameter.",
    "request_params_max_tokens": "Histogram of the max_tokens request parameter.",
    "time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "request_time_per_output_token_seconds": "Histogram of time_per_output_token_seconds per request.",
    "e2e_request_latency_seconds": "Histogram of e2e request latency in seconds.",
    "request_queue_time_seconds": "Histogram of time spent in WAITING phase for request.",
    "request_inference_time_seconds": "Histogram of time spent in RUNNING phase for request.",
    "request_prefill_time_seconds": "Histogram of time spent in PREFILL phase for request.",
    "request_decode_time_seconds": "Histogram of time spent in DECODE phase for request.",
    "request_num_preemptions": "Histogram of the number of times a request was preempted.",
    "request_prefill_kv_computed_tokens": (
        "Histogram of new KV tokens computed during prefill (excluding cached tokens)."
    ),
}

CACHE_CONFIG_HELP: Final = "Information of the LLMEngine CacheConfig"

#: Sub-label values vLLM pre-creates at zero, by family.
WAITING_REASONS: Final = ("capacity", "deferred")
SLEEP_STATES: Final = ("awake", "weights_offloaded", "discard_all")
PROMPT_SOURCES: Final = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHE_TIERS: Final = ("device", "host", "p2p", "disk", "external_unspecified")
FINISHED_REASONS: Final = ("stop", "length", "abort", "error", "repetition")
REJECTION_REASONS: Final = ("max_num_queued_reqs", "max_num_queued_tokens")

PARAMS_N_BUCKETS: Final = (1.0, 2.0, 5.0, 10.0, 20.0)
PREEMPTION_BUCKETS: Final = (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0)


def request_token_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's ``request_tokens`` layout: the 1-2-5 series up to ``max_model_len``."""
    bounds: list[float] = []
    decade = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * decade
            if value > max_model_len:
                return tuple(bounds)
            bounds.append(float(value))
        decade *= 10


class RequestStats:
    """Per-request histograms recorded when a request finishes (what ``EngineMetrics`` lacks)."""

    def __init__(self, max_model_len: int) -> None:
        tokens = request_token_buckets(max_model_len)
        self.prompt_tokens = Hist(tokens)
        self.generation_tokens = Hist(tokens)
        self.max_tokens = Hist(tokens)
        self.params_n = Hist(PARAMS_N_BUCKETS)
        self.preemptions = Hist(PREEMPTION_BUCKETS)
        self.prefill_kv_computed = Hist(tokens)

    def record(self, input_tokens: int, output_tokens: int, max_tokens: int, preemptions: int) -> None:
        self.prompt_tokens.observe(input_tokens)
        self.generation_tokens.observe(output_tokens)
        self.max_tokens.observe(max_tokens)
        self.params_n.observe(1)
        self.preemptions.observe(preemptions)
        # Without a prefix cache every prompt token is computed at prefill.
        self.prefill_kv_computed.observe(input_tokens)

    def histograms(self) -> dict[str, Hist]:
        """By family name; ``request_max_num_generation_tokens`` and ``request_params_max_tokens``
        are the same number when ``n`` is 1."""
        return {
            "request_prompt_tokens": self.prompt_tokens,
            "request_generation_tokens": self.generation_tokens,
            "request_max_num_generation_tokens": self.max_tokens,
            "request_params_n": self.params_n,
            "request_params_max_tokens": self.max_tokens,
            "request_num_preemptions": self.preemptions,
            "request_prefill_kv_computed_tokens": self.prefill_kv_computed,
        }
