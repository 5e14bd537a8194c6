"""Every metric, label and rule name fleetslo reads or writes, in one place.

Dashboards, alerts, the exporter, the controller and the tests import names from here and never
spell them out themselves, so renaming a metric is one edit (and a failing drift test).

This module is data only: it must not import anything with I/O.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

# --------------------------------------------------------------------------------------------
# vLLM input names
# --------------------------------------------------------------------------------------------

#: Prefixes a vLLM metric may carry. ``vllm:`` is vLLM itself, ``ray_vllm:`` is Ray Serve's
#: re-export, and ``vllm_`` is what Prometheus 2.x stores when prometheus-client >= 0.23 escapes
#: the colon (client_python #1177). The sidecar asks for text 0.0.4, which keeps the colon, but a
#: capture taken through another path may carry any of them.
VLLM_PREFIXES: Final = ("vllm:", "ray_vllm:", "vllm_")

#: The data-parallel rank label; absent on vLLM <= 0.8 and on multiprocess pages.
ENGINE_LABEL: Final = "engine"
MODEL_LABEL: Final = "model_name"


class Gauge(StrEnum):
    """vLLM gauges fleetslo reads, by their current name (without prefix)."""

    RUNNING = "num_requests_running"
    WAITING = "num_requests_waiting"
    WAITING_BY_REASON = "num_requests_waiting_by_reason"
    KV_CACHE_USAGE = "kv_cache_usage_perc"


class Counter(StrEnum):
    """vLLM counters fleetslo reads, by their current name without prefix and without ``_total``."""

    PREEMPTIONS = "num_preemptions"
    PROMPT_TOKENS = "prompt_tokens"
    GENERATION_TOKENS = "generation_tokens"
    REQUEST_SUCCESS = "request_success"
    ADMISSION_REJECTIONS = "admission_rejections"
    PREFIX_CACHE_QUERIES = "prefix_cache_queries"
    PREFIX_CACHE_HITS = "prefix_cache_hits"


class Histogram(StrEnum):
    """vLLM latency histograms fleetslo reads, by their current name without prefix."""

    TTFT = "time_to_first_token_seconds"
    ITL = "inter_token_latency_seconds"
    TPOT = "request_time_per_output_token_seconds"
    E2E = "e2e_request_latency_seconds"
    QUEUE = "request_queue_time_seconds"
    PREFILL = "request_prefill_time_seconds"
    DECODE = "request_decode_time_seconds"
    INFERENCE = "request_inference_time_seconds"


#: The extra label that splits a family into sub-series we keep apart (``None``: none).
SUBLABEL: Final[dict[str, str]] = {
    Gauge.WAITING_BY_REASON: "reason",
    Counter.REQUEST_SUCCESS: "finished_reason",
    Counter.ADMISSION_REJECTIONS: "reason",
}

#: Legacy name -> current name. One table for every vLLM version we have seen.
#: ``time_per_output_token_seconds`` was the per-step ITL histogram before 0.11 (PR #24110), so it
#: maps to ITL, not to the per-request TPOT that replaced nothing.
VLLM_ALIASES: Final[dict[str, str]] = {
    "gpu_cache_usage_perc": Gauge.KV_CACHE_USAGE,
    "time_per_output_token_seconds": Histogram.ITL,
    "gpu_prefix_cache_queries": Counter.PREFIX_CACHE_QUERIES,
    "gpu_prefix_cache_hits": Counter.PREFIX_CACHE_HITS,
}

GAUGE_NAMES: Final = frozenset(g.value for g in Gauge)
COUNTER_NAMES: Final = frozenset(c.value for c in Counter)
HISTOGRAM_NAMES: Final = frozenset(h.value for h in Histogram)


def strip_vllm_prefix(name: str) -> str | None:
    """The name without its vLLM prefix, or ``None`` if it is not a vLLM name."""
    for prefix in VLLM_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return None


def canonical_vllm_name(base: str) -> str:
    """Resolve a legacy family name (no prefix, no suffix) to its current name."""
    return VLLM_ALIASES.get(base, base)


def promql_names(canonical: str, suffix: str = "") -> tuple[str, ...]:
    """Every stored name a canonical vLLM series may have in a TSDB, for PromQL ``__name__`` matches.

    Covers both prefixes as Prometheus stores them (``vllm:`` and the escaped ``vllm_``), Ray's
    prefix, and the legacy names that alias to ``canonical``.
    """
    bares = [canonical, *(old for old, new in VLLM_ALIASES.items() if new == canonical)]
    return tuple(f"{prefix}{bare}{suffix}" for bare in bares for prefix in VLLM_PREFIXES)


# --------------------------------------------------------------------------------------------
# fleetslo output names (contract: DESIGN.md "Metric names")
# --------------------------------------------------------------------------------------------

#: Quantiles the sidecar publishes, and their label values.
QUANTILES: Final = (0.5, 0.9, 0.99)

# sidecar, vLLM
ENGINE_UP: Final = "fleetslo_engine_up"
TTFT_SECONDS: Final = "fleetslo_ttft_seconds"
ITL_SECONDS: Final = "fleetslo_itl_seconds"
TPOT_SECONDS: Final = "fleetslo_tpot_seconds"
SLO_ATTAINMENT: Final = "fleetslo_slo_attainment_ratio"
SLO_THRESHOLD_SECONDS: Final = "fleetslo_slo_threshold_seconds"
SLO_THRESHOLD_EXACT: Final = "fleetslo_slo_threshold_bucket_exact"
REQUESTS_PER_SECOND: Final = "fleetslo_requests_per_second"
GENERATION_TOKENS_PER_SECOND: Final = "fleetslo_generation_tokens_per_second"
WINDOW_REQUESTS: Final = "fleetslo_window_requests"
REQUESTS_RUNNING: Final = "fleetslo_requests_running"
REQUESTS_WAITING: Final = "fleetslo_requests_waiting"
KV_CACHE_USAGE: Final = "fleetslo_kv_cache_usage_ratio"
ENGINE_SCRAPE_DURATION: Final = "fleetslo_engine_scrape_duration_seconds"
ENGINE_LAST_SUCCESS: Final = "fleetslo_engine_last_success_timestamp_seconds"
ENGINE_SCRAPE_ERRORS: Final = "fleetslo_engine_scrape_errors"  # counter family; exposed with _total
#: Samples of a good scrape rejected as impossible (NaN, negative, buckets going down, duplicates),
#: by ``reason``; counter family, exposed with _total.
ENGINE_REJECTED_SAMPLES: Final = "fleetslo_engine_rejected_samples"
#: What each ``source`` of the latency families measures (info family: ``fleetslo_latency_source_info``):
#: vLLM's TTFT starts when the engine gets the request, after the API server's work and any gate
#: queue; the gate's starts when the request reaches the gate.
LATENCY_SOURCE_INFO: Final = "fleetslo_latency_source"
#: Info families get ``_info`` appended by prometheus-client: this is ``fleetslo_exporter_info``.
EXPORTER_INFO: Final = "fleetslo_exporter"

# sidecar, GPU
GPU_UTILIZATION: Final = "fleetslo_gpu_utilization_ratio"
GPU_MEMORY_USED: Final = "fleetslo_gpu_memory_used_bytes"
GPU_MEMORY_TOTAL: Final = "fleetslo_gpu_memory_total_bytes"
GPU_POWER: Final = "fleetslo_gpu_power_watts"
GPU_ENERGY: Final = "fleetslo_gpu_energy_joules"  # counter family; exposed with _total
GPU_TEMPERATURE: Final = "fleetslo_gpu_temperature_celsius"
GPU_ECC_ERRORS: Final = "fleetslo_gpu_ecc_errors"  # counter family; exposed with _total
GPU_INFO: Final = "fleetslo_gpu_info"
GPU_COLLECTOR_UP: Final = "fleetslo_gpu_collector_up"
TOKENS_PER_JOULE: Final = "fleetslo_tokens_per_joule"
GPU_MEMORY_BANDWIDTH_UTILIZATION: Final = "fleetslo_gpu_memory_bandwidth_utilization_ratio"
GPU_POWER_LIMIT: Final = "fleetslo_gpu_power_limit_watts"
GPU_CLOCK: Final = "fleetslo_gpu_clock_hertz"
GPU_COLLECTOR_ERRORS: Final = "fleetslo_gpu_collector_errors"  # counter family; exposed with _total
GPU_SAMPLE_DURATION: Final = "fleetslo_gpu_sample_duration_seconds"
GPU_LAST_SAMPLE: Final = "fleetslo_gpu_last_sample_timestamp_seconds"
#: GPU time per 1,000 generated tokens over a window; ``basis`` says which GPU time (see LABEL_BASIS).
GPU_SECONDS_PER_1K_TOKENS: Final = "fleetslo_gpu_seconds_per_1k_tokens"

# gate
GATE_INFLIGHT: Final = "fleetslo_gate_inflight"
GATE_QUEUE_LENGTH: Final = "fleetslo_gate_queue_length"
GATE_LIMIT: Final = "fleetslo_gate_limit"
GATE_REJECTED: Final = "fleetslo_gate_rejected"  # counter family; exposed with _total
GATE_TTFT: Final = "fleetslo_gate_ttft_seconds"
GATE_TPOT: Final = "fleetslo_gate_tpot_seconds"
#: Arrival at the gate to the last byte, every admitted request (streamed or not); label ``stream``.
GATE_E2E: Final = "fleetslo_gate_e2e_seconds"
#: Admitted requests by how they ended (LABEL_OUTCOME); counter family, exposed with _total.
GATE_REQUESTS: Final = "fleetslo_gate_requests"
GATE_DRAINING: Final = "fleetslo_gate_draining"

# controller
CONTROLLER_DECISIONS: Final = "fleetslo_controller_decisions"  # counter family; exposed with _total
CONTROLLER_DESIRED_REPLICAS: Final = "fleetslo_controller_desired_replicas"
CONTROLLER_CURRENT_REPLICAS: Final = "fleetslo_controller_current_replicas"
CONTROLLER_BATCH_LIMIT: Final = "fleetslo_controller_batch_limit"
CONTROLLER_TICK_DURATION: Final = "fleetslo_controller_tick_duration_seconds"
CONTROLLER_ACTUATION_ERRORS: Final = "fleetslo_controller_actuation_errors"  # counter; _total
CONTROLLER_LEADER: Final = "fleetslo_controller_leader"
CONTROLLER_OBSERVE_ERRORS: Final = "fleetslo_controller_observe_errors"  # counter; _total
CONTROLLER_ACTUATION_DURATION: Final = "fleetslo_controller_actuation_duration_seconds"

# label keys
LABEL_QUANTILE: Final = "quantile"
LABEL_WINDOW: Final = "window"
LABEL_SLO: Final = "slo"
LABEL_REASON: Final = "reason"
LABEL_SOURCE: Final = "source"
LABEL_OUTCOME: Final = "outcome"
LABEL_STREAM: Final = "stream"
LABEL_GPU: Final = "gpu"
LABEL_UUID: Final = "uuid"
LABEL_GPU_MODEL: Final = "model"
LABEL_BACKEND: Final = "backend"
LABEL_SENSOR: Final = "sensor"
LABEL_SEVERITY: Final = "severity"
LABEL_CLOCK: Final = "clock"
#: ``allocated`` (GPUs x wall time: what is paid for) or ``busy`` (utilization x time: what was used).
LABEL_BASIS: Final = "basis"


class LatencySource(StrEnum):
    """Where a published latency quantile came from (the ``source`` label).

    ``vllm``: vLLM's own histograms (coarse buckets, time inside vLLM only). ``gate``: the
    admission gate's per-request measurements (fine buckets with the SLO thresholds as edges,
    time from arrival at the gate, so gate queueing is included).
    """

    VLLM = "vllm"
    GATE = "gate"


class SloName(StrEnum):
    """The latency objectives fleetslo knows, as they appear in the ``slo`` label."""

    TTFT = "ttft"
    TPOT = "tpot"


def quantile_label(q: float) -> str:
    """The ``quantile`` label value for ``q``, as Prometheus summaries spell it (``0.9``, not ``0.90``)."""
    return repr(float(q))


def window_label(seconds: float) -> str:
    """A compact, stable label for a window length: ``30s``, ``1m``, ``5m``, ``1h``, ``90s``."""
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    if whole % 3600 == 0:
        return f"{whole // 3600}h"
    if whole % 60 == 0:
        return f"{whole // 60}m"
    return f"{whole}s"


# --------------------------------------------------------------------------------------------
# Recording rules and alerts (``alerts/`` generates them; ``dashboards/`` and tests read them)
# --------------------------------------------------------------------------------------------

#: The ``target`` label of controller metrics and of the per-target recording rules: the
#: FleetSLO's ``metadata.name`` (unique per spec file, one document per scaled target).
LABEL_TARGET: Final = "target"
LABEL_NAMESPACE: Final = "namespace"
#: The scaled workload's name (with ``namespace``, what one SLO is about: two Deployments serving
#: one model are two SLOs). Series carry ``namespace`` and ``pod`` (Prometheus Operator's pod
#: monitors set both); a target's pods are matched by name (``pod_regex``).
LABEL_WORKLOAD: Final = "workload"
LABEL_POD: Final = "pod"
#: How each kind of workload names its pods (RE2, anchored by PromQL's ``=~``), by kind.
POD_NAME_PATTERNS: Final = {
    "Deployment": "{name}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}",
    "StatefulSet": "{name}-[0-9]+",
    # vLLM's API server (and its /metrics) runs on the group's leader, name-<group>; workers are
    # name-<group>-<index>. Both are matched: a worker that exports nothing costs nothing.
    "LeaderWorkerSet": "{name}-[0-9]+(-[0-9]+)?",
}
LABEL_MODE: Final = "mode"
#: Burn-rate alerts carry the two windows they compare, e.g. ``long_window="1h"``.
LABEL_LONG_WINDOW: Final = "long_window"
LABEL_SHORT_WINDOW: Final = "short_window"
#: Alert severities: ``page`` wakes someone, ``ticket`` waits for working hours.
SEVERITY_PAGE: Final = "page"
SEVERITY_TICKET: Final = "ticket"

# per SLO (labels namespace, workload, model_name, slo): the SLI over alerting windows and over the
# budget period, counted where the user is (the gate when present: its queue and rejections count)
RULE_SLO_REQUESTS_RATE5M: Final = "fleetslo:slo_requests:rate5m"
RULE_SLO_ERRORS_RATE5M: Final = "fleetslo:slo_errors:rate5m"
RULE_SLO_ERROR_RATIO_PERIOD: Final = "fleetslo:slo_error_ratio:period"
RULE_SLO_BUDGET_REMAINING: Final = "fleetslo:slo_error_budget_remaining:ratio"
# per SLO, constants from the spec, so dashboards draw the same lines the alerts use
RULE_SLO_OBJECTIVE: Final = "fleetslo:slo_objective:ratio"
RULE_SLO_ERROR_BUDGET: Final = "fleetslo:slo_error_budget:ratio"
RULE_SLO_THRESHOLD: Final = "fleetslo:slo_threshold:seconds"
#: The bucket edge the SLI actually counts at (the threshold, or the nearest edge below it).
RULE_SLO_THRESHOLD_BUCKET: Final = "fleetslo:slo_threshold_bucket:seconds"
RULE_SLO_PERIOD: Final = "fleetslo:slo_period:seconds"
# per target (labels target, model_name), constants from the spec
RULE_TARGET_INFO: Final = "fleetslo:target_info"  # value 1; labels namespace, workload, kind, mode
RULE_TARGET_REPLICAS_MIN: Final = "fleetslo:target_replicas_min"
RULE_TARGET_REPLICAS_MAX: Final = "fleetslo:target_replicas_max"
RULE_TARGET_REPLICA_COST: Final = "fleetslo:target_replica_cost_per_hour"
RULE_TARGET_GPUS_PER_REPLICA: Final = "fleetslo:target_gpus_per_replica"
# fleet-wide (label model_name), from vLLM's gauges under any stored name
RULE_VLLM_WAITING: Final = "fleetslo:vllm_requests_waiting:sum"
RULE_VLLM_RUNNING: Final = "fleetslo:vllm_requests_running:sum"


def pod_regex(kind: str, name: str) -> str:
    """The pods of workload ``name`` of ``kind`` (``Deployment``, ``StatefulSet``, ``LeaderWorkerSet``)."""
    return POD_NAME_PATTERNS[kind].format(name=re.escape(name))


def rule_slo_requests(window: str) -> str:
    """The recorded rate of requests an SLO counts in ``window`` (``5m`` is ``RULE_SLO_REQUESTS_RATE5M``)."""
    return f"fleetslo:slo_requests:rate{window}"


def rule_slo_good(window: str) -> str:
    """The recorded rate of requests within the threshold in ``window``."""
    return f"fleetslo:slo_good:rate{window}"


def rule_slo_error_ratio(window: str) -> str:
    """The recorded share of requests over the threshold in ``window`` (``5m``, ``1h``, ``3d``)."""
    return f"fleetslo:slo_error_ratio:rate{window}"


class AlertName(StrEnum):
    """Every alert fleetslo generates; the runbook in alerts/README.md has one section per name."""

    TTFT_BUDGET_BURN = "FleetsloTTFTErrorBudgetBurn"
    TPOT_BUDGET_BURN = "FleetsloTPOTErrorBudgetBurn"
    SLO_BUCKET_MISSING = "FleetsloSLOThresholdBucketMissing"
    MODEL_NOT_SCRAPED = "FleetsloModelNotScraped"
    VLLM_TARGET_DOWN = "FleetsloVllmTargetDown"
    ENGINE_DOWN = "FleetsloEngineDown"
    ENGINE_STUCK_STARTING = "FleetsloEngineStuckStarting"
    SIDECAR_DOWN = "FleetsloSidecarDown"
    ENGINE_METRICS_STALE = "FleetsloEngineMetricsStale"
    QUEUE_GROWING = "FleetsloQueueGrowing"
    KV_CACHE_NEAR_FULL = "FleetsloKVCacheNearFull"
    PREEMPTIONS = "FleetsloPreemptions"
    VLLM_ADMISSION_REJECTIONS = "FleetsloVllmAdmissionRejections"
    GATE_REJECTIONS = "FleetsloGateRejections"
    GPU_COLLECTOR_DOWN = "FleetsloGpuCollectorDown"
    GPU_LOST = "FleetsloGpuLost"
    GPU_TEMPERATURE_HIGH = "FleetsloGpuTemperatureHigh"
    GPU_ECC_UNCORRECTABLE = "FleetsloGpuEccUncorrectable"
    GPU_ECC_CORRECTABLE = "FleetsloGpuEccCorrectableRising"
    GPU_POWER_THROTTLING = "FleetsloGpuPowerThrottling"
    CONTROLLER_NO_LEADER = "FleetsloControllerNoLeader"
    CONTROLLER_STALE_METRICS = "FleetsloControllerStaleMetrics"
    CONTROLLER_ACTUATION_FAILING = "FleetsloControllerActuationFailing"
    PINNED_AT_MAX = "FleetsloPinnedAtMaxReplicasWhileBurning"


def promql_name_regex(canonical: str, suffix: str = "") -> str:
    """``promql_names`` as one ``__name__=~`` alternation (names hold no regex metacharacters)."""
    return "|".join(promql_names(canonical, suffix))
