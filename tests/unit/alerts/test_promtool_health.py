"""Every health and per-target alert, run by promtool on generated rules: it fires on the breach
it is for, at the minute its ``for:`` predicts, with the labels and rendered annotations, and it
stays quiet on the healthy series beside it (and, where it matters, on nothing at all).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fleetslo.core import conventions as cv
from fleetslo.generate.alerts.health_rules import health_group
from fleetslo.generate.alerts.rules import Alert
from fleetslo.generate.alerts.spec import target_spec
from fleetslo.generate.alerts.target_rules import target_group

from tests.unit.alerts.promtool_support import MODEL, POD, TARGET, expected, run_promtool, spec, write_rules

pytestmark = pytest.mark.integration
A = cv.AlertName
VLLM_A = {"job": "vllm", "instance": "a:8000"}
SIDECAR_A = {"job": "sidecar", "instance": "a:9400"}
GPU0 = {**SIDECAR_A, "gpu": "0", "uuid": "GPU-0", "model": "MI325X"}


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


@dataclass
class Case:
    """Input series and, per check minute, the (labels, value) of every firing alert."""

    alert: A
    description: str
    input: list[dict[str, str]]
    checks: list[tuple[int, list[tuple[dict[str, str], float]]]] = field(default_factory=list)


def fires(
    at: int, labels: dict[str, str], value: float
) -> list[tuple[int, list[tuple[dict[str, str], float]]]]:
    """Quiet one minute before ``at``, firing at ``at``."""
    return [(at - 1, []), (at, [(labels, value)])]


M = {cv.MODEL_LABEL: MODEL}
HEALTH_CASES = [
    Case(
        A.VLLM_TARGET_DOWN,
        "a vLLM target stops answering; one on the escaped name stays up",
        [
            series("up", VLLM_A, "1x10 0x10"),
            series("vllm:num_requests_running", {**VLLM_A, **M, "engine": "0"}, "3x10 stale"),
            series("up", {"job": "vllm", "instance": "b:8000"}, "1x21"),
            series("vllm_num_requests_running", {"job": "vllm", "instance": "b:8000", **M}, "2x21"),
        ],
        fires(13, {**VLLM_A, **M}, 0),
    ),
    Case(
        A.ENGINE_DOWN,
        "the sidecar reports its vLLM down after serving",
        [
            series("fleetslo_engine_up", {**SIDECAR_A, **M}, "1x5 0x10"),
            series("fleetslo_engine_last_success_timestamp_seconds", SIDECAR_A, "0+60x5 300x10"),
            series("fleetslo_engine_up", {"job": "sidecar", "instance": "b:9400", **M}, "1x15"),
            series(
                "fleetslo_engine_last_success_timestamp_seconds",
                {"job": "sidecar", "instance": "b:9400"},
                "0+60x15",
            ),
        ],
        fires(8, {**SIDECAR_A, **M}, 0),
    ),
    Case(
        A.ENGINE_DOWN,
        "a replica in its cold start (never served yet) does not page",
        [
            series("fleetslo_engine_up", {**SIDECAR_A, cv.MODEL_LABEL: ""}, "0x25"),
        ],
        [(10, []), (25, [])],
    ),
    Case(
        A.ENGINE_DOWN,
        "a sidecar that served, then lost vLLM before learning its model, names it as unknown",
        [
            series("fleetslo_engine_up", {**SIDECAR_A, cv.MODEL_LABEL: ""}, "1x5 0x10"),
            series("fleetslo_engine_last_success_timestamp_seconds", SIDECAR_A, "0+60x5 300x10"),
        ],
        fires(8, {**SIDECAR_A, cv.MODEL_LABEL: "(unknown model)"}, 0),
    ),
    Case(
        A.ENGINE_STUCK_STARTING,
        "vLLM never answers in 30 minutes; a replica that started in 6 minutes stays quiet",
        [
            series("fleetslo_engine_up", {**SIDECAR_A, **M}, "0x40"),
            series("fleetslo_engine_up", {"job": "sidecar", "instance": "b:9400", **M}, "0x6 1x34"),
            series(
                "fleetslo_engine_last_success_timestamp_seconds",
                {"job": "sidecar", "instance": "b:9400"},
                "_x6 360+60x34",
            ),
        ],
        fires(30, {**SIDECAR_A, **M}, 0),
    ),
    Case(
        A.SIDECAR_DOWN,
        "a sidecar target stops answering",
        [
            series("up", SIDECAR_A, "1x10 0x10"),
            series("fleetslo_engine_up", {**SIDECAR_A, **M}, "1x10 stale"),
        ],
        fires(16, {**SIDECAR_A, **M}, 0),
    ),
    Case(
        A.ENGINE_METRICS_STALE,
        "the sidecar's last successful read freezes at 10m",
        [
            series("fleetslo_engine_last_success_timestamp_seconds", SIDECAR_A, "0+60x10 600x20"),
        ],
        fires(18, SIDECAR_A, 18 * 60 - 600),
    ),
    Case(
        A.QUEUE_GROWING,
        "waiting grows past running",
        [
            series("vllm:num_requests_waiting", {**VLLM_A, **M, "engine": "0"}, "0+1x20"),
            series("vllm:num_requests_running", {**VLLM_A, **M, "engine": "0"}, "5x20"),
        ],
        fires(16, M, 16),
    ),
    Case(
        A.KV_CACHE_NEAR_FULL,
        "legacy gpu_cache_usage_perc at 97 %, another replica at 50 %",
        [
            series("vllm:gpu_cache_usage_perc", {**VLLM_A, **M, "engine": "0"}, "0.97x20"),
            series(
                "vllm:kv_cache_usage_perc",
                {"job": "vllm", "instance": "b:8000", **M, "engine": "0"},
                "0.5x20",
            ),
        ],
        fires(10, {**VLLM_A, **M}, 0.97),
    ),
    Case(
        A.PREEMPTIONS,
        "6 preemptions a minute",
        [
            series("vllm:num_preemptions_total", {**VLLM_A, **M, "engine": "0"}, "0+6x20"),
        ],
        fires(16, M, 0.1),
    ),
    Case(
        A.VLLM_ADMISSION_REJECTIONS,
        "vLLM's queue limit rejects 30 a minute",
        [
            series("vllm:admission_rejections_total", {**M, "reason": "max_num_queued_reqs"}, "0+30x20"),
        ],
        fires(6, {**M, "reason": "max_num_queued_reqs"}, 0.5),
    ),
    Case(
        A.GATE_REJECTIONS,
        "the gate rejects one a second",
        [
            series("fleetslo_gate_rejected_total", {**SIDECAR_A, "reason": "queue_full"}, "0+60x20"),
        ],
        fires(6, {**SIDECAR_A, "reason": "queue_full"}, 1),
    ),
    Case(
        A.GPU_COLLECTOR_DOWN,
        "GPU reads stop",
        [
            series("fleetslo_gpu_collector_up", {**SIDECAR_A, "backend": "amdsmi"}, "1x5 0x10"),
        ],
        fires(11, {**SIDECAR_A, "backend": "amdsmi"}, 0),
    ),
    Case(
        A.GPU_LOST,
        "GPU 1 disappears at 21m",
        [
            series("fleetslo_gpu_info", GPU0, "1x40"),
            series("fleetslo_gpu_info", {**GPU0, "gpu": "1", "uuid": "GPU-1"}, "1x20 stale"),
        ],
        fires(26, SIDECAR_A, 1),
    ),
    Case(
        A.GPU_TEMPERATURE_HIGH,
        "junction at 105 °C; edge at 70 °C",
        [
            series("fleetslo_gpu_temperature_celsius", {**GPU0, "sensor": "junction"}, "105x20"),
            series("fleetslo_gpu_temperature_celsius", {**GPU0, "sensor": "edge"}, "70x20"),
        ],
        fires(10, {**GPU0, "sensor": "junction"}, 105),
    ),
    Case(
        A.GPU_ECC_UNCORRECTABLE,
        "one uncorrectable error at 6m",
        [
            series("fleetslo_gpu_ecc_errors_total", {**GPU0, "severity": "uncorrectable"}, "0x5 1x10"),
        ],
        fires(6, GPU0, 1),
    ),
    Case(
        A.GPU_ECC_CORRECTABLE,
        "5 correctable errors a minute",
        [
            series("fleetslo_gpu_ecc_errors_total", {**GPU0, "severity": "correctable"}, "0+5x30"),
        ],
        fires(21, GPU0, 105),
    ),
    Case(
        A.GPU_POWER_THROTTLING,
        "745 W of a 750 W cap",
        [
            series("fleetslo_gpu_power_watts", GPU0, "745x20"),
            series("fleetslo_gpu_power_limit_watts", GPU0, "750x20"),
        ],
        fires(15, GPU0, 745 / 750),
    ),
    Case(
        A.CONTROLLER_NO_LEADER,
        "the leader steps down at 11m",
        [
            series("fleetslo_controller_leader", {"job": "controller", "instance": "c:9000"}, "1x10 0x10"),
        ],
        fires(16, {}, 1),
    ),
    Case(
        A.CONTROLLER_NO_LEADER,
        "no controller was ever deployed",
        [
            series("up", VLLM_A, "1x30"),
        ],
        [(30, [])],
    ),
]

T = {cv.LABEL_TARGET: TARGET}
TTFT = "vllm:time_to_first_token_seconds"
MP = {**M, **POD}
TARGET_CASES = [
    Case(A.MODEL_NOT_SCRAPED, "no vLLM series for the model", [series("up", VLLM_A, "1x10")], fires(5, M, 1)),
    Case(
        A.MODEL_NOT_SCRAPED,
        "the model is served (under the escaped name)",
        [
            series("vllm_num_requests_running", {**VLLM_A, **MP}, "1x10"),
        ],
        [(10, [])],
    ),
    Case(
        A.MODEL_NOT_SCRAPED,
        "the model is served, but only by another Deployment: this target is not",
        [
            series(
                "vllm:num_requests_running",
                {**VLLM_A, **M, "namespace": "llm", "pod": "other-6c8b7f5d4-q9w8e"},
                "1x10",
            ),
        ],
        fires(5, M, 1),
    ),
    Case(
        A.PINNED_AT_MAX,
        "desired at max (4) while half the requests are slow",
        [
            series("fleetslo_controller_desired_replicas", T, "4x20"),
            series(f"{TTFT}_count", MP, "0+100x20"),
            series(f"{TTFT}_bucket", {**MP, "le": "0.5"}, "0+50x20"),
        ],
        fires(16, {}, 4),
    ),
    Case(
        A.PINNED_AT_MAX,
        "below max while burning",
        [
            series("fleetslo_controller_desired_replicas", T, "3x20"),
            series(f"{TTFT}_count", MP, "0+100x20"),
            series(f"{TTFT}_bucket", {**MP, "le": "0.5"}, "0+50x20"),
        ],
        [(20, [])],
    ),
    Case(
        A.CONTROLLER_ACTUATION_FAILING,
        "scale calls fail 6 times a minute",
        [
            series("fleetslo_controller_actuation_errors_total", {**T, "kind": "scale"}, "0+6x20"),
        ],
        fires(16, {**T, "kind": "scale"}, 0.1),
    ),
    Case(
        A.CONTROLLER_STALE_METRICS,
        "two thirds of decisions hold for stale data",
        [
            series("fleetslo_controller_decisions_total", {**T, "reason": "HoldStaleData"}, "0+4x20"),
            series("fleetslo_controller_decisions_total", {**T, "reason": "Steady"}, "0+2x20"),
        ],
        fires(11, T, 2 / 3),
    ),
    Case(
        A.CONTROLLER_STALE_METRICS,
        "half the decisions hold: not more than half",
        [
            series("fleetslo_controller_decisions_total", {**T, "reason": "HoldNoData"}, "0+3x20"),
            series("fleetslo_controller_decisions_total", {**T, "reason": "Steady"}, "0+3x20"),
        ],
        [(20, [])],
    ),
    Case(
        A.SLO_BUCKET_MISSING,
        "vLLM has no le=0.5 TTFT bucket",
        [
            series(f"{TTFT}_count", MP, "0+10x20"),
            series(f"{TTFT}_bucket", {**MP, "le": "0.25"}, "0+10x20"),
        ],
        fires(15, {cv.LABEL_SLO: "ttft"}, 150),
    ),
]


def one(alerts: Sequence[Alert], case: Case) -> Alert:
    """The rule of ``case``; the SLO label of its first firing check picks ttft or tpot."""
    slo = next((labels.get(cv.LABEL_SLO) for _, firing in case.checks for labels, _ in firing), None)
    (match,) = [a for a in alerts if a.alert == case.alert and a.labels.get(cv.LABEL_SLO, slo) == slo]
    return match


def promtool_test(case: Case, alerts: Sequence[Alert]) -> dict[str, Any]:
    rule = one(alerts, case)
    checks = [
        {"eval_time": f"{t}m", "alertname": case.alert.value,
         "exp_alerts": [expected(rule, labels, value) for labels, value in firing]}
        for t, firing in case.checks
    ]  # fmt: skip
    return {"name": f"{case.alert.value}: {case.description}", "interval": "1m",
            "input_series": case.input, "alert_rule_test": checks}  # fmt: skip


def test_every_health_alert_fires_on_time_and_only_on_its_breach(tmp_path: Path) -> None:
    rules = write_rules(tmp_path, [], health=True)
    alerts = health_group().alerts()
    run_promtool(tmp_path, rules, [promtool_test(c, alerts) for c in HEALTH_CASES])


def test_every_per_target_alert_fires_on_time_and_only_on_its_breach(tmp_path: Path) -> None:
    rules = write_rules(tmp_path, [spec()])
    alerts = target_group(target_spec(spec())).alerts()
    run_promtool(tmp_path, rules, [promtool_test(c, alerts) for c in TARGET_CASES])
